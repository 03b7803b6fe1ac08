package window

import (
	"fmt"
	"math"
	"slices"

	"github.com/gpuscope/gpuscope/counters"
)

// maxQuantiles bounds the quantile statistics, which Stats holds in an
// array so that reading a window allocates nothing.
const maxQuantiles = 8

// quantiles are the quantiles of counters.Statistics, in their order there; slot
// is the index in quantiles of each statistic that is one, and ascending
// the indexes of quantiles from the lowest quantile up, the order a
// selection places them in.
var quantiles, slot, ascending = quantilesOf(counters.Statistics)

func quantilesOf(sts []counters.Statistic) (qs []float64, slot []int, asc []int) {
	slot = make([]int, len(sts))
	for i, st := range sts {
		slot[i] = -1
		if st.Of != counters.Quantile {
			continue
		}
		if !(st.Q >= 0 && st.Q <= 1) || len(qs) == maxQuantiles {
			panic(fmt.Sprintf("window: statistic %q: quantile %v outside [0, 1], or more than %d quantiles", st.Name, st.Q, maxQuantiles))
		}
		slot[i] = len(qs)
		qs = append(qs, st.Q)
	}
	asc = make([]int, len(qs))
	for i := range asc {
		asc[i] = i
	}
	slices.SortStableFunc(asc, func(a, b int) int {
		switch {
		case qs[a] < qs[b]:
			return -1
		case qs[a] > qs[b]:
			return 1
		}
		return 0
	})
	return qs, slot, asc
}

// Stats are the statistics of the samples in a window.
type Stats struct {
	Count          int
	Min, Max, Avg  float64
	Oldest, Newest int64
	// q holds the value of each of quantiles, when computed.
	q [maxQuantiles]float64
}

// Of is the value of counters.Statistics[i].
func (s *Stats) Of(i int) float64 {
	switch counters.Statistics[i].Of {
	case counters.Least:
		return s.Min
	case counters.Greatest:
		return s.Max
	case counters.Mean:
		return s.Avg
	}
	return s.q[slot[i]]
}

// Quantile is the value of the registered quantile statistic q, NaN when
// no statistic is that quantile.
func (s *Stats) Quantile(q float64) float64 {
	if i := slices.Index(quantiles, q); i >= 0 {
		return s.q[i]
	}
	return math.NaN()
}

// SetQuantiles sets every quantile statistic to what of gives for its
// quantile: how a reference computation fills Stats.
func (s *Stats) SetQuantiles(of func(q float64) float64) {
	for i, q := range quantiles {
		s.q[i] = of(q)
	}
}

// interpolate is the q quantile of n values, rank(k) the value of rank k
// (from 0): linear interpolation between the two closest ranks, as
// numpy.percentile and PromQL's quantile_over_time compute it. rank is
// called for the lower rank first, then for the next one when needed.
func interpolate(n int, q float64, rank func(k int) float64) float64 {
	if n == 1 {
		return rank(0)
	}
	r := q * float64(n-1)
	lo := int(math.Floor(r))
	x := rank(lo)
	if lo+1 >= n {
		return x
	}
	return x + (r-float64(lo))*(rank(lo+1)-x)
}
