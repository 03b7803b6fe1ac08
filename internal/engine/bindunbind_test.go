package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source/sim"
)

// TestUnpluggedGPULeavesAndComesBack drives the engine over the sim with the
// bind/unbind watch: an unplugged GPU's series leave the exposition at the
// next poll and come back when it is replugged, while the other GPUs' series
// keep every sample (their windows have no gap), as dcgm-exporter's
// --enable-gpu-bind-unbind-watch serves the GPUs bound after each change
// (pkg/cmd/app.go, handleGPUTopologyChange).
func TestUnpluggedGPULeavesAndComesBack(t *testing.T) {
	clk := newClock()
	cfg := sim.DefaultConfig()
	cfg.GPUs, cfg.EventRate, cfg.Now, cfg.BindUnbindPoll = 4, 0, clk.Now, time.Second
	src, err := sim.New(cfg)
	require.NoError(t, err)
	e, err := New(Options{
		Source: src, Counters: parseSet(t, "DCGM_FI_DEV_GPU_TEMP, gauge, Temperature., 1s, avg\n"),
		DefaultInterval: time.Second, Window: 30 * time.Second, Hostname: "node-1", Now: clk.Now, Log: quietLog(),
	})
	require.NoError(t, err)
	require.NoError(t, e.Open())
	gpus := func() map[string]bool {
		out := map[string]bool{}
		for _, m := range series(scrape(t, e), "DCGM_FI_DEV_GPU_TEMP", nil) {
			out[labelOf(m, "gpu")] = true
		}
		return out
	}
	samples := func(gpu string) int {
		e.mu.RLock()
		defer e.mu.RUnlock()
		for _, es := range e.order {
			if es.ent.Device == "nvidia"+gpu {
				if r := es.vals[e.plan.slotOf[fieldid.GPUTemp]].ring; r != nil {
					return r.Len()
				}
			}
		}
		return 0
	}
	step := func() {
		t.Helper()
		clk.Add(time.Second)
		require.NoError(t, e.CollectAll(context.Background()))
	}
	step()
	require.Equal(t, map[string]bool{"0": true, "1": true, "2": true, "3": true}, gpus())

	require.NoError(t, src.Unplug(2))
	step()
	assert.Equal(t, map[string]bool{"0": true, "1": true, "3": true}, gpus(), "GPU 2 leaves at the next poll")
	assert.Equal(t, 2, samples("0"), "GPU 0 was sampled at both collections")
	step()
	step()
	require.NoError(t, src.Replug(2))
	step()
	assert.Equal(t, map[string]bool{"0": true, "1": true, "2": true, "3": true}, gpus(), "GPU 2 is back at the next poll")
	assert.Equal(t, 5, samples("0"), "GPU 0 kept every sample across both changes")
	assert.Equal(t, 5, samples("3"))
	assert.Equal(t, 1, samples("2"), "GPU 2 starts afresh")
	assert.Empty(t, src.Status().Lost)
}
