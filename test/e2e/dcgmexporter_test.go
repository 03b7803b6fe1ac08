package e2e

import (
	"bytes"
	"io"
	"net/http"
	"path/filepath"
	"sort"
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
// line unchanged: its 1.x counters file, -o (1.x labels), -n (no host name),
// -d g:0,1 (GPUs 0 and 1 only), the device-name GPU IDs, and fake GPUs.
func TestDCGMExporterCommandLine(t *testing.T) {
	csv := filepath.Join(compattest.Dir(t), "1.x-compatibility-metrics.csv")
	base, _ := e2etest.GPUScope(t, "--kubernetes-gpu-id-type=device-name", "-d", "g:0,1", "-o", "-n", "--fake-gpus", "-f", csv)
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
		assert.NotContains(t, labels, "Hostname")
	}
	sort.Strings(gpus)
	assert.Equal(t, []string{"0", "1"}, gpus)
	assert.NotContains(t, mfs, "DCGM_FI_DEV_GPU_TEMP", "the 1.x file names the families")
}
