package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
)

func TestPodLabelsFlagIsOffByDefault(t *testing.T) {
	app := newApp()
	var got string
	set := false
	app.Action = func(c *cli.Context) error { got, set = c.String(flagPodLabels), c.IsSet(flagPodLabels); return nil }
	require.NoError(t, app.Run([]string{"gpuscope", "--kubernetes"}))
	assert.Empty(t, got)
	assert.False(t, set)
}
