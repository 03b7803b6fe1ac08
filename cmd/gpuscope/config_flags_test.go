package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/cmd/internal/exitcode"
)

// TestErrorsNameTheFlagAsTyped: a problem is reported under the long name
// the user typed (dcgm-exporter's, say); a one-letter alias or a variable
// is reported under the flag's first name.
func TestErrorsNameTheFlagAsTyped(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"gpuscope's name", []string{"--dcgm-remote-hostengine", "h:1:2"}, nil, `--dcgm-remote-hostengine "h:1:2"`},
		{"dcgm-exporter's name", []string{"--remote-hostengine-info", "h:1:2"}, nil, `--remote-hostengine-info "h:1:2"`},
		{"dcgm-exporter's name with =", []string{"--remote-hostengine-info=h:1:2"}, nil, `--remote-hostengine-info "h:1:2"`},
		{"a one-letter alias", []string{"-r", "h:1:2"}, nil, `--dcgm-remote-hostengine "h:1:2"`},
		{"dcgm-exporter's variable", nil, map[string]string{"DCGM_REMOTE_HOSTENGINE_INFO": "h:1:2"}, `--dcgm-remote-hostengine "h:1:2"`},
		{"web config under dcgm-exporter's name", []string{"--web-config-file", "/nonexistent/w.yml"}, nil, "--web-config-file /nonexistent/w.yml"},
		{"resource names under dcgm-exporter's name", []string{"-k", "--nvidia-resource-names", "nvidia.com/*gpu"}, nil,
			`--nvidia-resource-names: "nvidia.com/*gpu" is not a resource name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, err := parseArgs(t, tt.args...)
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), tt.want), "%q starts with %q", err, tt.want)
			assert.Equal(t, 2, exitcode.Of(err))
		})
	}
}

// TestEveryProblemOfACommandLineAtOnce: flags and variables with several
// mistakes stop gpuscope with all of them, one per line.
func TestEveryProblemOfACommandLineAtOnce(t *testing.T) {
	t.Setenv("DCGM_EXPORTER_INTERVAL", "soon")
	_, err := parseArgs(t, "--log-format", "xml", "-d", "x:1", "--dcgm-mode", "bogus", "--web-max-connections", "0")
	require.Error(t, err)
	assert.Equal(t, 2, exitcode.Of(err))
	lines := strings.Split(err.Error(), "\n")
	assert.Len(t, lines, 5, err.Error())
	for _, want := range []string{`--collect-interval "soon"`, `--log-format "xml"`, `--devices "x:1"`,
		`--dcgm-mode "bogus"`, "--web-max-connections 0: at least 1"} {
		assert.Contains(t, err.Error(), want)
	}
}
