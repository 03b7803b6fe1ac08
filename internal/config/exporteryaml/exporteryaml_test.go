package exporteryaml

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ptr[T any](v T) *T { return &v }

// The files below are the forms dcgm-exporter documents: version 1 as
// internal/pkg/appconfig/yaml_config.go reads it at commit 7ad58324, and
// version 2 as its chart's deployment/README.md shows it (newest stored
// copy, after 4.8.3).
func TestParseReadsBothVersions(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       Settings
	}{
		{"version 1: file and interval", `
version: 1
metrics:
  file: /etc/dcgm-exporter/default-counters.csv
collection:
  interval: 30s
`, Settings{Version: 1, CountersFile: "/etc/dcgm-exporter/default-counters.csv", CollectInterval: ptr(30 * time.Second)}},
		{"version 1: watch groups", `
version: 1
collection:
  interval: 30s
  watchGroups:
    - name: fast-thermals
      interval: 5s
      fields:
        - DCGM_FI_DEV_GPU_TEMP
        - DCGM_FI_DEV_POWER_USAGE
    - name: slow-nvlink-prm
      interval: 5m
      fields:
        - DCGM_FI_DEV_NVLINK_PPCNT_*
`, Settings{Version: 1, CollectInterval: ptr(30 * time.Second), WatchGroups: WatchGroups{
			{Name: "fast-thermals", Interval: 5 * time.Second, Patterns: []string{"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE"}, Where: "config.yaml:6: collection.watchGroups[0]"},
			{Name: "slow-nvlink-prm", Interval: 5 * time.Minute, Patterns: []string{"DCGM_FI_DEV_NVLINK_PPCNT_*"}, Where: "config.yaml:11: collection.watchGroups[1]"},
		}}},
		{"version 2: the chart's example", `
version: 2
metrics:
  file: /etc/dcgm-exporter/default-counters.csv
  enableExporterMetrics: true
server:
  maxConcurrentScrapes: 16
sources:
  dcgm:
    watch:
      maxKeepAge: 10m
      maxKeepSamples: 0
    detectBindUnbind:
      enabled: true
      pollInterval: 2s
collections:
  - name: scrape
    every: 30s
    sources:
      dcgm:
        watch:
          maxKeepAge: 0s
          maxKeepSamples: 2
    metrics:
      include: ["*"]
  - name: fast-thermals
    every: 5s
    metrics:
      include:
        - DCGM_FI_DEV_GPU_TEMP
`, Settings{Version: 2, CountersFile: "/etc/dcgm-exporter/default-counters.csv", CollectInterval: ptr(30 * time.Second),
			EnableExporterMetrics: ptr(true), MaxConcurrentScrapes: ptr(16), WatchMaxKeepAge: ptr(10 * time.Minute),
			WatchMaxKeepSamples: ptr(int64(0)), BindUnbind: ptr(true), BindUnbindPoll: ptr(2 * time.Second),
			WatchGroups: WatchGroups{{Name: "fast-thermals", Interval: 5 * time.Second, Patterns: []string{"DCGM_FI_DEV_GPU_TEMP"},
				Where: "config.yaml:26: collections[1]"}}}},
		{"version 2: nothing but the version", "version: 2\n", Settings{Version: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse("config.yaml", []byte(tt.yaml))
			require.NoError(t, err)
			assert.Equal(t, &tt.want, got)
		})
	}
}

