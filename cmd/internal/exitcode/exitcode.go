// Package exitcode tells a bad command line from a failure for the
// commands' exit status: 2 for the first, as flag parsing conventionally
// does, 1 for anything else.
package exitcode

import "errors"

// usageError is a bad command line: an unknown flag, a bad value, an
// argument where none is taken.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// Usage marks err as a bad command line; nil stays nil.
func Usage(err error) error {
	if err == nil {
		return nil
	}
	return usageError{err}
}

// Of is the exit status for err: 2 when a Usage error is in its chain, 1
// otherwise.
func Of(err error) int {
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	return 1
}
