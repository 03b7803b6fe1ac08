package engine

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/config/devsel"
	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

// labelNames returns the label names and values of the series.
func labelsOf(t *testing.T, e *Engine, gpu string) map[string]string {
	t.Helper()
	m := series(scrape(t, e), "DCGM_FI_DEV_GPU_TEMP", map[string]string{"gpu": gpu})
	require.Len(t, m, 1)
	out := map[string]string{}
	for _, l := range m[0].Label {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// The dcgm-exporter options that change labels and which entities are
// exported. Expectations from dcgm-exporter's source:
//   - -o: internal/pkg/collector/gpu_collector.go (uuid instead of UUID) and
//     internal/pkg/transformation/const.go (pod_name, pod_namespace,
//     container_name);
//   - --replace-blanks-in-model-name: gpu_collector.go getGPUModel;
//   - -n: its usage text, "Omit the hostname information from the output".
func TestDCGMExporterLabelOptions(t *testing.T) {
	tests := []struct {
		name   string
		opts   func(*Options)
		gpu0   map[string]string
		absent []string
	}{
		{"defaults", func(*Options) {}, map[string]string{
			"UUID": "GPU-00000000-0000-0000-0000-000000000000", "modelName": "NVIDIA H100 80GB HBM3", "Hostname": "node-1",
			"pod": "train-0", "namespace": "ml",
		}, []string{"uuid", "pod_name"}},
		{"old namespace", func(o *Options) { o.OldNamespace = true }, map[string]string{
			"uuid": "GPU-00000000-0000-0000-0000-000000000000", "pod_name": "train-0", "pod_namespace": "ml",
		}, []string{"UUID", "pod", "namespace"}},
		{"no hostname", func(o *Options) { o.Hostname = "" }, map[string]string{"UUID": "GPU-00000000-0000-0000-0000-000000000000"},
			[]string{"Hostname"}},
		{"replace blanks", func(o *Options) { o.ReplaceBlanksInModelName = true }, map[string]string{"modelName": "NVIDIA-H100-80GB-HBM3"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			src := sourcetest.NewGPUs(2, constValues(map[uint16]float64{fieldid.GPUTemp: 40}))
			src.Now = clk.Now
			pe := &podEnricher{Collector: prometheus.NewGauge(prometheus.GaugeOpts{Name: "x", Help: "x"}), gen: 1}
			opts := Options{Source: src, Counters: parseSet(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t\n"), DefaultInterval: time.Second,
				Hostname: "node-1", Now: clk.Now, Log: quietLog(), Enrichers: []enrich.Enricher{pe}}
			tt.opts(&opts)
			e, err := New(opts)
			require.NoError(t, err)
			require.NoError(t, e.Open())
			collectAll(t, e)
			got := labelsOf(t, e, "0")
			for k, v := range tt.gpu0 {
				assert.Equal(t, v, got[k], k)
			}
			for _, k := range tt.absent {
				assert.NotContains(t, got, k)
			}
			assert.Equal(t, []string{"pod", "namespace"}, pe.LabelNames(), "the enricher's own names are left alone")
		})
	}
}

func TestSelectDropsTheOtherEntities(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(4, constValues(map[uint16]float64{fieldid.GPUTemp: 40}))
	src.Now = clk.Now
	keepOdd := func(list []*source.Entity) []*source.Entity {
		var out []*source.Entity
		for _, e := range list {
			if e.GPU%2 == 1 {
				out = append(out, e)
			}
		}
		return out
	}
	e, err := New(Options{Source: src, Counters: parseSet(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t\n"), DefaultInterval: time.Second,
		Hostname: "node-1", Now: clk.Now, Log: quietLog(), Select: keepOdd})
	require.NoError(t, err)
	require.NoError(t, e.Open())
	collectAll(t, e)
	var gpus []string
	for _, m := range series(scrape(t, e), "DCGM_FI_DEV_GPU_TEMP", nil) {
		gpus = append(gpus, labelOf(m, "gpu"))
	}
	assert.Equal(t, []string{"1", "3"}, gpus)
	assert.Len(t, e.Entities(), 2, "enrichers see the selected entities only")
}

// dcgm-exporter's health and P2P collectors list every GPU whatever -d
// selects (internal/pkg/collector/gpu_health_collector.go,
// NewGPUHealthStatusCollector, and p2p_status_collector.go: deviceinfo with
// MajorRange -1), so DCGM_EXP_GPU_HEALTH_STATUS and DCGM_EXP_P2P_STATUS
// cover the GPUs -d leaves out, with their label fields, while every other
// family keeps to the selection.
func TestHealthStatusCoversGPUsTheSelectionLeavesOut(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(3, constValues(map[uint16]float64{fieldid.GPUTemp: 40}))
	src.Now = clk.Now
	src.Texts = map[uint16]string{fieldid.DriverVersion: "580.1"}
	first := func(list []*source.Entity) []*source.Entity {
		var out []*source.Entity
		for _, e := range list {
			if e.GPU == 0 {
				out = append(out, e)
			}
		}
		return out
	}
	e, err := New(Options{Source: src, Counters: parseSet(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_EXP_GPU_HEALTH_STATUS, gauge, h\nDCGM_EXP_P2P_STATUS, counter, p\nDCGM_FI_DRIVER_VERSION, label, d\n"),
		DefaultInterval: time.Second, Hostname: "node-1", Now: clk.Now, Log: quietLog(), Select: first})
	require.NoError(t, err)
	require.NoError(t, e.Open())
	collectAll(t, e)
	collectAll(t, e)
	mfs := scrape(t, e)
	health := map[string]int{}
	for _, m := range series(mfs, "DCGM_EXP_GPU_HEALTH_STATUS", nil) {
		health[labelOf(m, "gpu")]++
		assert.Equal(t, "580.1", labelOf(m, "DCGM_FI_DRIVER_VERSION"))
	}
	n := len(source.HealthWatches)
	assert.Equal(t, map[string]int{"0": n, "1": n, "2": n}, health, "one series per watch on every GPU")
	p2p := map[string]int{}
	for _, m := range series(mfs, "DCGM_EXP_P2P_STATUS", nil) {
		p2p[labelOf(m, "gpu")]++
	}
	assert.Equal(t, map[string]int{"0": 2, "1": 2, "2": 2}, p2p, "the P2P status of every pair, as the health")
	var temp []string
	for _, m := range series(mfs, "DCGM_FI_DEV_GPU_TEMP", nil) {
		temp = append(temp, labelOf(m, "gpu"))
	}
	assert.Equal(t, []string{"0"}, temp, "other families keep to -d")
	assert.Len(t, e.Entities(), 1)
}

// dcgm-exporter's device options over a node with a MIG GPU
// (devicemonitoring/device_monitoring.go, handleGPUOptions): g exports GPUs
// only, the MIG GPU included and none of its instances; i exports the GPU
// instances only, each with its GPU's GPU-level fields, as DCGM answers them
// on an instance.
func TestDeviceOptionsOverAMIGNode(t *testing.T) {
	type row struct{ gpu, gi string }
	tests := []struct {
		devices string
		power   map[row]float64
	}{
		{"g", map[row]float64{{"0", ""}: 0, {"1", ""}: 100}},
		{"g:1", map[row]float64{{"1", ""}: 100}},
		{"i", map[row]float64{{"1", "1"}: 100, {"1", "2"}: 100}},
		{"i:1", map[row]float64{{"1", "2"}: 100}},
		{"f", map[row]float64{{"0", ""}: 0, {"1", "1"}: 100, {"1", "2"}: 100}},
	}
	for _, tt := range tests {
		t.Run(tt.devices, func(t *testing.T) {
			g, err := devsel.Parse(tt.devices)
			require.NoError(t, err)
			sel := devsel.Default()
			sel.GPUs = g
			clk := newClock()
			src := migSource()
			src.Now = clk.Now
			e, err := New(Options{Source: src, Counters: parseSet(t, "DCGM_FI_DEV_POWER_USAGE, gauge, p\n"), DefaultInterval: time.Second,
				Hostname: "node-1", Now: clk.Now, Log: quietLog(), Select: sel.Filter})
			require.NoError(t, err)
			require.NoError(t, e.Open())
			collectAll(t, e)
			got := map[row]float64{}
			for _, m := range series(scrape(t, e), "DCGM_FI_DEV_POWER_USAGE", nil) {
				got[row{labelOf(m, "gpu"), labelOf(m, "GPU_I_ID")}] = value(m)
			}
			assert.Equal(t, tt.power, got)
		})
	}
}
