// Package window keeps the recent samples of one series in a fixed-size ring
// and computes statistics over a sliding time window of them.
package window

import (
	"math"
	"sort"
)

// MaxCapacity bounds a ring whatever the configuration asks for: a 15 s
// window at 100 ms needs 150 slots, so this leaves ample room while capping
// memory at 16 bytes x MaxCapacity per series.
const MaxCapacity = 4096

// Ring holds the last Cap samples of a series, oldest overwritten first.
// It is not safe for concurrent use; the engine guards it.
type Ring struct {
	ts   []int64
	vals []float64
	head int // next slot to write
	n    int // samples held
}

// NewRing returns a ring of the given capacity, clamped to [2, MaxCapacity].
func NewRing(capacity int) *Ring {
	if capacity < 2 {
		capacity = 2
	}
	if capacity > MaxCapacity {
		capacity = MaxCapacity
	}
	return &Ring{ts: make([]int64, capacity), vals: make([]float64, capacity)}
}

// Cap is the number of samples the ring can hold.
func (r *Ring) Cap() int { return len(r.ts) }

// Len is the number of samples the ring holds.
func (r *Ring) Len() int { return r.n }

// Push records a sample. A sample not newer than the latest one replaces it
// when it has the same timestamp and is dropped when older, so a source that
// hands over overlapping reads cannot skew the statistics.
func (r *Ring) Push(ts int64, v float64) {
	if r.n > 0 {
		last := (r.head - 1 + len(r.ts)) % len(r.ts)
		if ts == r.ts[last] {
			r.vals[last] = v
			return
		}
		if ts < r.ts[last] {
			return
		}
	}
	r.ts[r.head] = ts
	r.vals[r.head] = v
	r.head = (r.head + 1) % len(r.ts)
	if r.n < len(r.ts) {
		r.n++
	}
}

// CopyFrom moves the samples of old into r, newest kept when r is smaller.
func (r *Ring) CopyFrom(old *Ring) {
	start := old.n - len(r.ts)
	if start < 0 {
		start = 0
	}
	for i := start; i < old.n; i++ {
		j := (old.head - old.n + i + 2*len(old.ts)) % len(old.ts)
		r.Push(old.ts[j], old.vals[j])
	}
}

// Stats are the statistics of the samples in a window.
type Stats struct {
	Count          int
	Min, Max, Avg  float64
	P50, P90, P99  float64
	Oldest, Newest int64
}

// Compute returns the statistics of the samples with timestamps in
// (since, +inf). scratch is reused to sort the values and is returned grown,
// so a caller that keeps it computes without allocating. Percentiles are
// exact: linear interpolation between the two closest ranks, as
// numpy.percentile and PromQL's quantile_over_time compute them.
func (r *Ring) Compute(since int64, scratch []float64) (Stats, []float64) {
	scratch = scratch[:0]
	var st Stats
	sum := 0.0
	for i := 0; i < r.n; i++ {
		j := (r.head - r.n + i + 2*len(r.ts)) % len(r.ts)
		if r.ts[j] <= since {
			continue
		}
		v := r.vals[j]
		if math.IsNaN(v) {
			continue
		}
		if len(scratch) == 0 {
			st.Min, st.Max, st.Oldest = v, v, r.ts[j]
		}
		st.Min = math.Min(st.Min, v)
		st.Max = math.Max(st.Max, v)
		st.Newest = r.ts[j]
		sum += v
		scratch = append(scratch, v)
	}
	st.Count = len(scratch)
	if st.Count == 0 {
		return st, scratch
	}
	st.Avg = sum / float64(st.Count)
	sort.Float64s(scratch)
	st.P50 = quantile(scratch, 0.50)
	st.P90 = quantile(scratch, 0.90)
	st.P99 = quantile(scratch, 0.99)
	return st, scratch
}

// quantile interpolates linearly between the closest ranks of sorted values.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 1 {
		return sorted[0]
	}
	rank := q * float64(len(sorted)-1)
	lo := int(math.Floor(rank))
	hi := lo + 1
	if hi >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	frac := rank - float64(lo)
	return sorted[lo] + frac*(sorted[hi]-sorted[lo])
}

// Since appends the samples with timestamps in (since, +inf) to ts and vals,
// oldest first, and returns them grown; a caller that keeps them copies
// without allocating.
func (r *Ring) Since(since int64, ts []int64, vals []float64) ([]int64, []float64) {
	for i := 0; i < r.n; i++ {
		j := (r.head - r.n + i + 2*len(r.ts)) % len(r.ts)
		if r.ts[j] <= since {
			continue
		}
		ts = append(ts, r.ts[j])
		vals = append(vals, r.vals[j])
	}
	return ts, vals
}

// Newest returns the timestamp of the latest sample, and false when the ring
// is empty.
func (r *Ring) Newest() (int64, bool) {
	if r.n == 0 {
		return 0, false
	}
	return r.ts[(r.head-1+len(r.ts))%len(r.ts)], true
}
