package integration

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/dcgm/dcgmfake"
	"github.com/gpuscope/gpuscope/source/sim"
)

// migLayout splits each GPU into two instances. Their PCIe counters are the
// GPU's (DCGM reads them at the GPU level), so an instance's classes come
// from its own activity alone, whatever its size.
const migLayout = "3g.40gb,4g.40gb"

// instanceKey names a MIG instance's series: GPU index and GPU_I_ID.
func instanceKey(s *dto.Metric) string { return labelOf(s, "gpu") + "/" + labelOf(s, "GPU_I_ID") }

// migKindsRun runs a simulated MIG node whose instances run every MIG
// workload kind, one each, for 40 s, and returns what the insight metrics
// show per instance and the truth, by instance key.
func migKindsRun(t testing.TB, seed int64) (map[string]measured, map[string]sim.Truth) {
	t.Helper()
	clk := newClock()
	cfg := sim.DefaultConfig()
	cfg.GPUs, cfg.MIG, cfg.Seed, cfg.Now, cfg.EventRate = 2, migLayout, seed, clk.Now, 0
	cfg.Workloads = sim.MIGKinds()
	src, err := sim.New(cfg)
	require.NoError(t, err)
	e := insightEngine(t, src, minimalSet(t), clk)
	drive(t, e, clk, 40*time.Second, nil)
	truths := map[string]sim.Truth{}
	ord := map[int]int{}
	for _, ent := range src.Entities() {
		if ent.Kind != source.GPUInstance {
			continue
		}
		tr, ok := src.InstanceTruth(ent.GPU, ord[ent.GPU])
		require.True(t, ok)
		ord[ent.GPU]++
		truths[fmt.Sprintf("%d/%d", ent.GPU, ent.GPUInstanceID)] = tr
	}
	require.Len(t, truths, len(sim.MIGKinds()))
	return insightBy(t, e.Render(nil), instanceKey), truths
}

