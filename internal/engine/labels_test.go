package engine

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/internal/enrich/hpcjob"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

// TestLabelLayoutPerEntityKind holds, per entity kind, the identity labels
// dcgm-exporter puts on a series, in its order. Each is written from its
// render templates (internal/pkg/rendermetrics/render_metrics.go) and the
// values its collectors fill in (internal/pkg/collector/gpu_collector.go).
func TestLabelLayoutPerEntityKind(t *testing.T) {
	gpu := source.NewGPU(2, "GPU-abc", "00000000:2A:00.0", "NVIDIA H100 80GB HBM3")
	gi := gpu
	gi.Kind, gi.GPUInstanceID, gi.GPUInstanceProfile = source.GPUInstance, 3, "1g.10gb"
	ci := gi
	ci.Kind, ci.ComputeInstanceID = source.ComputeInstance, 0
	gpuLink := gpu
	gpuLink.Kind, gpuLink.Link = source.NVLink, 5
	sw := source.Entity{Kind: source.NvSwitch, GPU: -1, GPUInstanceID: -1, ComputeInstanceID: -1, Link: -1, Switch: 1, CPU: -1, CPUCore: -1}
	swLink := sw
	swLink.Kind, swLink.Link = source.NVLink, 7

	tests := []struct {
		name string
		ent  source.Entity
		opts Options
		want string
	}{
		// gpuMetricsFormat; toMetric: device is "nvidia" + the GPU index.
		{"GPU", gpu, Options{HostnameLabel: "Hostname", Hostname: "node-1"},
			`{gpu="2",UUID="GPU-abc",pci_bus_id="00000000:2A:00.0",device="nvidia2",modelName="NVIDIA H100 80GB HBM3",Hostname="node-1"`},
		// gpuMetricsFormat: GPU_I_PROFILE and GPU_I_ID when the metric has a
		// MIG profile, the parent GPU's identity otherwise.
		{"MIG GPU instance", gi, Options{HostnameLabel: "Hostname", Hostname: "node-1"},
			`{gpu="2",UUID="GPU-abc",pci_bus_id="00000000:2A:00.0",device="nvidia2",modelName="NVIDIA H100 80GB HBM3",GPU_I_PROFILE="1g.10gb",GPU_I_ID="3",Hostname="node-1"`},
		// dcgm-exporter never monitors compute instances (devicemonitoring
		// knows GPUs and GPU instances only); on request gpuscope adds
		// GPU_CI_ID to the GPU instance's labels.
		{"MIG compute instance", ci, Options{HostnameLabel: "Hostname", Hostname: "node-1"},
			`{gpu="2",UUID="GPU-abc",pci_bus_id="00000000:2A:00.0",device="nvidia2",modelName="NVIDIA H100 80GB HBM3",GPU_I_PROFILE="1g.10gb",GPU_I_ID="3",GPU_CI_ID="0",Hostname="node-1"`},
		// linkMetricsFormat with toGPUNvLinkMetric: nvlink first, then the
		// GPU as gpu, gpu_uuid, pci_bus_id, device, model_name; no UUID.
		{"NVLink of a GPU", gpuLink, Options{HostnameLabel: "Hostname", Hostname: "node-1"},
			`{nvlink="5",gpu="2",gpu_uuid="GPU-abc",pci_bus_id="00000000:2A:00.0",device="nvidia2",model_name="NVIDIA H100 80GB HBM3",Hostname="node-1"`},
		// linkMetricsFormat with toSwitchMetric: nvlink, then nvswitch as
		// "nvswitch" + the parent switch ID; no GPU labels.
		{"NVLink of an NvSwitch", swLink, Options{HostnameLabel: "Hostname", Hostname: "node-1"},
			`{nvlink="7",nvswitch="nvswitch1",Hostname="node-1"`},
		// switchMetricsFormat: nvswitch only.
		{"NvSwitch", sw, Options{HostnameLabel: "Hostname", Hostname: "node-1"}, `{nvswitch="nvswitch1",Hostname="node-1"`},
		// cpuMetricsFormat with toCPUMetric: cpu is the entity ID.
		{"CPU", source.NewCPU(1, -1), Options{HostnameLabel: "Hostname", Hostname: "node-1"}, `{cpu="1",Hostname="node-1"`},
		// cpuCoreMetricsFormat: cpucore is the core, cpu the parent CPU.
		{"CPU core", source.NewCPU(1, 17), Options{HostnameLabel: "Hostname", Hostname: "node-1"}, `{cpucore="17",cpu="1",Hostname="node-1"`},
		// Every template writes the host label only when there is a
		// hostname (--no-hostname leaves it out).
		{"no hostname", gpu, Options{HostnameLabel: "Hostname", Hostname: ""},
			`{gpu="2",UUID="GPU-abc",pci_bus_id="00000000:2A:00.0",device="nvidia2",modelName="NVIDIA H100 80GB HBM3"`},
		// dcgm-exporter's main branch since #655 spells it hostname.
		{"hostname spelt as on dcgm-exporter's main", sw, Options{HostnameLabel: "hostname", Hostname: "node-1"}, `{nvswitch="nvswitch1",hostname="node-1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPlan(parseSet(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t\n"), time.Second, time.Second, time.Second, insightPlan{})
			es := newEntityState(&tt.ent, p)
			got, _ := buildLabels(es, nil, p, &tt.opts, nil)
			require.Len(t, got, 1)
			assert.Equal(t, tt.want, got[0])
		})
	}
}

// The HostnameLabel option reaches the exposition.
func TestHostnameLabelOption(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(1, constValues(map[uint16]float64{fieldid.GPUTemp: 40}))
	src.Now = clk.Now
	e, err := New(Options{Source: src, Counters: parseSet(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t\n"), DefaultInterval: time.Second,
		Hostname: "node-1", HostnameLabel: "hostname", Now: clk.Now, Log: quietLog()})
	require.NoError(t, err)
	require.NoError(t, src.Watch(e.plan.groups))
	e.refreshEntities()
	collectAll(t, e)
	m := series(scrape(t, e), "DCGM_FI_DEV_GPU_TEMP", map[string]string{"hostname": "node-1"})
	require.Len(t, m, 1)
	assert.False(t, hasLabel(m[0], "Hostname"))
}

// Several HPC jobs on one GPU: dcgm-exporter's hpcMapper
// (internal/pkg/transformation/hpc.go, Process) exports one copy of each of
// the GPU's metrics per job, each with its hpc_job; a GPU with one job or
// none keeps one series.
func TestHPCJobsSharingAGPUGetOneSeriesEach(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "0"), []byte("8001\n8002\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "1"), []byte("9000\n"), 0o644))
	jobs, err := hpcjob.New(dir)
	require.NoError(t, err)
	require.NoError(t, jobs.Refresh())

	clk := newClock()
	src := sourcetest.NewGPUs(3, constValues(map[uint16]float64{fieldid.GPUTemp: 40}))
	src.Now = clk.Now
	e, err := New(Options{Source: src, Counters: parseSet(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_EXP_XID_ERRORS_COUNT, gauge, x\n"),
		DefaultInterval: time.Second, Hostname: "node-1", Enrichers: []enrich.Enricher{jobs}, Now: clk.Now, Log: quietLog()})
	require.NoError(t, err)
	require.NoError(t, src.Watch(e.plan.groups))
	e.refreshEntities()
	collectAll(t, e)
	mfs := scrape(t, e)
	for _, family := range []string{"DCGM_FI_DEV_GPU_TEMP", "DCGM_EXP_XID_ERRORS_COUNT"} {
		got := map[string][]string{}
		for _, m := range mfs[family].Metric {
			got[labelOf(m, "gpu")] = append(got[labelOf(m, "gpu")], labelOf(m, "hpc_job"))
		}
		assert.Equal(t, map[string][]string{"0": {"8001", "8002"}, "1": {"9000"}, "2": {""}}, got, family)
	}
}

// collidingEnricher copies pod labels named like labels gpuscope sets.
type collidingEnricher struct{ podEnricher }

func (c *collidingEnricher) ExtraLabels(*source.Entity) []enrich.Label {
	return []enrich.Label{{Name: "team", Value: "vision"}, {Name: "pod", Value: "other"}, {Name: "gpu", Value: "9"},
		{Name: "DCGM_FI_DRIVER_VERSION", Value: "x"}, {Name: "clock_event", Value: "y"}, {Name: "Hostname", Value: "z"}}
}

// Pod labels are named as dcgm-exporter names them, so one can be named
// like a label gpuscope sets. dcgm-exporter
// (internal/pkg/transformation/kubernetes.go) skips one named like an
// attribute (pod, namespace, container); gpuscope leaves out every such
// name, so the exposition stays valid and the identity stays true.
func TestPodLabelsNamedLikeOurLabelsAreLeftOut(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(1, constValues(map[uint16]float64{fieldid.GPUTemp: 40}))
	src.Now = clk.Now
	src.Texts = map[uint16]string{fieldid.DriverVersion: "570.1"}
	ce := &collidingEnricher{podEnricher{Collector: prometheus.NewGauge(prometheus.GaugeOpts{Name: "x", Help: "x"}), gen: 1}}
	e, err := New(Options{Source: src, Counters: parseSet(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DRIVER_VERSION, label, d\nDCGM_EXP_CLOCK_EVENTS_COUNT, gauge, c\n"),
		DefaultInterval: time.Second, Hostname: "node-1", Now: clk.Now, Log: quietLog(), Enrichers: []enrich.Enricher{ce}})
	require.NoError(t, err)
	require.NoError(t, e.Open())
	collectAll(t, e)
	mfs := scrape(t, e) // fails on a label written twice
	m := series(mfs, "DCGM_FI_DEV_GPU_TEMP", nil)
	require.Len(t, m, 1)
	assert.Equal(t, "vision", labelOf(m[0], "team"))
	assert.Equal(t, "train-0", labelOf(m[0], "pod"))
	assert.Equal(t, "0", labelOf(m[0], "gpu"))
	assert.Equal(t, "570.1", labelOf(m[0], "DCGM_FI_DRIVER_VERSION"))
	assert.Equal(t, "node-1", labelOf(m[0], "Hostname"))
	assert.NotEmpty(t, series(mfs, "DCGM_EXP_CLOCK_EVENTS_COUNT", nil))
}
