package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/config"
	"github.com/gpuscope/gpuscope/source"
)

// TestEveryRegisteredSourceIsWired: each registered source is accepted by
// --source and named in its help, opens through its registration (the sim
// everywhere; the others where their library answers, and otherwise fail
// with a message naming the flag and the source), and when it reads fields
// of its own, `counters list` and /fields know them.
func TestEveryRegisteredSourceIsWired(t *testing.T) {
	kinds := source.Kinds()
	require.NotEmpty(t, kinds)
	var in config.Input
	help := ""
	for _, o := range config.Options(&in) {
		if o.Name == config.FlagSource {
			help = o.Usage
		}
	}
	require.NotEmpty(t, help, "--source has help")
	supports := map[string]bool{}
	for _, s := range sourceSupport() {
		supports[s.Source] = true
	}
	for _, k := range kinds {
		t.Run(k.Name, func(t *testing.T) {
			p, err := parseArgs(t, "--source", k.Name)
			require.NoError(t, err)
			assert.Equal(t, config.Source(k.Name), p.cfg.Source)
			assert.Contains(t, help, k.Name)

			log := logrus.New()
			log.SetOutput(&bytes.Buffer{})
			src, err := openSource(p.cfg, logrus.NewEntry(log), nil)
			if err != nil {
				assert.NotEqual(t, config.SourceSim, p.cfg.Source, "the sim opens on any machine")
				assert.True(t, strings.HasPrefix(err.Error(), "--source="+k.Name+": "), err.Error())
			} else {
				assert.Equal(t, k.Name, src.Name())
				require.NoError(t, src.Close())
			}

			assert.Equal(t, k.Support != nil, supports[k.Name], "counters list and /fields read its support")
			if k.Support != nil {
				var out bytes.Buffer
				require.NoError(t, listCounters(&out, sourceSupport(), k.Name, "table"))
				assert.NotEmpty(t, out.String())
			}
		})
	}
}
