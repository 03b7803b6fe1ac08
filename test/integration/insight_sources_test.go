package integration

import (
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/dcgm/dcgmfake"
	"github.com/gpuscope/gpuscope/source/nvml"
	"github.com/gpuscope/gpuscope/source/nvml/nvmlfake"
)

// A scripted input-bound step: 12 samples (1.2 s) of which 8 compute and 4
// wait for a batch arriving over PCIe.
const (
	scriptStep    = 12
	scriptBusy    = 8
	scriptPeriod  = 1.2
	scriptStall   = 4.0 / 12
	scriptSamples = 400
)

// scripted is the activity of the seq-th sample of the scripted workload:
// ratios 0..1 and PCIe bytes per second.
func scripted(seq int64) (sm, tensor, dram, pcieRX float64) {
	if seq%scriptStep < scriptBusy {
		return 0.9, 0.7, 0.4, 0.5e9
	}
	return 0.01, 0, 0.02, 20e9
}

func fieldID(t testing.TB, name string) uint16 {
	t.Helper()
	f, ok := counters.Lookup(name)
	require.True(t, ok, name)
	return f.ID
}

// checkScripted asserts that one GPU's insight series found the scripted
// workload.
func checkScripted(t *testing.T, m measured) {
	t.Helper()
	require.True(t, m.has, "the GPU with profiling fields has insight series")
	assert.InEpsilon(t, scriptPeriod, m.period, 0.05, "step period")
	assert.InDelta(t, scriptStall, m.stallRatio, 0.05, "stall ratio")
	assert.Positive(t, m.stalls)
	dom, _ := m.dominant()
	assert.Equal(t, "compute", dom, "bound ratios %v", m.bound)
	assert.InDelta(t, 1-float64(scriptBusy)/scriptStep, m.bound["input"], 0.05, "input share")
}

// checkNoInsight asserts that a GPU without profiling fields has no insight
// series and says so.
func checkNoInsight(t *testing.T, exposition []byte, gpu string, missing string) {
	t.Helper()
	fams := parse(t, exposition)
	for _, name := range []string{"gpuscope_gpu_step_period_seconds", "gpuscope_gpu_step_period_confidence", "gpuscope_gpu_stall_ratio",
		"gpuscope_gpu_stalls_total", "gpuscope_gpu_bound_ratio"} {
		assert.False(t, gpusOf(fams[name])[gpu], "GPU %s without profiling fields has a %s series", gpu, name)
	}
	sup := fams["gpuscope_insight_supported"]
	require.NotNil(t, sup)
	found := false
	for _, m := range sup.Metric {
		if labelOf(m, "gpu") == gpu {
			found = true
			assert.Zero(t, gaugeOf(m))
			assert.Contains(t, labelOf(m, "missing"), missing)
		}
	}
	assert.True(t, found, "gpuscope_insight_supported says why GPU %s has no insight", gpu)
}

