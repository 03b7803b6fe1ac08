// Package exitcode tells a bad command line from a failure for the
// commands' exit status: 2 for the first, as flag parsing conventionally
// does, 3 for a question with nothing to answer (a report on a job that
// holds no GPU in the range), 1 for anything else.
package exitcode

import "errors"

// usageError is a bad command line: an unknown flag, a bad value, an
// argument where none is taken.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// notFoundError is a well-formed question whose subject does not exist.
type notFoundError struct{ err error }

func (n notFoundError) Error() string { return n.err.Error() }
func (n notFoundError) Unwrap() error { return n.err }

// Usage marks err as a bad command line; nil stays nil.
func Usage(err error) error {
	if err == nil {
		return nil
	}
	return usageError{err}
}

// NotFound marks err as nothing to answer: the command ran and found no
// data for what it was asked about, which a script tells from a failure
// to ask (exit status 3, not 1); nil stays nil.
func NotFound(err error) error {
	if err == nil {
		return nil
	}
	return notFoundError{err}
}

// Of is the exit status for err: 2 when a Usage error is in its chain, 3
// when a NotFound one is, 1 otherwise.
func Of(err error) int {
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	var n notFoundError
	if errors.As(err, &n) {
		return 3
	}
	return 1
}
