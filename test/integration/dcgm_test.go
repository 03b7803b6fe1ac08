package integration

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/auto"
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/dcgm/dcgmfake"
	"github.com/gpuscope/gpuscope/source/nvml"
	"github.com/gpuscope/gpuscope/source/nvml/nvmlfake"
)

func parseCSV(t testing.TB, csv string) *counters.Set {
	t.Helper()
	set, err := counters.Parse("test.csv", strings.NewReader(csv))
	require.NoError(t, err)
	return set
}

// temps returns DCGM_FI_DEV_GPU_TEMP by GPU, failing on duplicate series.
func temps(t testing.TB, e *engine.Engine) map[string]float64 {
	t.Helper()
	mf := parse(t, e.Render(nil))["DCGM_FI_DEV_GPU_TEMP"]
	out := map[string]float64{}
	if mf == nil {
		return out
	}
	for _, m := range mf.Metric {
		gpu := labelOf(m, "gpu")
		_, dup := out[gpu]
		require.False(t, dup, "GPU %s has two DCGM_FI_DEV_GPU_TEMP series", gpu)
		out[gpu] = gaugeOf(m)
	}
	return out
}

func waitGoroutines(t *testing.T, baseline int) {
	t.Helper()
	if !testwait.Until(10*time.Second, func() bool { return runtime.NumGoroutine() <= baseline+2 }) {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines leaked: %d before, %d after\n%s", baseline, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
	}
}

// TestEngineSurvivesTwentyHostEngineRestarts kills and restarts the fake
// host engine 20 times under the real engine: gpuscope neither exits nor
// leaks goroutines, and each time the series return, with values sampled
// after the restart, within two watch intervals of the host engine being
// back (plus the reconnect backoff). The host engine, the source and the
// engine share one fake clock, so the times are measured on it and do not
// depend on how loaded the machine is.
func TestEngineSurvivesTwentyHostEngineRestarts(t *testing.T) {
	baseline := runtime.NumGoroutine()
	clk := newClock()
	var generation atomic.Int64
	fake := dcgmfake.New(dcgmfake.WithClock(clk), dcgmfake.WithGen(func(_ dcgm.EntityRef, field uint16, seq int64) (dcgm.Value, bool) {
		if field != fieldid.GPUTemp {
			return dcgm.Value{}, false
		}
		return dcgm.Value{Kind: dcgm.KindInt64, Int: generation.Load()*1_000_000 + seq}, true
	}))
	const interval = 500 * time.Millisecond
	const backoffMax = 50 * time.Millisecond
	const step = interval / 10
	src, err := dcgm.New(fake, dcgm.Config{Mode: dcgm.ModeEmbedded, Window: 15 * time.Second,
		BackoffInitial: 5 * time.Millisecond, BackoffMax: backoffMax, Log: quietLog(), Clock: clk})
	require.NoError(t, err)
	e, err := engine.New(engine.Options{Source: src, Counters: parseCSV(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t, 500ms\n"),
		DefaultInterval: time.Second, Log: quietLog(), Now: clk.Now, Clock: clk})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, e.Start(ctx))

	// waiting says whether gpuscope waits on the clock: the engine's loop
	// for its next read and, while the host engine is away, the source for
	// its next reconnect attempt. Time moves only then, as it would for a
	// process that is not starved of CPU.
	waiting := func() bool {
		if src.Status().Up {
			return clk.Timers() >= 1
		}
		return clk.Timers() >= 2
	}
	// advanceUntil moves the clock step by step until cond holds and says
	// how much clock time that took.
	advanceUntil := func(what string, cond func() bool) time.Duration {
		var waited time.Duration
		testwait.For(t, what, func() bool {
			if cond() {
				return true
			}
			if waiting() {
				clk.Add(step)
				waited += step
			}
			return false
		})
		return waited
	}
	backWithin := func(gen int64) time.Duration {
		return advanceUntil(fmt.Sprintf("the series of generation %d", gen), func() bool {
			got := temps(t, e)
			return len(got) == 2 && got["0"] >= float64(gen*1_000_000) && got["1"] >= float64(gen*1_000_000)
		})
	}
	backWithin(0)
	limit := 2*interval + backoffMax + step
	for i := 1; i <= 20; i++ {
		fake.Kill()
		advanceUntil("the source to notice the kill", func() bool { return !src.Status().Up })
		generation.Store(int64(i))
		fake.Restart()
		assert.LessOrEqual(t, backWithin(int64(i)), limit, "restart %d: series back within two intervals and the backoff", i)
	}

	e.Stop()
	cancel()
	require.NoError(t, src.Close())
	waitGoroutines(t, baseline)
}