// Every refusal names the file, the line and the key, and says why or
// what to do instead.
func TestParseRefusesWithFileLineAndKey(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       string
	}{
		{"no version", "metrics:\n  file: a.csv\n", "config.yaml:1: version: missing"},
		{"version 3", "version: 3\n", "config.yaml:1: version: 3: gpuscope reads versions 1 and 2"},
		{"unknown top-level key", "version: 1\nlabels: {}\n", `config.yaml:2: labels: not a key of dcgm-exporter's configuration`},
		{"unknown nested key", "version: 2\nserver:\n  port: 9400\n", "config.yaml:3: server.port: not a key"},
		{"mixed versions", "version: 1\ncollections: []\n", "config.yaml:2: collections: a version 2 key"},
		{"mixed versions, other way", "version: 2\ncollection:\n  interval: 1s\n", "config.yaml:2: collection: the version 1 key"},
		{"version 1 has no enableExporterMetrics", "version: 1\nmetrics:\n  enableExporterMetrics: true\n", "config.yaml:3: metrics.enableExporterMetrics: not a key"},
		{"inline fields", "version: 1\nmetrics:\n  fields:\n    - name: DCGM_FI_DEV_GPU_TEMP\n      prometheusType: gauge\n      help: t\n",
			"config.yaml:3: metrics.fields: inline field definitions are not read by gpuscope: write them as counters CSV lines"},
		{"file and fields", "version: 1\nmetrics:\n  file: a.csv\n  fields: []\n", "config.yaml:4: metrics: give exactly one of file or fields"},
		{"watch group without a name", "version: 1\ncollection:\n  watchGroups:\n    - interval: 5s\n      fields: [DCGM_FI_DEV_GPU_TEMP]\n",
			"config.yaml:4: collection.watchGroups[0].name: missing"},
		{"watch group named twice", "version: 1\ncollection:\n  watchGroups:\n    - {name: a, interval: 5s, fields: [X]}\n    - {name: a, interval: 6s, fields: [Y]}\n",
			`config.yaml:5: collection.watchGroups[1].name: "a" is given twice`},
		{"watch group without fields", "version: 1\ncollection:\n  watchGroups:\n    - {name: a, interval: 5s, fields: []}\n",
			"config.yaml:4: collection.watchGroups[0].fields: want a list of field names or patterns"},
		{"watch group too fast", "version: 1\ncollection:\n  watchGroups:\n    - {name: a, interval: 10ms, fields: [X]}\n",
			"config.yaml:4: collection.watchGroups[0]: 10ms: gpuscope samples at most every 100ms"},
		{"bad pattern", "version: 2\ncollections:\n  - name: a\n    every: 5s\n    metrics:\n      include: [\"DCGM_[\"]\n",
			`config.yaml:3: collections[0]: "DCGM_[" is not a glob pattern`},
		{"collection without every", "version: 2\ncollections:\n  - name: a\n    metrics:\n      include: [X]\n",
			"config.yaml:3: collections[0].every: missing"},
		{"bad interval", "version: 1\ncollection:\n  interval: often\n", `config.yaml:3: collection.interval: "often": want a Go duration`},
		{"zero interval", "version: 1\ncollection:\n  interval: 0s\n", `config.yaml:3: collection.interval: "0s": must be greater than 0`},
		{"bad scrape limit", "version: 2\nserver:\n  maxConcurrentScrapes: 0\n", "config.yaml:3: server.maxConcurrentScrapes: 0: at least 1"},
		{"bad boolean", "version: 2\nmetrics:\n  enableExporterMetrics: yes please\n", `config.yaml:3: metrics.enableExporterMetrics: "yes please": want true or false`},
		{"repeated key", "version: 1\nversion: 1\n", "config.yaml:2: version: given twice"},
		{"two documents", "version: 1\n---\nversion: 1\n", "config.yaml: holds more than one YAML document"},
		{"empty", "", "config.yaml: empty"},
		{"not YAML", "version: [1\n", "config.yaml: yaml:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("config.yaml", []byte(tt.yaml))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte("version: 1\ncollection:\n  interval: 2s\n"), 0o600))
	s, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, ptr(2*time.Second), s.CollectInterval)

	_, err = Load(filepath.Join(dir, "missing.yaml"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "missing.yaml")

	big := filepath.Join(dir, "big.yaml")
	require.NoError(t, os.WriteFile(big, make([]byte, maxFileBytes+1), 0o600))
	_, err = Load(big)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "big.yaml: larger than")
}
