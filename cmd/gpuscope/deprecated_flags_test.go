package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/config"
	"github.com/gpuscope/gpuscope/internal/engine"
)

// TestDottedSpellingsStillWork: each earlier dotted spelling of a flag is
// accepted on the command line, sets the flag, and leaves one warning for
// the start log that names the spelling typed; --help lists it under
// DEPRECATED NAMES with the name to use, and nowhere among dcgm-exporter's.
func TestDottedSpellingsStillWork(t *testing.T) {
	help, err := run(t, "--help")
	require.NoError(t, err)
	deprecatedSection, compatSection := "", help
	if i := strings.Index(help, "DEPRECATED NAMES:"); assert.GreaterOrEqual(t, i, 0, "--help has no DEPRECATED NAMES") {
		deprecatedSection, compatSection = help[i:], help[:i]
	}
	for _, tt := range []struct {
		old, value string
		got        func(*config.Config) any
		want       any
	}{
		{"kubernetes.pod-labels", "app", func(c *config.Config) any { return c.Kubernetes.PodLabels.Expr }, "app"},
		{"dcgm.mode", "remote", func(c *config.Config) any { return string(c.DCGM.Mode) }, "remote"},
		{"web.max-connections", "7", func(c *config.Config) any { return c.Web.MaxConnections }, 7},
		{"web.config.file", "/dev/null", func(c *config.Config) any { return c.Web.WebConfigFile }, "/dev/null"},
	} {
		t.Run(tt.old, func(t *testing.T) {
			args := []string{"--" + tt.old + "=" + tt.value, "--kubernetes", "--dcgm-remote-hostengine=h:5555"}
			p, err := parseArgs(t, args...)
			require.NoError(t, err)
			assert.Equal(t, tt.want, tt.got(p.cfg))
			var warned []string
			for _, w := range p.cfg.Warnings {
				if strings.Contains(w.Message, "deprecated") {
					warned = append(warned, w.Flag+" "+w.Message)
				}
			}
			newName := strings.NewReplacer(".", "-").Replace(tt.old)
			assert.Equal(t, []string{"--" + tt.old + " is deprecated: use --" + newName +
				" (the same flag; its variable is unchanged)"}, warned)
			assert.Regexp(t, `(?m)^\s+--`+tt.old+`\s+--`+newName+`$`, deprecatedSection)
			assert.NotContains(t, compatSection, "--"+tt.old+",", "a deprecated name is not one of dcgm-exporter's")
		})
	}
}

// TestRefusedWindowNamesItsFlag: the engine refuses a window its rings
// cannot hold without knowing flags; the command names the flag as the
// user gave it (dcgm-exporter's -x spelling or gpuscope's).
func TestRefusedWindowNamesItsFlag(t *testing.T) {
	for _, tt := range []struct {
		args        []string
		clockEvents bool
		want        string
	}{
		{[]string{"--window=1h"}, false, "a --window of"},
		{nil, false, "a --window of"},
		{[]string{"--clock-events-count-window-size=1h"}, true, "a --clock-events-count-window-size of"},
	} {
		p, err := parseArgs(t, tt.args...)
		require.NoError(t, err)
		err = nameWindow(p.cfg, fmt.Errorf("reload: %w", &engine.WindowError{File: "c.csv", Line: 2, Field: "F", ClockEvents: tt.clockEvents}))
		assert.Contains(t, err.Error(), "reload: c.csv:2: F: "+tt.want, "%v", tt.args)
		assert.ErrorAs(t, err, new(*engine.WindowError))
	}
}
