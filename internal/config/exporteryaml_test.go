package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeYAML writes a dcgm-exporter YAML configuration for one test.
func writeYAML(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

// dcgm-exporter applies its YAML, then the flags and variables given
// explicitly (pkg/cmd/app.go, contextToConfig and
// applyExplicitConfigOverrides): a flag given wins, a default does not.
func TestConfigFileFillsWhatNoFlagGave(t *testing.T) {
	path := writeYAML(t, `version: 2
metrics:
  file: /etc/dcgm-exporter/from-yaml.csv
  enableExporterMetrics: true
server:
  maxConcurrentScrapes: 8
sources:
  dcgm:
    detectBindUnbind:
      enabled: true
      pollInterval: 3s
    watch:
      maxKeepAge: 1m
collections:
  - name: scrape
    every: 10s
    metrics:
      include: ["*"]
`)
	tests := []struct {
		name  string
		edit  func(*Input)
		check func(t *testing.T, c *Config)
	}{
		{"the file alone", nil, func(t *testing.T, c *Config) {
			assert.Equal(t, "/etc/dcgm-exporter/from-yaml.csv", c.Counters.File)
			assert.Equal(t, 10*time.Second, c.Collection.DefaultInterval)
			assert.Equal(t, 10*time.Second, c.Collection.ClockEventsPeriod, "the clock-event count follows the interval, as with -c")
			assert.Equal(t, 8, c.Web.MaxConcurrentScrapes)
			assert.Equal(t, 3*time.Second, c.Collection.BindUnbindPoll)
			assert.Equal(t, time.Minute, c.Collection.WatchMaxKeepAge)
			require.Len(t, c.Warnings, 1, "the watch retention changes nothing, and says so")
			assert.Contains(t, c.Warnings[0].Message, "own bounded rings")
		}},
		{"flags given win", func(in *Input) {
			in.Collectors, in.CollectInterval, in.Web.MaxConcurrentScrapes = "/tmp/mine.csv", "2s", 2
			in.Given = map[string]string{FlagCollectors: "-f", FlagCollectInterval: "-c", FlagMaxConcurrentScrapes: ""}
		}, func(t *testing.T, c *Config) {
			assert.Equal(t, "/tmp/mine.csv", c.Counters.File)
			assert.Equal(t, 2*time.Second, c.Collection.DefaultInterval)
			assert.Equal(t, 2, c.Web.MaxConcurrentScrapes)
		}},
		{"-m given keeps the ConfigMap", func(in *Input) {
			in.ConfigMapData = "gpu-operator:metrics"
			in.Given = map[string]string{FlagConfigMapData: "-m"}
		}, func(t *testing.T, c *Config) {
			assert.Equal(t, "", c.Counters.File)
			require.NotNil(t, c.Counters.ConfigMap)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Build(input(func(in *Input) {
				in.ConfigFile = path
				if tt.edit != nil {
					tt.edit(in)
				}
			}))
			require.NoError(t, err)
			assert.Equal(t, path, c.ConfigFile)
			tt.check(t, c)
		})
	}
}

func TestConfigFileErrorsNameTheFlagTheFileAndTheKey(t *testing.T) {
	path := writeYAML(t, "version: 1\ncollection:\n  interval: 1s\nmetrics:\n  fields:\n    - {name: DCGM_FI_DEV_GPU_TEMP, prometheusType: gauge, help: t}\n")
	_, err := Build(input(func(in *Input) { in.ConfigFile = path }))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--config-file: "+path+":5: metrics.fields: inline field definitions are not read by gpuscope")

	_, err = Build(input(func(in *Input) { in.ConfigFile = filepath.Join(t.TempDir(), "none.yaml") }))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--config-file: reading the YAML configuration")
	assert.Contains(t, err.Error(), "none.yaml")
}
