// Package e2e runs the real gpuscope binary against a real Prometheus server.
package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

// TestCompatFieldsReachPrometheusForAllGPUs is the product's promise in one
// test: the default counters file, on 8 simulated GPUs, scraped by a real
// Prometheus, gives every enabled field on every GPU with dcgm-exporter's
// labels.
func TestCompatFieldsReachPrometheusForAllGPUs(t *testing.T) {
	root := e2etest.RepoRoot()
	csv := filepath.Join(root, "etc", "default-counters.csv")
	set, err := counters.Load(csv)
	require.NoError(t, err)

	// The node-wide training job idles through its start-up on every GPU,
	// so every GPU has a clock-event reason set within the first minute;
	// DCGM_EXP_CLOCK_EVENTS_COUNT shows no series for a GPU that never had
	// one, as dcgm-exporter does, and the mixed workloads keep some GPUs
	// busy from the first sample.
	base, _ := e2etest.GPUScope(t, "--source", "sim", "--collectors", csv, "--sim-seed", "7", "--sim-workload", "data-parallel")
	prom := e2etest.Prometheus(t, []string{strings.TrimPrefix(base, "http://")})

	// Every gauge and counter of the file, on all 8 GPUs.
	var names []string
	for _, f := range set.Fields {
		if f.Type == counters.Label {
			continue
		}
		names = append(names, f.Name)
	}
	require.NotEmpty(t, names)
	e2etest.Eventually(t, prom, `count by (__name__) ({__name__=~"`+strings.Join(names, "|")+`", job="gpuscope"})`, 60*time.Second,
		func(res []e2etest.Sample) error {
			got := map[string]float64{}
			for _, s := range res {
				got[s.Metric["__name__"]] = s.Value
			}
			var missing []string
			for _, n := range names {
				ok := got[n] == 8
				switch n {
				case "DCGM_EXP_XID_ERRORS_COUNT":
					// One series per XID seen, or one zero series per GPU.
					ok = got[n] >= 8
				case "DCGM_EXP_CLOCK_EVENTS_COUNT":
					// One series per reason seen; a busy GPU that nothing
					// throttles has samples without a bit and so, as in
					// dcgm-exporter, no series (the engine tests pin the
					// shape).
					ok = got[n] > 0
				}
				if !ok {
					missing = append(missing, fmt.Sprintf("%s=%v", n, got[n]))
				}
			}
			if len(missing) > 0 {
				return fmt.Errorf("fields without %s series: %v", "8 GPUs'", missing)
			}
			return nil
		})

	res, err := e2etest.Query(t, prom, `DCGM_FI_DEV_GPU_TEMP{gpu="3"}`)
	require.NoError(t, err)
	require.Len(t, res, 1)
	m := res[0].Metric
	assert.Equal(t, "nvidia3", m["device"])
	assert.Regexp(t, `^GPU-[0-9a-f]{8}-`, m["UUID"])
	assert.Regexp(t, `^00000000:[0-9A-F]{2}:00\.0$`, m["pci_bus_id"])
	assert.Equal(t, "NVIDIA H100 80GB HBM3", m["modelName"])
	assert.Equal(t, "e2e-node", m["Hostname"])
	assert.NotEmpty(t, m["DCGM_FI_DRIVER_VERSION"], "label-type fields become labels")
	assert.Greater(t, res[0].Value, 20.0)
	assert.Less(t, res[0].Value, 100.0)

	up, err := e2etest.Query(t, prom, `gpuscope_source_up{source="sim"}`)
	require.NoError(t, err)
	require.Len(t, up, 1)
	assert.Equal(t, 1.0, up[0].Value)
}

func TestEndpoints(t *testing.T) {
	base, _ := e2etest.GPUScope(t, "--source", "sim", "--sim-gpus", "2")
	for _, c := range []struct {
		path, contains string
	}{
		{"/health", "ok"},
		{"/ready", "up"},
		{"/", "gpuscope"},
		{"/metrics", "gpuscope_build_info"},
	} {
		resp, err := http.Get(base + c.path)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, c.path)
		assert.Contains(t, string(body), c.contains, c.path)
	}
	resp, err := http.Post(base+"/api/v1/profiling/pause", "application/json", nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "the profiling API is off without --web.enable-profiling-api")
}

// TestNoGPUIsAClearError runs the real binary where there is neither DCGM nor
// an NVIDIA driver: auto mode tries both and says what is missing and what to
// do, instead of serving nothing.
func TestNoGPUIsAClearError(t *testing.T) {
	// The loaded kernel module, not /dev/nvidiactl: NVIDIA's library makes
	// that node itself when run as root, with no driver behind it.
	if _, err := os.Stat("/proc/driver/nvidia/version"); err == nil {
		t.Skip("this machine has an NVIDIA driver")
	}
	out, err := exec.Command(e2etest.Binary(t), "--address", e2etest.FreePort(t)).CombinedOutput()
	require.Error(t, err, "gpuscope must not start without a source")
	for _, want := range []string{"libdcgm.so.4", "libnvidia-ml.so.1", "--source=sim", "runtime class"} {
		assert.Contains(t, string(out), want)
	}
}
