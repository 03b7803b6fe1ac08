package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
)

// TestPodLabelsFlagErrors checks that --kubernetes.pod-labels stops gpuscope
// with an error naming the flag when it cannot work.
func TestPodLabelsFlagErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"without --kubernetes", []string{"--source", "sim", "--kubernetes.pod-labels", "team"}, nil,
			"--kubernetes.pod-labels needs --kubernetes"},
		{"bad regular expression", []string{"--source", "sim", "--kubernetes", "--kubernetes.pod-labels", "team("}, nil,
			`--kubernetes.pod-labels: allowlist "team(" is not a valid regular expression`},
		{"bad regular expression in the variable", []string{"--source", "sim", "-k"}, map[string]string{"GPUSCOPE_KUBERNETES_POD_LABELS": "[a-"},
			"--kubernetes.pod-labels: allowlist"},
		{"outside a pod", []string{"--source", "sim", "--kubernetes", "--kubernetes.pod-labels", "team", "--hostname", "node-1"},
			map[string]string{"KUBERNETES_SERVICE_HOST": "", "KUBERNETES_SERVICE_PORT": ""}, "--kubernetes.pod-labels: pod labels: KUBERNETES_SERVICE_HOST"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, err := run(t, tt.args...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestPodLabelsFlagIsOffByDefault(t *testing.T) {
	app := newApp()
	var got string
	set := false
	app.Action = func(c *cli.Context) error { got, set = c.String(flagPodLabels), c.IsSet(flagPodLabels); return nil }
	require.NoError(t, app.Run([]string{"gpuscope", "--kubernetes"}))
	assert.Empty(t, got)
	assert.False(t, set)
}
