// Package window keeps the recent samples of one series in a fixed-size ring
// and computes statistics over a sliding time window of them.
package window

import (
	"math"
	"sort"
	"time"
)

// MaxCapacity bounds a ring whatever the configuration asks for: a 15 s
// window at 100 ms needs 150 slots, so this leaves ample room while capping
// memory at 16 bytes x MaxCapacity per series.
const MaxCapacity = 4096

// SamplesFor is the number of samples a ring needs to cover a window of win
// at one sample every iv: one per interval, plus the sample just before the
// window starts and the one just taken, so that a rate or a span over the
// whole window has both ends. It is not clamped: callers that refuse a window
// compare it with MaxCapacity, the others clamp it.
func SamplesFor(win, iv time.Duration) int {
	if iv <= 0 {
		return MaxCapacity
	}
	return int(win/iv) + 2
}

// SpanOf is the longest window a ring of capacity samples covers at one
// sample every iv: SamplesFor inverted.
func SpanOf(capacity int, iv time.Duration) time.Duration { return time.Duration(capacity-2) * iv }

// CapacityFor is SamplesFor clamped to MaxCapacity: the ring to allocate.
func CapacityFor(win, iv time.Duration) int { return min(SamplesFor(win, iv), MaxCapacity) }

// Ring holds the last Cap samples of a series, oldest overwritten first.
// It is not safe for concurrent use; the engine guards it.
type Ring struct {
	// s holds the samples, each time beside its value: a push writes one
	// and the sample leaving the window is read as one, each a single
	// cache line of a ring that is rarely still in the caches.
	s    []sample
	head int // next slot to write
	n    int // samples held
	// last is the newest sample's time, kept beside head: every push
	// compares with it, and reading it from ts would wait on memory for
	// nearly every sample, a thousand rings being sampled in turn.
	last int64
	// tr keeps the window statistics up to date, when Track asked.
	tr tracker
}

// sample is one sample of a ring.
type sample struct {
	ts int64
	v  float64
}

// NewRing returns a ring of the given capacity, clamped to [2, MaxCapacity].
func NewRing(capacity int) *Ring {
	if capacity < 2 {
		capacity = 2
	}
	if capacity > MaxCapacity {
		capacity = MaxCapacity
	}
	return &Ring{s: make([]sample, capacity)}
}

// Cap is the number of samples the ring can hold.
func (r *Ring) Cap() int { return len(r.s) }

// Len is the number of samples the ring holds.
func (r *Ring) Len() int { return r.n }

// Push records a sample. A sample not newer than the latest one replaces it
// when it has the same timestamp and is dropped when older, so a source that
// hands over overlapping reads cannot skew the statistics.
func (r *Ring) Push(ts int64, v float64) {
	if r.n > 0 {
		if ts == r.last {
			last := wrap(r.head-1, len(r.s))
			if r.tr.span != 0 {
				r.trackReplace(r.s[last].v, v)
			}
			r.s[last].v = v
			return
		}
		if ts < r.last {
			return
		}
	}
	r.last = ts
	if r.tr.span != 0 {
		r.pushTracked(ts, v)
		return
	}
	r.s[r.head] = sample{ts: ts, v: v}
	r.head = wrap(r.head+1, len(r.s))
	if r.n < len(r.s) {
		r.n++
	}
}

// wrap brings an index in (-c, 2c) into the ring of capacity c. A
// division per sample costs more than the rest of a push.
func wrap(i, c int) int {
	switch {
	case i < 0:
		return i + c
	case i >= c:
		return i - c
	}
	return i
}

// CopyFrom moves the samples of old into r, newest kept when r is smaller.
func (r *Ring) CopyFrom(old *Ring) {
	start := old.n - len(r.s)
	if start < 0 {
		start = 0
	}
	for i := start; i < old.n; i++ {
		j := (old.head - old.n + i + 2*len(old.s)) % len(old.s)
		r.Push(old.s[j].ts, old.s[j].v)
	}
}

