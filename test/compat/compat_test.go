// Package compat checks gpuscope's exposition, series by series, against the
// label layouts dcgm-exporter produces for each entity kind, for the sim and
// for the DCGM and NVML sources over their fakes. Each expectation is written
// from dcgm-exporter's source (commit d5e5f51), named beside it.
package compat

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/internal/testkit/compattest"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/dcgm/dcgmfake"
	"github.com/gpuscope/gpuscope/source/nvml"
	"github.com/gpuscope/gpuscope/source/nvml/nvmlfake"
	"github.com/gpuscope/gpuscope/source/sim"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

// Identity labels per entity kind, in dcgm-exporter's template order
// (internal/pkg/rendermetrics/render_metrics.go).
var (
	// gpuMetricsFormat; GPU_I_PROFILE and GPU_I_ID only on MIG instances.
	gpuLayout = []string{"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname"}
	migLayout = []string{"gpu", "UUID", "pci_bus_id", "device", "modelName", "GPU_I_PROFILE", "GPU_I_ID", "Hostname"}
	// switchMetricsFormat.
	switchLayout = []string{"nvswitch", "Hostname"}
	// linkMetricsFormat with toSwitchMetric: no GPU labels.
	switchLinkLayout = []string{"nvlink", "nvswitch", "Hostname"}
	// linkMetricsFormat with toGPUNvLinkMetric
	// (internal/pkg/collector/gpu_collector.go): the parent GPU's index,
	// UUID, PCI bus ID, device and model, no nvswitch.
	gpuLinkLayout = []string{"nvlink", "gpu", "gpu_uuid", "pci_bus_id", "device", "model_name", "Hostname"}
	// cpuMetricsFormat and cpuCoreMetricsFormat with toCPUMetric.
	cpuLayout     = []string{"cpu", "Hostname"}
	cpuCoreLayout = []string{"cpucore", "cpu", "Hostname"}
)

// notIdentity are the labels that are not part of an entity's identity:
// label-type fields, and what the families of dcgm-exporter's exporter-side
// fields add (expcollector.go, gpu_collector.go: err_code, err_msg).
var notIdentity = regexp.MustCompile(`^(DCGM_FI_.*|err_code|err_msg|xid|clock_event|window_size_in_ms|health_watch|health_error_code|peer_gpu|link_status)$`)

var (
	nvswitchValue = regexp.MustCompile(`^nvswitch[0-9]+$`) // toSwitchMetric: "nvswitch%d"
	deviceValue   = regexp.MustCompile(`^nvidia[0-9]+$`)   // toMetric: "nvidia%d" of the GPU index
)

func quietLog() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return logrus.NewEntry(l)
}

func render(t *testing.T, src source.Source, csv string, clk *sourcetest.Clock) map[string]*dto.MetricFamily {
	t.Helper()
	set, err := counters.Parse("compat.csv", strings.NewReader(csv))
	require.NoError(t, err)
	e, err := engine.New(engine.Options{Source: src, Counters: set, DefaultInterval: time.Second, Hostname: "node-1", Now: clk.Now, Log: quietLog()})
	require.NoError(t, err)
	require.NoError(t, e.Open())
	for range 3 {
		clk.Add(time.Second)
		_ = e.CollectAll(t.Context())
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(e.Render(nil)))
	require.NoError(t, err, "exposition must parse")
	return mfs
}

