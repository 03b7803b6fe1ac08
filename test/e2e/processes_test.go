package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
)

// scrapeFamilies reads /metrics as Prometheus' text parser does.
func scrapeFamilies(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	require.NoError(t, err)
	return mfs
}

func labelMap(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// The per-process series through the real binary: none without the option;
// with GPUSCOPE_PROCESSES, each simulated process with its name and its
// simulated pod, at most --processes-max-per-gpu per GPU, the shared GPU's
// process past that cap counted as dropped, and a free GPU counted 0.
func TestProcessSeriesThroughTheBinary(t *testing.T) {
	off, _ := e2etest.GPUScope(t, "--source", "sim", "--sim-gpus", "2", "--sim-pods", "--sim-shared-gpus", "1")
	t.Setenv("GPUSCOPE_PROCESSES", "true")
	on, _ := e2etest.GPUScope(t, "--source", "sim", "--sim-gpus", "2", "--sim-pods", "--sim-shared-gpus", "1",
		"--processes-max-per-gpu", "1")

	var mfs map[string]*dto.MetricFamily
	testwait.For(t, "the per-process series", func() bool {
		mfs = scrapeFamilies(t, on)
		return len(mfs["gpuscope_process_info"].GetMetric()) > 0
	})
	require.Len(t, mfs["gpuscope_process_info"].GetMetric(), 1, "one of the shared GPU's two processes; the sim's second GPU is free")
	for _, m := range mfs["gpuscope_process_info"].GetMetric() {
		l := labelMap(m)
		assert.NotEmpty(t, l["pid"])
		assert.Equal(t, "/usr/bin/python3", l["process_name"], "the sim's training processes")
		assert.NotEmpty(t, l["pod"], "the process's simulated pod")
		assert.NotEmpty(t, l["namespace"])
	}
	want := map[string][2]float64{"0": {2, 1}, "1": {0, 0}} // processes listed, dropped
	for gpu, w := range want {
		for _, fam := range []struct {
			name string
			want float64
		}{{"gpuscope_processes", w[0]}, {"gpuscope_processes_dropped_total", w[1]}} {
			var got []float64
			for _, m := range mfs[fam.name].GetMetric() {
				if labelMap(m)["gpu"] == gpu {
					got = append(got, m.GetGauge().GetValue()+m.GetCounter().GetValue())
				}
			}
			assert.Equal(t, []float64{fam.want}, got, "%s on GPU %s", fam.name, gpu)
		}
	}

	for name := range scrapeFamilies(t, off) {
		assert.False(t, strings.HasPrefix(name, "gpuscope_process"), "%s without --processes", name)
	}
}
