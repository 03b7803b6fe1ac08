package exitcode

import (
	"errors"
	"fmt"
	"testing"
)

func TestOf(t *testing.T) {
	bad := Usage(errors.New("--port: not a number"))
	for _, tt := range []struct {
		name string
		err  error
		want int
	}{
		{"a bad command line", bad, 2},
		{"a bad command line, wrapped", fmt.Errorf("gpuscope: %w", bad), 2},
		{"in a joined error", errors.Join(errors.New("other"), bad), 2},
		{"a failure", errors.New("no GPU"), 1},
		{"nothing to answer", NotFound(errors.New("no GPU series for the job")), 3},
		{"nothing to answer, wrapped", fmt.Errorf("report: %w", NotFound(errors.New("no such pod"))), 3},
	} {
		if got := Of(tt.err); got != tt.want {
			t.Errorf("%s: Of(%v) = %d, want %d", tt.name, tt.err, got, tt.want)
		}
	}
	if Usage(nil) != nil || NotFound(nil) != nil {
		t.Error("Usage(nil) or NotFound(nil) is not nil")
	}
	if bad.Error() != "--port: not a number" || !errors.Is(bad, errors.Unwrap(bad)) {
		t.Errorf("Usage changes the message or the chain: %q", bad)
	}
}