// checkLayouts checks every series of the families of the counters file:
// its identity labels are exactly one of dcgm-exporter's layouts, with its
// value forms, and it reports how many series of each layout it saw.
func checkLayouts(t *testing.T, mfs map[string]*dto.MetricFamily) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for name, mf := range mfs {
		if strings.HasPrefix(name, "gpuscope_") || strings.HasSuffix(name, "_window") || strings.HasSuffix(name, "_window_samples") {
			continue
		}
		for _, m := range mf.Metric {
			var names []string
			vals := map[string]string{}
			for _, l := range m.Label {
				vals[l.GetName()] = l.GetValue()
				if !notIdentity.MatchString(l.GetName()) {
					names = append(names, l.GetName())
				}
			}
			var want []string
			var kind string
			switch {
			case vals["cpucore"] != "":
				want, kind = cpuCoreLayout, "CPU core"
			case vals["cpu"] != "":
				want, kind = cpuLayout, "CPU"
			case vals["nvlink"] != "" && vals["gpu_uuid"] != "":
				want, kind = gpuLinkLayout, "GPU link"
			case vals["nvlink"] != "":
				want, kind = switchLinkLayout, "switch link"
			case vals["nvswitch"] != "":
				want, kind = switchLayout, "switch"
			case vals["GPU_I_ID"] != "":
				want, kind = migLayout, "MIG instance"
			default:
				want, kind = gpuLayout, "GPU"
			}
			assert.ElementsMatch(t, want, names, "%s: %s series", name, kind)
			if v, ok := vals["nvswitch"]; ok {
				assert.Regexp(t, nvswitchValue, v, name)
			}
			if v, ok := vals["device"]; ok {
				assert.Regexp(t, deviceValue, v, name)
				assert.Equal(t, "nvidia"+vals["gpu"], v, "%s: device follows the GPU index", name)
			}
			if v, ok := vals["gpu"]; ok {
				assert.NotEqual(t, "-1", v, name)
			}
			seen[kind]++
		}
	}
	return seen
}

// The sim with MIG on half its GPUs is exported as dcgm-exporter's default
// (-d f) exports it: plain GPUs and MIG instances, no MIG GPU of its own
// (internal/pkg/devicemonitoring/device_monitoring.go).
func TestSimSeriesHaveDCGMExportersLayouts(t *testing.T) {
	clk := sourcetest.NewClock(time.Unix(1_750_000_000, 0))
	cfg := sim.DefaultConfig()
	cfg.GPUs, cfg.MIG, cfg.Now = 2, "all", clk.Now
	src, err := sim.New(cfg)
	require.NoError(t, err)
	mfs := render(t, src, "DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DEV_POWER_USAGE, gauge, p\nDCGM_FI_PROF_SM_ACTIVE, gauge, a\nDCGM_FI_DEV_XID_ERRORS, gauge, x\nDCGM_EXP_XID_ERRORS_COUNT, gauge, c\nDCGM_FI_DRIVER_VERSION, label, d\n", clk)
	seen := checkLayouts(t, mfs)
	assert.Zero(t, seen["GPU"], "MIG GPUs are exported through their instances only")
	assert.Positive(t, seen["MIG instance"])
	for _, m := range mfs["DCGM_FI_DEV_POWER_USAGE"].Metric {
		assert.NotEmpty(t, labelOf(m, "GPU_I_ID"), "power reaches each MIG instance")
	}
}

// NVML on a DGX H100 fake: GPUs only.
func TestNVMLSeriesHaveDCGMExportersLayouts(t *testing.T) {
	clk := sourcetest.NewClock(time.Unix(1_750_000_000, 0))
	src, err := nvml.New(nvml.Config{Lib: nvmlfake.New(nvmlfake.DGXH100), Hostname: "node-1", Logger: quietLog(), EventWait: 20 * time.Millisecond, Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = src.Close() })
	mfs := render(t, src, "DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DEV_FB_USED, gauge, f\nDCGM_FI_DEV_XID_ERRORS, gauge, x\nDCGM_EXP_XID_ERRORS_COUNT, gauge, c\nDCGM_FI_DRIVER_VERSION, label, d\n", clk)
	seen := checkLayouts(t, mfs)
	assert.Equal(t, 8*4, seen["GPU"], "four families on 8 GPUs")
}

