package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
)

// TestDCGMExporterYAMLServesThroughTheBinary starts gpuscope as
// dcgm-exporter 4.8.3's chart would, with a version 2 YAML configuration
// (deployment/README.md's form) naming the counters file, and
// --health-require-gpus: the file's fields are served, /health is ok with
// GPUs present, and the watch retention the YAML sets is reported as
// changing nothing.
func TestDCGMExporterYAMLServesThroughTheBinary(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "counters.csv")
	require.NoError(t, os.WriteFile(csv, []byte("DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_EXP_XID_ERRORS_TOTAL, counter, x\n"), 0o644))
	yml := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(yml, []byte("version: 2\nmetrics:\n  file: "+csv+"\nserver:\n  maxConcurrentScrapes: 4\n"+
		"sources:\n  dcgm:\n    watch:\n      maxKeepAge: 10m\ncollections:\n  - name: scrape\n    every: 500ms\n    metrics:\n      include: [\"*\"]\n"), 0o644))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(os.Args[0], "--source", "sim", "--sim-gpus", "2", "--address", addr, "--hostname", "n", "--health-require-gpus")
	cmd.Env = append(os.Environ(), runMainEnv+"=1", "DCGM_EXPORTER_CONFIG_FILE="+yml)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("output:\n%s", out.String())
		}
	})
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	require.True(t, testwait.Every(30*time.Second, 20*time.Millisecond, func() bool {
		code, _ := get("/ready")
		return code == http.StatusOK
	}), "gpuscope serves")
	code, body := get("/health")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\n", body)
	_, metrics := get("/metrics")
	assert.Contains(t, metrics, "\nDCGM_FI_DEV_GPU_TEMP{", "the counters file the YAML names")
	assert.Contains(t, out.String(), "own bounded rings", "the YAML's watch retention is reported")
	assert.True(t, strings.Contains(out.String(), "sources.dcgm.watch in "+yml), "naming the key and the file")
}

// The YAML's watch groups set the interval of the counters lines they
// match, at start and on each reload; a group that matches no line stops
// the start, naming the flag, the file, the line and the key.
func TestConfigFileWatchGroupsReachTheCounters(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "counters.csv")
	require.NoError(t, os.WriteFile(csv, []byte("DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DEV_POWER_USAGE, gauge, p\nDCGM_FI_DEV_SM_CLOCK, gauge, c\n"), 0o644))
	tests := []struct {
		name, yaml string
		want       map[string]time.Duration
		wantErr    string
	}{
		{"version 1", "version: 1\ncollection:\n  interval: 10s\n  watchGroups:\n    - name: fast-thermals\n      interval: 500ms\n      fields: [DCGM_FI_DEV_GPU_TEMP, DCGM_FI_DEV_POWER_*]\n",
			map[string]time.Duration{"DCGM_FI_DEV_GPU_TEMP": 500 * time.Millisecond, "DCGM_FI_DEV_POWER_USAGE": 500 * time.Millisecond, "DCGM_FI_DEV_SM_CLOCK": 0}, ""},
		{"version 2", "version: 2\ncollections:\n  - name: scrape\n    every: 10s\n    metrics:\n      include: [\"*\"]\n  - name: clocks\n    every: 2s\n    metrics:\n      include: [\"*_CLOCK\"]\n",
			map[string]time.Duration{"DCGM_FI_DEV_GPU_TEMP": 0, "DCGM_FI_DEV_SM_CLOCK": 2 * time.Second}, ""},
		{"a group matching no line", "version: 1\ncollection:\n  watchGroups:\n    - name: nvlink\n      interval: 5m\n      fields: [DCGM_FI_DEV_NVLINK_PPCNT_*]\n",
			nil, `:4: collection.watchGroups[0]: watch group "nvlink" matches no field of ` + csv},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			yml := filepath.Join(t.TempDir(), "config.yaml")
			require.NoError(t, os.WriteFile(yml, []byte(tt.yaml), 0o644))
			p, err := parseArgs(t, "--config-file", yml, "-f", csv)
			require.NoError(t, err)
			set, err := loadCountersFrom(t.Context(), p.cfg, logrus.NewEntry(logrus.New()))
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "--config-file: "+yml+tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, 10*time.Second, p.cfg.Collection.DefaultInterval, "the all-fields interval is -c")
			for _, f := range set.Fields {
				if want, ok := tt.want[f.Name]; ok {
					assert.Equal(t, want, f.Interval, f.Name)
				}
			}
		})
	}
}
