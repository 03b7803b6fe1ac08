package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/gpuscope/gpuscope/cmd/internal/exitcode"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	app := newApp()
	var out bytes.Buffer
	app.Writer, app.ErrWriter = &out, &out
	app.ExitErrHandler = func(*cli.Context, error) {}
	err := app.Run(append([]string{"gpuscope"}, args...))
	return out.String(), err
}

// TestHelpIsReadable: each client's help names it as users call it
// (gpuscope top, gpuscope capture) and fits the width of gpuscope's.
func TestHelpIsReadable(t *testing.T) {
	for _, cmd := range []string{"capture", "top"} {
		t.Run(cmd, func(t *testing.T) {
			out, err := run(t, cmd, "--help")
			require.NoError(t, err)
			assert.Contains(t, out, "gpuscope "+cmd)
			assert.Contains(t, out, "--address")
			for i, line := range strings.Split(out, "\n") {
				assert.LessOrEqual(t, len(line), helpWidth, "line %d: %q", i+1, line)
			}
		})
	}
}

func TestBadArgumentsExitTwo(t *testing.T) {
	tests := []struct {
		args []string
		msg  string
	}{
		{[]string{"top", "extra"}, `top: unexpected argument "extra"`},
		{[]string{"capture", "-o", "x.json", "--duration", "-1s"}, "--duration -1s: must not be negative"},
		{[]string{"top", "--no-such-flag"}, "no-such-flag"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := run(t, tt.args...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.msg)
			assert.Equal(t, 2, exitcode.Of(err))
		})
	}
}