// DCGM over its fake, with an NvSwitch and its links, NVLinks on the GPUs
// and a CPU with two cores: each kind in its own layout
// (switchMetricsFormat, linkMetricsFormat, cpuMetricsFormat,
// cpuCoreMetricsFormat), GPU labels on none but the GPU links, which carry
// their GPU's as toGPUNvLinkMetric writes them.
func TestDCGMSeriesHaveDCGMExportersLayouts(t *testing.T) {
	clk := sourcetest.NewClock(time.Unix(1_750_000_000, 0))
	// Link IDs as go-dcgm's AddLinkEntityToGroup encodes them: the parent's
	// entity group (FE_SWITCH 3, FE_GPU 1), the index, the parent.
	links := []dcgm.LinkInfo{{ID: 0x103, Switch: 0, Index: 1, Up: true}, {ID: 0x203, Switch: 0, Index: 2, Up: true}}
	// Link 1 of GPU 0 is down: dcgm-exporter
	// monitors LS_UP links only (devicemonitoring.monitorAllGPUNvLinks).
	gpuLinks := []dcgm.GPULinkInfo{
		{ID: 0x00000001, GPU: 0, Index: 0, Up: true},
		{ID: 0x00000101, GPU: 0, Index: 1, Up: false},
		{ID: 0x01000001, GPU: 1, Index: 0, Up: true},
		{ID: 0x01000101, GPU: 1, Index: 1, Up: true},
	}
	// DCGM watches link fields on every link (devicewatcher's
	// createNVLinkGroups), but answers NvSwitch port fields on ports only
	// and the GPU's PPCNT counters on GPU links only.
	gen := func(e dcgm.EntityRef, field uint16, seq int64) (dcgm.Value, bool) {
		onGPU := e.Group == dcgm.EntityLink && e.ID&0xff == 1
		onSwitch := e.Group == dcgm.EntityLink && e.ID&0xff == 3
		if (field == fieldid.NVLinkPPCNTPhysicalLinkDownCounter && onSwitch) || (field == fieldid.NVSwitchLinkThroughputTX && onGPU) {
			return dcgm.Value{}, false
		}
		return dcgmfake.DefaultGen(e, field, seq)
	}
	fake := dcgmfake.New(dcgmfake.WithSwitches([]uint{0}, links), dcgmfake.WithGPULinks(gpuLinks...), dcgmfake.WithClock(clk),
		dcgmfake.WithCPUs(dcgm.CPUInfo{ID: 0, Cores: []uint{0, 1}}), dcgmfake.WithGen(gen))
	src, err := dcgm.New(fake, dcgm.Config{Mode: dcgm.ModeEmbedded, Window: 15 * time.Second, Log: quietLog(), Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = src.Close() })
	mfs := render(t, src, "DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DEV_NVSWITCH_TEMPERATURE_CURRENT, gauge, s\nDCGM_FI_DEV_NVSWITCH_LINK_THROUGHPUT_TX, counter, l\n"+
		"DCGM_FI_DEV_CPU_POWER_UTIL_CURRENT, gauge, c\nDCGM_FI_DEV_CPU_CLOCK_CURRENT, gauge, k\n"+
		"DCGM_FI_DEV_NVLINK_PPCNT_PHYSICAL_LINK_DOWN_COUNTER, counter, d\n", clk)
	seen := checkLayouts(t, mfs)
	assert.Equal(t, map[string]int{"GPU": 2, "switch": 1, "switch link": 2, "GPU link": 3, "CPU": 1, "CPU core": 2}, seen)

	gpus := map[string]*dto.Metric{}
	for _, m := range mfs["DCGM_FI_DEV_GPU_TEMP"].Metric {
		gpus[labelOf(m, "gpu")] = m
	}
	var got []string
	for _, m := range mfs["DCGM_FI_DEV_NVLINK_PPCNT_PHYSICAL_LINK_DOWN_COUNTER"].Metric {
		g := gpus[labelOf(m, "gpu")]
		require.NotNil(t, g, "a GPU link's gpu label names an exported GPU")
		// toGPUNvLinkMetric: gpu_uuid, pci_bus_id and model_name are the
		// parent GPU's UUID, PCI bus ID and model (the GPU's UUID and
		// modelName labels).
		assert.Equal(t, labelOf(g, "UUID"), labelOf(m, "gpu_uuid"))
		assert.Equal(t, labelOf(g, "pci_bus_id"), labelOf(m, "pci_bus_id"))
		assert.Equal(t, labelOf(g, "modelName"), labelOf(m, "model_name"))
		got = append(got, labelOf(m, "gpu")+"/"+labelOf(m, "nvlink"))
	}
	assert.ElementsMatch(t, []string{"0/0", "1/0", "1/1"}, got, "up links only")
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// DCGM_EXP_P2P_STATUS as dcgm-exporter writes it
// (internal/pkg/collector/p2p_status_collector.go, GetMetrics, and
// p2pStatusToString; labels from const.go): one series per ordered pair of
// GPUs on the first GPU's identity, peer_gpu the other's index, link_status
// the status name, the value the status code; never a GPU towards itself.
// The line is the one default-counters.csv ships commented out.
func TestP2PStatusIsOneSeriesPerOrderedPair(t *testing.T) {
	const csv = "DCGM_EXP_P2P_STATUS, counter, P2P NvLink status\n"
	names := map[float64]string{0: "OK", 1: "ChipsetNotSupported", 2: "GPUNotSupported", 3: "TopologyNotSupported",
		4: "DisabledByRegKey", 5: "NotSupported", 6: "Unknown"}
	tests := []struct {
		name string
		gpus int
		open func(t *testing.T, clk *sourcetest.Clock) source.Source
		// want is the status of GPU i towards peer j.
		want func(i, j int) float64
	}{
		{"sim", 3, func(t *testing.T, clk *sourcetest.Clock) source.Source {
			cfg := sim.DefaultConfig()
			cfg.GPUs, cfg.Now = 3, clk.Now
			src, err := sim.New(cfg)
			require.NoError(t, err)
			return src
		}, func(int, int) float64 { return 0 }},
		{"nvml", 8, func(t *testing.T, clk *sourcetest.Clock) source.Source {
			f := nvmlfake.New(nvmlfake.DGXH100)
			f.Update(1, func(g *nvmlfake.GPU) {
				g.R.P2P = map[int]gonvml.GpuP2PStatus{6: gonvml.P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED}
			})
			src, err := nvml.New(nvml.Config{Lib: f, Hostname: "node-1", Logger: quietLog(), EventWait: 20 * time.Millisecond, Clock: clk})
			require.NoError(t, err)
			t.Cleanup(func() { _ = src.Close() })
			return src
		}, func(i, j int) float64 {
			if i == 1 && j == 6 {
				return 3
			}
			return 0
		}},
		{"dcgm", 2, func(t *testing.T, clk *sourcetest.Clock) source.Source {
			fake := dcgmfake.New(dcgmfake.WithClock(clk))
			fake.SetP2P([][]int{{0, 5}, {2, 0}}, nil)
			src, err := dcgm.New(fake, dcgm.Config{Mode: dcgm.ModeEmbedded, Window: 15 * time.Second, Log: quietLog(), Clock: clk})
			require.NoError(t, err)
			t.Cleanup(func() { _ = src.Close() })
			return src
		}, func(i, j int) float64 { return [][]float64{{0, 5}, {2, 0}}[i][j] }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := sourcetest.NewClock(time.Unix(1_750_000_000, 0))
			mfs := render(t, tc.open(t, clk), csv, clk)
			seen := checkLayouts(t, mfs)
			assert.Equal(t, tc.gpus*(tc.gpus-1), seen["GPU"], "one series per ordered pair")
			mf := mfs["DCGM_EXP_P2P_STATUS"]
			require.NotNil(t, mf)
			assert.Equal(t, dto.MetricType_COUNTER, mf.GetType(), "the type the file gives")
			pairs := map[string]bool{}
			for _, m := range mf.Metric {
				gpu, peer := labelOf(m, "gpu"), labelOf(m, "peer_gpu")
				require.NotEqual(t, gpu, peer, "no GPU towards itself")
				i, j := atoi(t, gpu), atoi(t, peer)
				want := tc.want(i, j)
				assert.Equal(t, want, m.GetCounter().GetValue(), "GPU %d towards %d", i, j)
				assert.Equal(t, names[want], labelOf(m, "link_status"), "GPU %d towards %d", i, j)
				pairs[gpu+"/"+peer] = true
			}
			assert.Len(t, pairs, tc.gpus*(tc.gpus-1))
		})
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}

// Label-type fields go on every entity kind: dcgm-exporter's toCPUMetric
// and toSwitchMetric (internal/pkg/collector/gpu_collector.go) read the
// label counters on CPUs, CPU cores and switches as toMetric does on GPUs,
// and DCGM answers the driver version, a global field, on any entity.
func TestLabelFieldsOnEveryEntityKind(t *testing.T) {
	clk := sourcetest.NewClock(time.Unix(1_750_000_000, 0))
	gen := func(e dcgm.EntityRef, field uint16, seq int64) (dcgm.Value, bool) {
		if field == fieldid.DriverVersion {
			return dcgm.Value{Kind: dcgm.KindString, Str: "580.65.06"}, true
		}
		return dcgmfake.DefaultGen(e, field, seq)
	}
	fake := dcgmfake.New(dcgmfake.WithClock(clk), dcgmfake.WithSwitches([]uint{0}, nil),
		dcgmfake.WithCPUs(dcgm.CPUInfo{ID: 0, Cores: []uint{0, 1}}), dcgmfake.WithGen(gen))
	src, err := dcgm.New(fake, dcgm.Config{Mode: dcgm.ModeEmbedded, Window: 15 * time.Second, Log: quietLog(), Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = src.Close() })
	mfs := render(t, src, "DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DEV_NVSWITCH_TEMPERATURE_CURRENT, gauge, s\n"+
		"DCGM_FI_DEV_CPU_POWER_UTIL_CURRENT, gauge, c\nDCGM_FI_DEV_CPU_CLOCK_CURRENT, gauge, k\nDCGM_FI_DRIVER_VERSION, label, d\n", clk)
	gpu := mfs["DCGM_FI_DEV_GPU_TEMP"]
	require.NotNil(t, gpu)
	driver := labelOf(gpu.Metric[0], "DCGM_FI_DRIVER_VERSION")
	require.Equal(t, "580.65.06", driver, "the GPU carries the driver version")
	seen := map[string]int{}
	for _, name := range []string{"DCGM_FI_DEV_CPU_POWER_UTIL_CURRENT", "DCGM_FI_DEV_CPU_CLOCK_CURRENT", "DCGM_FI_DEV_NVSWITCH_TEMPERATURE_CURRENT"} {
		require.NotNil(t, mfs[name], name)
		for _, m := range mfs[name].Metric {
			assert.Equal(t, driver, labelOf(m, "DCGM_FI_DRIVER_VERSION"), "%s %v", name, m.Label)
			seen[name]++
		}
	}
	assert.Equal(t, map[string]int{"DCGM_FI_DEV_CPU_POWER_UTIL_CURRENT": 1, "DCGM_FI_DEV_CPU_CLOCK_CURRENT": 2, "DCGM_FI_DEV_NVSWITCH_TEMPERATURE_CURRENT": 1}, seen)
}

// On dcgm-exporter's default counters file, GPU 0 of the sim has at most
// 10% more series than the file has value fields: dcgm-exporter writes one
// series per value field and GPU (internal/pkg/collector/gpu_collector.go,
// toMetric) and label fields become labels, so a self-metric per field and
// GPU that only says "supported" would double a fleet's series.
func TestSeriesPerGPUOnDCGMExportersDefaultFile(t *testing.T) {
	path := filepath.Join(compattest.Dir(t), "default-counters.csv")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	set, err := counters.Parse(path, bytes.NewReader(b))
	require.NoError(t, err)
	values := 0
	for _, f := range set.Fields {
		if f.Type != counters.Label {
			values++
		}
	}
	clk := sourcetest.NewClock(time.Unix(1_750_000_000, 0))
	cfg := sim.DefaultConfig()
	cfg.GPUs, cfg.Now, cfg.EventRate = 2, clk.Now, 0
	src, err := sim.New(cfg)
	require.NoError(t, err)
	mfs := render(t, src, string(b), clk)
	n := 0
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			if labelOf(m, "gpu") == "0" {
				n++
			}
		}
	}
	t.Logf("GPU 0: %d series for %d value fields", n, values)
	assert.Equal(t, 25, values, "the file's value fields")
	assert.LessOrEqual(t, float64(n), float64(values)*1.1, "GPU 0 has %d series for %d value fields", n, values)
}