// Compute returns the statistics of the samples with timestamps in
// (since, +inf). scratch is reused to order the values and is returned
// grown, so a caller that keeps it computes without allocating. Percentiles
// are exact: linear interpolation between the two closest ranks, as
// numpy.percentile and PromQL's quantile_over_time compute them.
func (r *Ring) Compute(since int64, scratch []float64) (Stats, []float64) {
	return r.ComputeSome(since, scratch, true)
}

// ComputeSome is Compute, with the percentiles left at 0 unless asked for:
// they are the costly part, and a counters file that asks only for min,
// max or avg should not pay for them.
func (r *Ring) ComputeSome(since int64, scratch []float64, percentiles bool) (Stats, []float64) {
	scratch = scratch[:0]
	var st Stats
	c := len(r.s)
	oldest := (r.head - r.n + c) % c
	// Timestamps rise from the oldest sample, so the window's first one is
	// found by bisection and every later one is in it.
	first := sort.Search(r.n, func(i int) bool { return r.s[(oldest+i)%c].ts > since })
	if first == r.n {
		return st, scratch
	}
	sum := 0.0
	// The samples in the window lie in at most two runs of the arrays.
	from := (oldest + first) % c
	runs := [2][2]int{{from, min(c, from+r.n-first)}, {0, 0}}
	if from+r.n-first > c {
		runs[1][1] = from + r.n - first - c
	}
	for _, run := range runs {
		for j := run[0]; j < run[1]; j++ {
			v := r.s[j].v
			if v != v { // NaN
				continue
			}
			if st.Count == 0 {
				st.Min, st.Max, st.Oldest = v, v, r.s[j].ts
			}
			st.Count++
			if v < st.Min {
				st.Min = v
			}
			if v > st.Max {
				st.Max = v
			}
			st.Newest = r.s[j].ts
			sum += v
			if percentiles {
				scratch = append(scratch, v)
			}
		}
	}
	if st.Count == 0 {
		return st, scratch
	}
	st.Avg = sum / float64(st.Count)
	if percentiles {
		// Selection, not a sort: each rank is placed in linear time, and
		// each later one is searched for above the one before.
		from := 0
		for _, i := range ascending {
			st.q[i] = quantileSelect(scratch, from, quantiles[i])
			from = rankOf(len(scratch), quantiles[i]) + 1
		}
	}
	return st, scratch
}

func rankOf(n int, q float64) int { return int(math.Floor(q * float64(n-1))) }

// quantileSelect is the q quantile of vals (interpolate). vals[:from]
// already hold the values below rank from, each at most the values after
// them; on return the rank of q is in place likewise.
func quantileSelect(vals []float64, from int, q float64) float64 {
	placed := -1
	return interpolate(len(vals), q, func(k int) float64 {
		if placed >= 0 && k == placed+1 {
			// The next rank is the smallest value above the one placed.
			hi := vals[k]
			for _, v := range vals[k+1:] {
				if v < hi {
					hi = v
				}
			}
			return hi
		}
		from = min(from, k)
		selectNth(vals[from:], k-from)
		placed = k
		return vals[k]
	})
}

// selectNth reorders a so that a[k] is the value of rank k, every value
// before it no greater and every value after it no smaller (Hoare's
// selection with a median-of-three pivot).
func selectNth(a []float64, k int) {
	lo, hi := 0, len(a)-1
	for hi > lo {
		if hi-lo < 16 {
			insertionSort(a[lo : hi+1])
			return
		}
		mid := lo + (hi-lo)/2
		if a[mid] < a[lo] {
			a[mid], a[lo] = a[lo], a[mid]
		}
		if a[hi] < a[lo] {
			a[hi], a[lo] = a[lo], a[hi]
		}
		if a[hi] < a[mid] {
			a[hi], a[mid] = a[mid], a[hi]
		}
		pivot := a[mid]
		i, j := lo, hi
		for i <= j {
			for a[i] < pivot {
				i++
			}
			for a[j] > pivot {
				j--
			}
			if i <= j {
				a[i], a[j] = a[j], a[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return
		}
	}
}

func insertionSort(a []float64) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

// Newest returns the timestamp of the latest sample, and false when the ring
// is empty.
func (r *Ring) Newest() (int64, bool) {
	if r.n == 0 {
		return 0, false
	}
	return r.last, true
}
