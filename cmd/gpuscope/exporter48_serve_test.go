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