// TestAutoModeKeepsTheGPUsVisible runs the auto source over a fake host
// engine and a fake DGX H100 driver under the real engine: DCGM serves
// first; while it is down NVML serves the same series (no duplicate, none
// vanished); DCGM serves again when it returns.
func TestAutoModeKeepsTheGPUsVisible(t *testing.T) {
	nvf := nvmlfake.New(nvmlfake.DGXH100)
	probe, err := nvml.New(nvml.Config{Lib: nvf, Logger: quietLog(), EventWait: 20 * time.Millisecond})
	require.NoError(t, err)
	var gpus []dcgm.GPUInfo
	for _, ent := range probe.Entities() {
		if ent.Kind == source.GPU {
			gpus = append(gpus, dcgm.GPUInfo{ID: uint(ent.GPU), UUID: ent.UUID, PCIBusID: ent.PCIBusID, Model: ent.ModelName})
		}
	}
	require.NoError(t, probe.Close())
	require.Len(t, gpus, 8)

	// DCGM's temperatures are 1000 and up, NVML's are realistic: the value
	// tells which backend fed a series.
	fake := dcgmfake.New(dcgmfake.WithGPUs(gpus...), dcgmfake.WithGen(func(_ dcgm.EntityRef, field uint16, seq int64) (dcgm.Value, bool) {
		if field != fieldid.GPUTemp {
			return dcgm.Value{}, false
		}
		return dcgm.Value{Kind: dcgm.KindInt64, Int: 1000 + seq}, true
	}))
	as, err := auto.New(
		func() (source.Source, error) {
			return dcgm.New(fake, dcgm.Config{Mode: dcgm.ModeEmbedded, Window: 15 * time.Second,
				BackoffInitial: 5 * time.Millisecond, BackoffMax: 50 * time.Millisecond, Log: quietLog()})
		},
		func() (source.Source, error) {
			return nvml.New(nvml.Config{Lib: nvf, Logger: quietLog(), EventWait: 20 * time.Millisecond})
		},
		quietLog(), auto.WithProbe(20*time.Millisecond, 100*time.Millisecond),
	)
	require.NoError(t, err)
	defer as.Close()
	e, err := engine.New(engine.Options{Source: as, Counters: parseCSV(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t, 100ms\n"),
		DefaultInterval: time.Second, Log: quietLog()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, e.Start(ctx))
	defer e.Stop()

	servedBy := func(dcgmSide bool) func() bool {
		return func() bool {
			got := temps(t, e)
			if len(got) != 8 {
				return false
			}
			for _, v := range got {
				if (v >= 1000) != dcgmSide {
					return false
				}
			}
			return true
		}
	}
	sourceUp := func(name string) float64 {
		reg := prometheus.NewRegistry()
		reg.MustRegister(e)
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() != "gpuscope_source_up" {
				continue
			}
			for _, m := range mf.Metric {
				if labelOf(m, "source") == name {
					return m.GetGauge().GetValue()
				}
			}
		}
		return -1
	}
	for round := range 3 {
		require.Eventually(t, servedBy(true), 20*time.Second, 10*time.Millisecond, "round %d: DCGM serves all 8 GPUs", round)
		require.Eventually(t, func() bool { return sourceUp("dcgm") == 1 }, 10*time.Second, 50*time.Millisecond)
		fake.Kill()
		require.Eventually(t, servedBy(false), 20*time.Second, 10*time.Millisecond, "round %d: NVML serves all 8 GPUs while DCGM is down", round)
		require.Eventually(t, func() bool { return sourceUp("nvml") == 1 }, 10*time.Second, 50*time.Millisecond)
		assert.Len(t, temps(t, e), 8, "no GPU vanished or doubled")
		fake.Restart()
	}
	require.Eventually(t, servedBy(true), 20*time.Second, 10*time.Millisecond, "DCGM serves again")
	ok, why := e.Ready()
	assert.True(t, ok, why)
}
