package engine

import (
	"math"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

// TestEveryRegisteredStatisticIsRendered: a counters line asking for one
// registered window statistic gets exactly that series, stat="<name>",
// with the value a sorted reference gives for it.
func TestEveryRegisteredStatisticIsRendered(t *testing.T) {
	// Eleven samples 100 ms apart, out of order: 0.3, 0.6, ... on GPU 0.
	vals := []float64{0.3, 0.6, 0.9, 0.1, 0.4, 0.7, 1.0, 0.2, 0.5, 0.8, 0.05}
	sorted := append([]float64(nil), vals...)
	sort.Float64s(sorted)
	reference := func(st counters.Statistic) float64 {
		switch st.Of {
		case counters.Least:
			return sorted[0]
		case counters.Greatest:
			return sorted[len(sorted)-1]
		case counters.Mean:
			sum := 0.0
			for _, v := range sorted {
				sum += v
			}
			return sum / float64(len(sorted))
		}
		r := st.Q * float64(len(sorted)-1)
		lo := int(math.Floor(r))
		if lo+1 >= len(sorted) {
			return sorted[lo]
		}
		return sorted[lo] + (r-float64(lo))*(sorted[lo+1]-sorted[lo])
	}
	for _, reg := range counters.Statistics {
		t.Run(reg.Name, func(t *testing.T) {
			clk := newClock()
			step := 0
			src := sourcetest.NewGPUs(1, func(_ *source.Entity, _ uint16, _ time.Time) (float64, bool) {
				return vals[step], true
			})
			e := newTestEngine(t, "DCGM_FI_PROF_SM_ACTIVE, gauge, a, 100ms, "+reg.Name+"\n", src, clk)
			for step = range vals {
				clk.Add(100 * time.Millisecond)
				collectAll(t, e)
			}
			mfs := scrape(t, e)
			all := series(mfs, "DCGM_FI_PROF_SM_ACTIVE_window", map[string]string{"gpu": "0"})
			require.Len(t, all, 1, "one series: the statistic asked for")
			m := series(mfs, "DCGM_FI_PROF_SM_ACTIVE_window", map[string]string{"gpu": "0", "stat": reg.Name})
			require.Len(t, m, 1)
			assert.InDelta(t, reference(reg), value(m[0]), 1e-12)
		})
	}
}