// TestInsightOverTheNVMLSource drives the insight metrics through the NVML
// source's GPM path on a DGX H100, and checks that a DGX A100 (no GPM, so no
// profiling fields under NVML) gets no insight series.
func TestInsightOverTheNVMLSource(t *testing.T) {
	t.Run("hopper with GPM", func(t *testing.T) {
		f := nvmlfake.New(nvmlfake.DGXH100)
		// The source takes the engine's clock: GPM measures only between
		// samples at least 100 ms apart on it.
		clk := newClock()
		nv, err := nvml.New(nvml.Config{Lib: f, Hostname: "node-1", Logger: quietLog(), EventWait: 20 * time.Millisecond, Clock: clk})
		require.NoError(t, err)
		defer nv.Close()
		e := insightEngine(t, nv, minimalSet(t), clk)
		seq := int64(0)
		drive(t, e, clk, scriptSamples*100*time.Millisecond, func(time.Time) {
			sm, tensor, dram, rx := scripted(seq)
			seq++
			f.Update(0, func(g *nvmlfake.GPU) {
				// GPM reports utilisations in percent and PCIe in MiB/s.
				g.R.GPM[gonvml.GPM_METRIC_SM_UTIL] = 100 * sm
				g.R.GPM[gonvml.GPM_METRIC_ANY_TENSOR_UTIL] = 100 * tensor
				g.R.GPM[gonvml.GPM_METRIC_FP32_UTIL] = 0
				g.R.GPM[gonvml.GPM_METRIC_FP16_UTIL] = 0
				g.R.GPM[gonvml.GPM_METRIC_FP64_UTIL] = 0
				g.R.GPM[gonvml.GPM_METRIC_DRAM_BW_UTIL] = 100 * dram
				g.R.GPM[gonvml.GPM_METRIC_PCIE_RX_PER_SEC] = rx / (1 << 20)
				g.R.GPM[gonvml.GPM_METRIC_PCIE_TX_PER_SEC] = 100
				g.R.GPM[gonvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC] = 0
				g.R.GPM[gonvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC] = 0
			})
		})
		got := insightOf(t, e.Render(nil))
		checkScripted(t, got[0])
		// The other GPUs answer the fake's constant readings: flat, so no
		// period, and insight series all the same.
		require.True(t, got[1].has)
		assert.Zero(t, got[1].period, "a flat signal has no period")
	})
	t.Run("ampere without GPM", func(t *testing.T) {
		clk := newClock()
		nv, err := nvml.New(nvml.Config{Lib: nvmlfake.New(nvmlfake.DGXA100), Hostname: "node-1", Logger: quietLog(), EventWait: 20 * time.Millisecond, Clock: clk})
		require.NoError(t, err)
		defer nv.Close()
		e := insightEngine(t, nv, minimalSet(t), clk)
		drive(t, e, clk, 5*time.Second, nil)
		out := e.Render(nil)
		for gpu := range gpusOf(parse(t, out)["DCGM_FI_DEV_GPU_TEMP"]) {
			checkNoInsight(t, out, gpu, "DCGM_FI_PROF_SM_ACTIVE")
		}
	})
}

// TestInsightOverTheDCGMSource drives the insight metrics through the DCGM
// source on the fake host engine: GPU 0 serves the profiling fields with the
// scripted workload, GPU 1 has no profiling module and gets no insight
// series.
func TestInsightOverTheDCGMSource(t *testing.T) {
	sm, tensor, dram := fieldID(t, "DCGM_FI_PROF_SM_ACTIVE"), fieldID(t, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"), fieldID(t, "DCGM_FI_PROF_DRAM_ACTIVE")
	rx, tx := fieldID(t, "DCGM_FI_PROF_PCIE_RX_BYTES"), fieldID(t, "DCGM_FI_PROF_PCIE_TX_BYTES")
	var prof []uint16
	for _, n := range []string{"DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE",
		"DCGM_FI_PROF_PIPE_FP64_ACTIVE", "DCGM_FI_PROF_PIPE_FP32_ACTIVE", "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
		"DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES", "DCGM_FI_PROF_NVLINK_TX_BYTES", "DCGM_FI_PROF_NVLINK_RX_BYTES"} {
		prof = append(prof, fieldID(t, n))
	}
	clk := newClock()
	gen := func(_ dcgm.EntityRef, field uint16, seq int64) (dcgm.Value, bool) {
		s, te, d, r := scripted(seq)
		v := 0.0
		switch field {
		case sm:
			v = s
		case tensor:
			v = te
		case dram:
			v = d
		case rx:
			v = r
		case tx:
			v = 0.1e9
		case fieldid.XIDErrors:
			return dcgm.Value{}, false
		}
		return dcgm.Value{Kind: dcgm.KindFloat64, Float: v}, true
	}
	fake := dcgmfake.New(dcgmfake.WithClock(clk), dcgmfake.WithGen(gen), dcgmfake.WithProfiling(map[uint][]uint16{0: prof}))
	src, err := dcgm.New(fake, dcgm.Config{Mode: dcgm.ModeEmbedded, Window: 30 * time.Second, Log: quietLog()})
	require.NoError(t, err)
	defer src.Close()
	e := insightEngine(t, src, minimalSet(t), clk)
	drive(t, e, clk, scriptSamples*100*time.Millisecond, nil)
	out := e.Render(nil)
	got := insightOf(t, out)
	checkScripted(t, got[0])
	checkNoInsight(t, out, "1", "DCGM_FI_PROF_SM_ACTIVE")
}