// TestInsightFindsEachMIGInstancesTruth is the ground-truth test of whole
// GPUs, run on MIG instances: each instance runs its own workload kind,
// and its own insight series must find its step period within 5% (none
// where there are no steps), its stall share within 0.05 and its dominant
// class, from the instance's own profiling fields. The input-bound
// instance's PCIe counters are its GPU's, shared with its neighbour, so its
// input share is told from the waits between its steps and must match the
// truth within 0.05; no other instance may wait for input. The MIG table of
// docs/insight.md is this test's output (-update rewrites it).
func TestInsightFindsEachMIGInstancesTruth(t *testing.T) {
	type row struct {
		truthPeriod, periodErr, truthStall, stallErr, shares, conf []float64
		bound                                                      string
		right                                                      int
	}
	rows := map[sim.Workload]*row{}
	for _, seed := range truthSeeds {
		got, truths := migKindsRun(t, seed)
		for k, tr := range truths {
			m := got[k]
			name := fmt.Sprintf("seed %d instance %s %s", seed, k, tr.Workload)
			require.True(t, m.has, "%s: no insight series", name)
			r := rows[tr.Workload]
			if r == nil {
				r = &row{bound: tr.Bound}
				rows[tr.Workload] = r
			}
			if tr.Period > 0 {
				require.Greater(t, m.period, 0.0, "%s: step period absent (confidence %.3f), want %.3f s", name, m.confidence, tr.Period)
				rel := math.Abs(m.period-tr.Period) / tr.Period
				assert.LessOrEqual(t, rel, periodTolerance, "%s: step period %.3f s, truth %.3f s", name, m.period, tr.Period)
				r.truthPeriod, r.periodErr = append(r.truthPeriod, tr.Period), append(r.periodErr, rel)
			} else {
				assert.Zero(t, m.period, "%s: a step period for a workload without steps", name)
			}
			d := math.Abs(m.stallRatio - tr.StallShare)
			assert.LessOrEqual(t, d, stallTolerance, "%s: stall ratio %.3f, truth %.3f", name, m.stallRatio, tr.StallShare)
			r.truthStall, r.stallErr = append(r.truthStall, tr.StallShare), append(r.stallErr, d)
			dom, share := m.dominant()
			assert.Equal(t, tr.Bound, dom, "%s: dominant class (bound ratios %v)", name, m.bound)
			if dom == tr.Bound {
				r.right++
			}
			r.shares, r.conf = append(r.shares, share), append(r.conf, m.confidence)
			if tr.Bound == "input" {
				assert.InDelta(t, tr.BoundShare, m.bound["input"], stallTolerance, "%s: input share", name)
			} else {
				assert.Less(t, m.bound["input"], 0.05, "%s: input share of an instance that waits for no input", name)
			}
			if tr.StallShare > 0 {
				assert.Positive(t, m.stalls, "%s: stalls were counted", name)
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| workload on a MIG instance | truth: step period | measured: max period error | truth: stall share | measured: max stall error | truth: bound by | measured: dominant class right | measured: dominant share | min confidence |\n")
	fmt.Fprintf(&b, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, k := range sim.MIGKinds() {
		r := rows[k]
		period, perr := "none", "none reported"
		if len(r.truthPeriod) > 0 {
			period = fmt.Sprintf("%.2f–%.2f s", minOf(r.truthPeriod), maxOf(r.truthPeriod))
			perr = fmt.Sprintf("%.2f%%", 100*maxOf(r.periodErr))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.2f–%.2f | %.3f | %s | %d of %d | %.2f–%.2f | %.2f |\n",
			k, period, perr, minOf(r.truthStall), maxOf(r.truthStall), maxOf(r.stallErr), r.bound,
			r.right, len(truthSeeds), minOf(r.shares), maxOf(r.shares), minOf(r.conf))
	}
	checkDocTable(t, "MIG ground-truth", b.String())
}

// TestInsightOverTheDCGMSourceOnMIG drives the insight metrics through the
// DCGM source on a MIG GPU of the fake host engine: instance 1 runs the
// scripted input-bound step, instance 2 computes steadily, instance 3 holds
// a context and runs nothing. Each instance's series are its own, from its
// own profiling fields, with GPU_I_ID; the MIG GPU itself, which its
// instances stand in for, gets none. PCIe is a GPU-level field, which the
// host engine answers on an instance with the GPU's traffic: instance 1's
// batches arrive on every instance's series, and must make neither the idle
// instance 3 wait for input nor the step of instance 1 look like it.
func TestInsightOverTheDCGMSourceOnMIG(t *testing.T) {
	sm, tensor, dram := fieldID(t, "DCGM_FI_PROF_SM_ACTIVE"), fieldID(t, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"), fieldID(t, "DCGM_FI_PROF_DRAM_ACTIVE")
	rx, tx := fieldID(t, "DCGM_FI_PROF_PCIE_RX_BYTES"), fieldID(t, "DCGM_FI_PROF_PCIE_TX_BYTES")
	var prof []uint16
	for _, n := range []string{"DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE",
		"DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES"} {
		prof = append(prof, fieldID(t, n))
	}
	gi1 := dcgm.EntityRef{Group: dcgm.EntityGPUInstance, ID: 11}
	gi2 := dcgm.EntityRef{Group: dcgm.EntityGPUInstance, ID: 12}
	gi3 := dcgm.EntityRef{Group: dcgm.EntityGPUInstance, ID: 13}
	gen := func(e dcgm.EntityRef, field uint16, seq int64) (dcgm.Value, bool) {
		if field == fieldid.XIDErrors {
			return dcgm.Value{}, false
		}
		s, te, d, loader := scripted(seq)
		switch e {
		case gi1:
		case gi2:
			s, te, d = 0.85, 0.6, 0.3
		case gi3:
			s, te, d = 0, 0, 0.01
		default:
			// The GPU's own values are the whole board's; insight must
			// not read them for an instance.
			s, te, d = 0.5, 0.5, 0.5
		}
		// The GPU's PCIe traffic, on the GPU and each of its instances:
		// instance 1's batches and instance 2's trickle, both ways.
		v := map[uint16]float64{sm: s, tensor: te, dram: d, rx: loader + 0.2e9, tx: loader/2 + 0.2e9}[field]
		return dcgm.Value{Kind: dcgm.KindFloat64, Float: v}, true
	}
	clk := newClock()
	fake := dcgmfake.New(dcgmfake.WithClock(clk), dcgmfake.WithGen(gen), dcgmfake.WithProfiling(map[uint][]uint16{0: prof, 1: prof}),
		dcgmfake.WithMIG(
			dcgm.MIGInfo{Entity: gi1, Parent: dcgm.EntityRef{Group: dcgm.EntityGPU, ID: 1}, GPU: 1, InstanceID: 1, Profile: "3g.40gb"},
			dcgm.MIGInfo{Entity: gi2, Parent: dcgm.EntityRef{Group: dcgm.EntityGPU, ID: 1}, GPU: 1, InstanceID: 2, Profile: "3g.40gb"},
			dcgm.MIGInfo{Entity: gi3, Parent: dcgm.EntityRef{Group: dcgm.EntityGPU, ID: 1}, GPU: 1, InstanceID: 3, Profile: "1g.10gb"}))
	src, err := dcgm.New(fake, dcgm.Config{Mode: dcgm.ModeEmbedded, Window: 30 * time.Second, Log: quietLog()})
	require.NoError(t, err)
	defer src.Close()
	e := insightEngine(t, src, minimalSet(t), clk)
	drive(t, e, clk, scriptSamples*100*time.Millisecond, nil)
	out := e.Render(nil)
	got := insightBy(t, out, instanceKey)

	checkScripted(t, got["1/1"])
	steady := got["1/2"]
	require.True(t, steady.has, "the steady instance has insight series")
	assert.Zero(t, steady.period, "a steady instance has no step period")
	assert.Zero(t, steady.stallRatio)
	dom, share := steady.dominant()
	assert.Equal(t, "compute", dom)
	assert.InDelta(t, 1, share, 0.001)
	idle := got["1/3"]
	require.True(t, idle.has, "the idle instance has insight series")
	assert.Zero(t, idle.period)
	assert.Equal(t, 1.0, idle.bound["idle"], "the idle instance beside a loader is idle (bound ratios %v)", idle.bound)
	_, gpuSeries := got["1/"]
	assert.False(t, gpuSeries, "the MIG GPU has no insight series of its own")
	assert.True(t, got["0/"].has, "GPU 0, without MIG, keeps its own")

	supported := map[string]float64{}
	for _, m := range parse(t, out)["gpuscope_insight_supported"].Metric {
		supported[instanceKey(m)] = gaugeOf(m)
	}
	assert.Equal(t, map[string]float64{"0/": 1, "1/1": 1, "1/2": 1, "1/3": 1}, supported)
}
