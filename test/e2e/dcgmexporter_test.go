package e2e

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/compattest"
	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
)

// scrapeUntil fetches /metrics until family appears.
func scrapeUntil(t *testing.T, base, family string, timeout time.Duration) map[string]*dto.MetricFamily {
	t.Helper()
	var mfs map[string]*dto.MetricFamily
	testwait.Every(timeout, 100*time.Millisecond, func() bool {
		resp, err := http.Get(base + "/metrics")
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		parser := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err = parser.TextToMetricFamilies(bytes.NewReader(body))
		require.NoError(t, err)
		return mfs[family] != nil
	})
	require.NotNil(t, mfs[family], "%s did not appear within %s", family, timeout)
	return mfs
}

// TestDCGMExporterCommandLine runs a dcgm-exporter 1.x deployment's command
// line unchanged on the sim: its 1.x counters file, -o (1.x labels), -n
// (ignored since dcgm-exporter 4.0.0), -d g:0,1 (GPUs 0 and 1 only), the device-name GPU IDs, and
// --fake-gpus, which only the DCGM source reads (it warns here).
func TestDCGMExporterCommandLine(t *testing.T) {
	csv := filepath.Join(compattest.Dir(t), "1.x-compatibility-metrics.csv")
	base, _ := e2etest.GPUScope(t, "--source=sim", "--kubernetes-gpu-id-type=device-name", "-d", "g:0,1", "-o", "-n", "--fake-gpus", "-f", csv)
	mfs := scrapeUntil(t, base, "dcgm_gpu_temp", 30*time.Second)
	var gpus []string
	for _, m := range mfs["dcgm_gpu_temp"].Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		gpus = append(gpus, labels["gpu"])
		assert.NotEmpty(t, labels["uuid"], "1.x label uuid")
		assert.NotContains(t, labels, "UUID")
		// dcgm-exporter 4.x reads -n and ignores it: the host label stays.
		assert.NotEmpty(t, labels["Hostname"], "-n is ignored, as in dcgm-exporter")
	}
	sort.Strings(gpus)
	assert.Equal(t, []string{"0", "1"}, gpus)
	assert.NotContains(t, mfs, "DCGM_FI_DEV_GPU_TEMP", "the 1.x file names the families")
}

// dcgm-exporter's own default counters file with --kubernetes
// --kubernetes-virtual-gpus --kubernetes-enable-pod-labels starts and
// serves, as dcgm-exporter does: the label budget counts the vgpu label
// with every other label the engine writes, and caps the pod labels to
// what is left, so no series crosses the 30 labels a remote store accepts.
// The API server is away (nothing listens on its port): pod labels are
// retried in the background, never fatal.
func TestDCGMExporterDefaultCountersWithVirtualGPUsAndPodLabelsServe(t *testing.T) {
	csv := filepath.Join(compattest.Dir(t), "default-counters.csv")
	t.Setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "1")
	dir, err := os.MkdirTemp("", "kubelet")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	base, p := e2etest.GPUScope(t, "--source=sim", "-f", csv, "--kubernetes", "--kubernetes-virtual-gpus",
		"--kubernetes-enable-pod-labels", "--kubernetes-pod-resources-socket", filepath.Join(dir, "kubelet.sock"))
	mfs := scrapeUntil(t, base, "DCGM_FI_DEV_GPU_TEMP", 30*time.Second)
	for name, mf := range mfs {
		for _, m := range mf.Metric {
			// __name__ and three labels Prometheus and the store add.
			assert.LessOrEqual(t, len(m.Label)+4, 30, "%s %v", name, m.Label)
		}
	}
	// A MIG GPU instance carries 8 identity labels, the driver version,
	// pod, namespace, container, pod_uid (always on the per-pod values of
	// GPU_UTIL and FB_USED) and vgpu, 2 of a family and 4 added later: 10
	// pod labels fit.
	assert.Contains(t, p.Output(), "max_pod_labels=10")
}

// Values dcgm-exporter accepts, which gpuscope changes or ignores, start it
// with one warning each: -c below 100ms (an IntFlag of milliseconds in
// pkg/cmd/app.go) is raised to 100ms; the pod-label allowlist without pod
// labels is ignored (internal/pkg/transformation/kubernetes.go).
// --web-disable-exporter-metrics leaves out go_* and process_*, as
// node_exporter's flag does; given by its gpuscope 1.x spelling
// (--web.disable-exporter-metrics) it works and logs one deprecation line.
func TestAcceptedValuesWarnAndExporterMetricsCanBeLeftOut(t *testing.T) {
	base, p := e2etest.GPUScope(t, "--source=sim", "--sim-gpus=1", "-c", "10", "--kubernetes-pod-label-allowlist-regex", "team",
		"--web.disable-exporter-metrics")
	mfs := scrapeUntil(t, base, "DCGM_FI_DEV_GPU_TEMP", 30*time.Second)
	for name := range mfs {
		assert.False(t, strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_"), "%s is served", name)
	}
	assert.Contains(t, mfs, "gpuscope_build_info", "gpuscope's own families stay")
	out := p.Output()
	assert.Equal(t, 1, strings.Count(out, "10ms is below the minimum 100ms; sampling every 100ms"), out)
	assert.Equal(t, 1, strings.Count(out, "has no effect without --kubernetes-enable-pod-labels"), out)
	assert.Equal(t, 1, strings.Count(out, "is deprecated: use --web-disable-exporter-metrics"), out)
	assert.Contains(t, out, "flag=--web.disable-exporter-metrics", "the line names the spelling given")
}
