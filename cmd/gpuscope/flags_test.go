package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/gpuscope/gpuscope/internal/config"
)

// parseServeFlags runs the serve flags alone over args into a zero Input.
func parseServeFlags(t *testing.T, args ...string) config.Input {
	t.Helper()
	var in config.Input
	app := &cli.App{Name: "gpuscope", Flags: serveFlags(&in), Action: func(c *cli.Context) error {
		config.FillSlices(&in, c.StringSlice)
		return nil
	}}
	require.NoError(t, app.Run(append([]string{"gpuscope"}, args...)))
	return in
}

// TestServeFlagsStartFromTheOptionsDefaults: a command line that gives no
// flag fills the Input with exactly config.Defaults(), and each kind of
// option is filled from its flag or its variable.
func TestServeFlagsStartFromTheOptionsDefaults(t *testing.T) {
	assert.Equal(t, config.Defaults(), parseServeFlags(t))

	t.Setenv("GPUSCOPE_SIM_SEED", "7")
	t.Setenv("DCGM_EXPORTER_REPLACE_BLANKS_IN_MODEL_NAME", "true")
	in := parseServeFlags(t, "-a", ":1", "--insight-window", "5s", "-k", "--sim-gpus", "3", "--sim-event-rate", "0.5",
		"--kubernetes-resource-names", "a.com/gpu", "--kubernetes-resource-names", "b.com/gpu")
	assert.Equal(t, ":1", in.Web.Address)
	assert.Equal(t, 5*time.Second, in.Engine.Insight.Window)
	assert.True(t, in.Kubernetes)
	assert.Equal(t, 3, in.SimGPUs)
	assert.Equal(t, 0.5, in.SimEventRate)
	assert.Equal(t, int64(7), in.SimSeed)
	assert.True(t, in.Engine.ReplaceBlanksInModelName)
	assert.Equal(t, []string{"a.com/gpu", "b.com/gpu"}, in.PodAttr.ResourceNames)
}
