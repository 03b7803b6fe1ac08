package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
	"github.com/gpuscope/gpuscope/source/sim"
)

// TestInsightIsComputedInTheBackground starts the engine with insight on
// over a simulated compute-bound GPU and moves the clock: the insight loop
// computes on its own, so a render shows the insight series without anyone
// asking for a computation, and Stop ends the loop.
func TestInsightIsComputedInTheBackground(t *testing.T) {
	clk := newClock()
	cfg := sim.DefaultConfig()
	cfg.GPUs, cfg.EventRate, cfg.Now = 1, 0, clk.Now
	cfg.Workloads = []sim.Workload{sim.ComputeBound}
	src, err := sim.New(cfg)
	require.NoError(t, err)
	e, err := New(Options{Source: src, Counters: parseSet(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t, 1s\n"), DefaultInterval: time.Second,
		Log: quietLog(), Now: clk.Now, Clock: clk, Insight: InsightOptions{Enabled: true, Window: 2 * time.Second}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, e.Start(ctx))
	// Three loops wait on the clock: the 100 ms group (the insight fields),
	// the 1 s group and the insight computation (every second).
	require.Equal(t, 3, e.Loops())
	for range 30 {
		require.True(t, clk.WaitForTimers(3, testwait.Timeout), "the sampling and insight loops wait for their next turn")
		clk.Add(100 * time.Millisecond)
	}
	require.True(t, clk.WaitForTimers(3, testwait.Timeout))
	out := string(e.Render(nil))
	assert.Contains(t, out, `gpuscope_gpu_bound_ratio{gpu="0"`)
	assert.Contains(t, out, `gpuscope_insight_supported{gpu="0"`)
	assert.True(t, strings.Contains(out, `bound="compute"} `), "the compute-bound GPU has a compute share")
	e.Stop()
	assert.Zero(t, clk.Timers(), "no loop waits after Stop")
}

// TestInsightOffChangesNothing: without --insight the plan watches only the
// counters file's fields and the exposition has no insight family.
func TestInsightOffChangesNothing(t *testing.T) {
	clk := newClock()
	cfg := sim.DefaultConfig()
	cfg.GPUs, cfg.EventRate, cfg.Now = 1, 0, clk.Now
	src, err := sim.New(cfg)
	require.NoError(t, err)
	e, err := New(Options{Source: src, Counters: parseSet(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t\n"), DefaultInterval: time.Second,
		Log: quietLog(), Now: clk.Now})
	require.NoError(t, err)
	require.NoError(t, e.Open())
	require.Len(t, e.plan.slots, 1, "only the file's field is watched")
	assert.Equal(t, 1, e.Loops(), "one sampling loop, no insight loop")
	for range 20 {
		clk.Add(100 * time.Millisecond)
		require.NoError(t, e.CollectAll(context.Background()))
	}
	e.ComputeInsight()
	out := string(e.Render(nil))
	for _, name := range []string{"gpuscope_gpu_step_period", "gpuscope_gpu_stall", "gpuscope_gpu_bound_ratio", "gpuscope_insight_supported"} {
		assert.NotContains(t, out, name)
	}
}
