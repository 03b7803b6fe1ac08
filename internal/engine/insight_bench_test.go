package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/source/sim"
)

// BenchmarkInsight is the cost of one insight computation on an 8-GPU node
// running the mixed simulated workloads, over full 30 s windows of the ten
// 100 ms fields: copying the rings out under the read lock, the analysis
// and storing the results. gpu-window is the cost per GPU per window; core%
// is the share of one core the background loop takes at its default pace
// (every tenth of the window, 3 s).
func BenchmarkInsight(b *testing.B) {
	clk := newClock()
	cfg := sim.DefaultConfig()
	cfg.EventRate, cfg.Now = 0, clk.Now
	w, err := sim.ParseWorkloads(sim.Mixed, cfg.GPUs)
	require.NoError(b, err)
	cfg.Workloads = w
	src, err := sim.New(cfg)
	require.NoError(b, err)
	e, err := New(Options{
		Source: src, Counters: benchCounters(b, false), DefaultInterval: time.Second, Window: 15 * time.Second,
		Hostname: "node-1", Now: clk.Now, Log: quietLog(), Insight: InsightOptions{Enabled: true},
	})
	require.NoError(b, err)
	require.NoError(b, e.Open())
	b.StopTimer()
	b.ResetTimer()
	for range 310 {
		clk.Add(100 * time.Millisecond)
		require.NoError(b, e.CollectAll(b.Context()))
	}
	e.ComputeInsight()
	gpus := 0
	for _, es := range e.order {
		if es.ins.has {
			gpus++
		}
	}
	require.Equal(b, cfg.GPUs, gpus, "every GPU has an insight result")
	b.ReportAllocs()
	b.StartTimer()
	for i := 0; i < b.N; i++ {
		e.ComputeInsight()
	}
	b.StopTimer()
	ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(ns/float64(gpus), "ns/gpu-window")
	b.ReportMetric(ns/float64(e.plan.insight.every.Nanoseconds())*100, "core%")
}
