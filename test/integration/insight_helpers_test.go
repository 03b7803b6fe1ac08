package integration

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/sim"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

// measured is what one GPU's insight series show.
type measured struct {
	period     float64 // 0 when absent
	confidence float64
	stallRatio float64
	stalls     float64
	bound      map[string]float64
	has        bool
}

// dominant is the class with the largest share.
func (m measured) dominant() (string, float64) {
	best, share := "", -1.0
	for c, v := range m.bound {
		if v > share || (v == share && c < best) {
			best, share = c, v
		}
	}
	return best, share
}

// insightOf reads the insight families of an exposition by GPU index.
func insightOf(t testing.TB, exposition []byte) map[int]measured {
	t.Helper()
	out := map[int]measured{}
	for k, m := range insightBy(t, exposition, func(s *dto.Metric) string { return labelOf(s, "gpu") }) {
		i, err := strconv.Atoi(k)
		require.NoError(t, err)
		out[i] = m
	}
	return out
}

// insightBy reads the insight families of an exposition by the key each
// series gives.
func insightBy(t testing.TB, exposition []byte, keyOf func(*dto.Metric) string) map[string]measured {
	t.Helper()
	fams := parse(t, exposition)
	out := map[string]measured{}
	get := func(k string) measured {
		m := out[k]
		if m.bound == nil {
			m.bound = map[string]float64{}
		}
		return m
	}
	put := func(k string, m measured) { out[k] = m }
	for name, mf := range fams {
		if !strings.HasPrefix(name, "gpuscope_gpu_") {
			continue
		}
		for _, s := range mf.Metric {
			gpu := keyOf(s)
			v := gaugeOf(s)
			m := get(gpu)
			switch name {
			case "gpuscope_gpu_step_period_seconds":
				m.period = v
			case "gpuscope_gpu_step_period_confidence":
				m.confidence, m.has = v, true
			case "gpuscope_gpu_stall_ratio":
				m.stallRatio = v
			case "gpuscope_gpu_stalls_total":
				m.stalls = v
			case "gpuscope_gpu_bound_ratio":
				m.bound[labelOf(s, "bound")] = v
			default:
				continue
			}
			put(gpu, m)
		}
	}
	return out
}

// insightEngine is an engine with insight on over src, driven by hand.
func insightEngine(t testing.TB, src source.Source, set *counters.Set, clk *sourcetest.Clock) *engine.Engine {
	t.Helper()
	e, err := engine.New(engine.Options{
		Source: src, Counters: set, DefaultInterval: time.Second, Hostname: "node-1",
		Now: clk.Now, Log: quietLog(), Insight: engine.InsightOptions{Enabled: true},
	})
	require.NoError(t, err)
	require.NoError(t, e.Open())
	return e
}

// drive collects every 100 ms for d, calling before (when not nil) before
// each collection, then computes the insight metrics once.
func drive(t testing.TB, e *engine.Engine, clk *sourcetest.Clock, d time.Duration, before func(time.Time)) {
	t.Helper()
	for elapsed := time.Duration(0); elapsed < d; elapsed += 100 * time.Millisecond {
		clk.Add(100 * time.Millisecond)
		if before != nil {
			before(clk.Now())
		}
		require.NoError(t, e.CollectAll(context.Background()))
	}
	e.ComputeInsight()
}

// minimalSet is a counters file without any profiling field: the insight
// metrics watch theirs themselves.
func minimalSet(t testing.TB) *counters.Set {
	return parseCSV(t, "DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n")
}

// kindsRun runs one simulated node with every workload kind, one per GPU,
// for 40 s and returns what the insight metrics show and the truth.
func kindsRun(t testing.TB, seed int64, jitter, noise float64) (map[int]measured, []sim.Truth) {
	t.Helper()
	clk := newClock()
	cfg := sim.DefaultConfig()
	cfg.GPUs, cfg.Seed, cfg.Now, cfg.EventRate = len(sim.Kinds()), seed, clk.Now, 0
	cfg.Workloads, cfg.StepJitter, cfg.Noise = sim.Kinds(), jitter, noise
	src, err := sim.New(cfg)
	require.NoError(t, err)
	e := insightEngine(t, src, minimalSet(t), clk)
	drive(t, e, clk, 40*time.Second, nil)
	var truths []sim.Truth
	for i := range sim.Kinds() {
		tr, ok := src.Truth(i)
		require.True(t, ok)
		truths = append(truths, tr)
	}
	return insightOf(t, e.Render(nil)), truths
}
