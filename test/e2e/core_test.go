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
// labels, or, where the GPU cannot serve a field, no series of it but
// gpuscope_field_supported 0 with the reason (absent, never 0).
func TestCompatFieldsReachPrometheusForAllGPUs(t *testing.T) {
	root := e2etest.RepoRoot()
	csv := filepath.Join(root, "etc", "default-counters.csv")
	set, err := counters.Load(csv)
	require.NoError(t, err)

	// The node-wide training job idles through its start-up (20 s and more)
	// on every GPU, so every GPU has the idle clock-event reason set in its
	// first samples; DCGM_EXP_CLOCK_EVENTS_COUNT shows no series for a GPU
	// that never had one, as dcgm-exporter does. That count takes one sample
	// per --collect-interval, as dcgm-exporter samples the field (30 s when
	// the flag is not given): with the default, whether a period's last
	// sample falls in the start-up's idle seconds depends on where the
	// process started within the 30 s, and in about one start in five none
	// does within the first minute. -c 1000 is the interval gpuscope samples
	// at anyway, and makes the count take every sample.
	base, _ := e2etest.GPUScope(t, "--source", "sim", "--collectors", csv, "--sim-seed", "7", "--sim-workload", "data-parallel", "-c", "1000")
	prom := e2etest.Prometheus(t, []string{strings.TrimPrefix(base, "http://")})

	// What the simulated H100 cannot serve, as a real one cannot: a field
	// reported unsupported that is not here fails, as does one here that
	// shows a series.
	lacks := map[string]bool{"DCGM_FI_DEV_FAN_SPEED": true} // passively cooled: no fan

	// Every gauge and counter of the file, on each of the 8 GPUs.
	var names []string
	for _, f := range set.Fields {
		if f.Type == counters.Label {
			continue
		}
		names = append(names, f.Name)
	}
	require.NotEmpty(t, names)
	query := `group by (__name__, gpu) ({__name__=~"` + strings.Join(names, "|") + `", job="gpuscope"})` +
		` or min by (__name__, gpu, field, reason) (gpuscope_field_supported{job="gpuscope"})`
	e2etest.Eventually(t, prom, query, 60*time.Second, func(res []e2etest.Sample) error {
		return everyFieldOnEveryGPU(res, names, 8, lacks)
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
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "the profiling API is off without --web-enable-profiling-api")
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

// everyFieldOnEveryGPU checks that each field has a series on each GPU, or
// none there and gpuscope_field_supported 0 with a reason instead, and that
// the fields so reported are exactly those the GPUs lack.
func everyFieldOnEveryGPU(res []e2etest.Sample, names []string, gpus int, lacks map[string]bool) error {
	type key struct{ field, gpu string }
	has, unsupported := map[key]bool{}, map[key]bool{}
	var problems []string
	for _, s := range res {
		m := s.Metric
		if m["__name__"] != "gpuscope_field_supported" {
			has[key{m["__name__"], m["gpu"]}] = true
			continue
		}
		if s.Value != 0 || m["reason"] == "" {
			problems = append(problems, fmt.Sprintf("gpuscope_field_supported{field=%q,gpu=%q,reason=%q} %v: want 0 with a reason", m["field"], m["gpu"], m["reason"], s.Value))
			continue
		}
		unsupported[key{m["field"], m["gpu"]}] = true
	}
	for _, n := range names {
		var without, unsup, both []string
		for g := range gpus {
			k := key{n, fmt.Sprint(g)}
			switch {
			case has[k] && unsupported[k]:
				both = append(both, k.gpu)
			case unsupported[k]:
				unsup = append(unsup, k.gpu)
			case !has[k]:
				without = append(without, k.gpu)
			}
		}
		switch {
		case len(both) > 0:
			problems = append(problems, fmt.Sprintf("%s has series and is reported unsupported on GPU %v", n, both))
		case len(without) > 0:
			problems = append(problems, fmt.Sprintf("%s: no series and no reason on GPU %v", n, without))
		case len(unsup) > 0 && !lacks[n]:
			problems = append(problems, fmt.Sprintf("%s reported unsupported on GPU %v, which serve it", n, unsup))
		case len(unsup) == 0 && lacks[n]:
			problems = append(problems, fmt.Sprintf("%s has series on GPUs that lack it", n))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("fields not on all %d GPUs as they should be: %v", gpus, problems)
	}
	return nil
}
