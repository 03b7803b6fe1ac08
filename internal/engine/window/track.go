package window

import (
	"math"
	"slices"
)

// maxExcluded bounds the samples a read leaves out of the tracked window
// by correction. A read's window ends at the render's clock, the tracked one
// at the newest sample, so a series sampled on time differs by a sample or
// two; more means the series stopped, and its window is read from the ring.
const maxExcluded = 16

// tracker keeps the window statistics of a ring up to date as samples
// arrive, so that reading them does not grow with the window: the values of
// the samples in the last span (the newest tn the ring holds), sorted, and
// their sum. Min and max are its ends and a percentile two of its ranks.
type tracker struct {
	span int64
	// tn is how many of the newest samples the ring holds are in the
	// window, NaNs included; cut is the newest sample's time less span.
	tn  int
	cut int64
	// sorted holds the values of the tracked samples that are numbers.
	sorted []float64
	// sum+comp is the sum of the finite values of sorted, compensated
	// (Neumaier) so that adding and taking away values of very different
	// sizes loses nothing; inf counts the others, which would make it NaN
	// once removed.
	sum ksum
	inf int
	// ops counts the updates since sum was last added up from scratch: a
	// running sum of adds and removes drifts, so it is redone every
	// len(ring) updates, at no extra cost per update on average.
	ops int
}

// lowerBound is the index of the first value of a not below x: what
// sort.SearchFloat64s returns, without its call per step, which would
// double the cost of a sample.
func lowerBound(a []float64, x float64) int {
	lo, hi := 0, len(a)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if a[m] < x {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func (t *tracker) add(v float64) {
	if v != v {
		return
	}
	i := lowerBound(t.sorted, v)
	t.sorted = slices.Insert(t.sorted, i, v)
	if math.IsInf(v, 0) {
		t.inf++
	} else {
		t.sum.add(v)
	}
	t.ops++
}

func (t *tracker) remove(v float64) {
	if v != v {
		return
	}
	i := lowerBound(t.sorted, v)
	if i == len(t.sorted) || t.sorted[i] != v {
		return
	}
	t.sorted = slices.Delete(t.sorted, i, i+1)
	if math.IsInf(v, 0) {
		t.inf--
	} else {
		t.sum.add(-v)
	}
	t.ops++
}

// ksum is a sum compensated for rounding (Neumaier's): a running sum that
// takes away values of very different sizes keeps the small ones.
type ksum struct{ s, c float64 }

func (k *ksum) add(v float64) {
	s := k.s + v
	if math.Abs(k.s) >= math.Abs(v) {
		k.c += (k.s - s) + v
	} else {
		k.c += (v - s) + k.s
	}
	k.s = s
}

func (k ksum) value() float64 { return k.s + k.c }

// resum adds sum up again once enough updates could have made it drift.
func (t *tracker) resum(capacity int) {
	if t.ops < capacity {
		return
	}
	t.ops, t.sum = 0, ksum{}
	for _, v := range t.sorted {
		if !math.IsInf(v, 0) {
			t.sum.add(v)
		}
	}
}

// Track makes the ring keep the statistics of its samples in the last span
// (nanoseconds) as they arrive, for Stats; 0 stops it. Changing the span
// goes over the samples held once.
func (r *Ring) Track(span int64) {
	if span <= 0 {
		r.tr = nil
		return
	}
	if r.tr != nil && r.tr.span == span {
		return
	}
	r.tr = &tracker{span: span, sorted: make([]float64, 0, min(len(r.ts), 256))}
	c := len(r.ts)
	for i := 0; i < r.n; i++ {
		j := (r.head - r.n + i + c) % c
		r.tr.add(r.vals[j])
		r.tr.tn++
	}
	if newest, ok := r.Newest(); ok {
		r.expire(newest - span)
	}
}

// Tracked says whether the ring keeps its window statistics up to date.
func (r *Ring) Tracked() bool { return r.tr != nil }

// trackOverwrite takes out of the window the sample that the next push
// overwrites, if it is in it.
func (r *Ring) trackOverwrite() {
	if t := r.tr; r.n == len(r.ts) && t.tn == r.n {
		t.remove(r.vals[r.head])
		t.tn--
	}
}

// trackNewest adds the sample just pushed and lets the window slide. In
// the steady state one sample leaves as one arrives, and the values between
// the two places move once.
func (r *Ring) trackNewest(ts int64, v float64) {
	t, c := r.tr, len(r.ts)
	cut := ts - t.span
	// The oldest tracked sample before this push, at r.head-1-tn.
	if j := wrap(r.head-1-t.tn, c); t.tn > 0 && t.tn < c && r.ts[j] <= cut && v == v && r.vals[j] == r.vals[j] &&
		(t.tn == 1 || r.ts[wrap(j+1, c)] > cut) && !math.IsInf(v, 0) && !math.IsInf(r.vals[j], 0) && t.replace(r.vals[j], v) {
		t.cut = cut
		t.resum(c)
		return
	}
	t.add(v)
	t.tn++
	r.expire(cut)
	t.resum(c)
}

// replace takes old out of the window and puts v in, moving the values
// between their places once; false when old is not there.
func (t *tracker) replace(old, v float64) bool {
	if old == v && len(t.sorted) > 0 {
		// old is the oldest tracked sample's value, so it is in the
		// window: putting the same value in its place changes nothing.
		t.ops += 2
		return true
	}
	i := lowerBound(t.sorted, old)
	if i == len(t.sorted) || t.sorted[i] != old {
		return false
	}
	j := lowerBound(t.sorted, v)
	if j > i {
		copy(t.sorted[i:j-1], t.sorted[i+1:j])
		t.sorted[j-1] = v
	} else {
		copy(t.sorted[j+1:i+1], t.sorted[j:i])
		t.sorted[j] = v
	}
	t.sum.add(v)
	t.sum.add(-old)
	t.ops += 2
	return true
}

// expire drops the tracked samples not newer than cut, oldest first.
func (r *Ring) expire(cut int64) {
	t, c := r.tr, len(r.ts)
	t.cut = cut
	for t.tn > 0 {
		j := wrap(r.head-t.tn, c)
		if r.ts[j] > cut {
			return
		}
		t.remove(r.vals[j])
		t.tn--
	}
}

// Stats returns the statistics of the samples with timestamps in
// (since, +inf), the same as Compute. A tracked ring reads them from its
// running state: the cost depends on neither the window nor its samples.
// The running state ends at the newest sample, so a read whose since lies
// before the newest sample's time less the span (a clock behind the
// source's) covers that span instead. scratch is used and returned as by
// Compute.
func (r *Ring) Stats(since int64, scratch []float64) (Stats, []float64) {
	t := r.tr
	if t == nil || t.inf > 0 {
		return r.Compute(since, scratch)
	}
	c := len(r.ts)
	// The oldest tracked samples may be older than since: they are left out
	// by correcting the ranks, as long as there are few of them.
	scratch = scratch[:0]
	skip := 0
	for ; skip < t.tn; skip++ {
		j := (r.head - t.tn + skip + c) % c
		if r.ts[j] > since {
			break
		}
		if skip == maxExcluded {
			return r.Compute(max(since, t.cut), scratch)
		}
		if v := r.vals[j]; v == v {
			scratch = append(scratch, v)
		}
	}
	var st Stats
	n := len(t.sorted) - len(scratch)
	if n <= 0 {
		return st, scratch
	}
	var ex excluded
	ex.set(t.sorted, scratch)
	st.Count = n
	st.Min, st.Max = t.sorted[ex.index(0)], t.sorted[ex.index(n-1)]
	sum := t.sum
	for _, v := range scratch {
		sum.add(-v)
	}
	st.Avg = sum.value() / float64(n)
	st.P50 = ex.quantile(t.sorted, n, 0.50)
	st.P90 = ex.quantile(t.sorted, n, 0.90)
	st.P99 = ex.quantile(t.sorted, n, 0.99)
	st.Oldest, st.Newest = r.numberTimes(t.tn - skip)
	return st, scratch
}

// numberTimes returns the times of the oldest and the newest sample that is
// a number among the newest n the ring holds.
func (r *Ring) numberTimes(n int) (oldest, newest int64) {
	c := len(r.ts)
	for i := 0; i < n; i++ {
		if j := (r.head - n + i + c) % c; r.vals[j] == r.vals[j] {
			oldest = r.ts[j]
			break
		}
	}
	for i := 1; i <= n; i++ {
		if j := (r.head - i + c) % c; r.vals[j] == r.vals[j] {
			newest = r.ts[j]
			break
		}
	}
	return oldest, newest
}

// excluded is the set of positions of sorted that a read leaves out, in
// ascending order: one per value left out, a run of equal values taking
// consecutive positions.
type excluded struct {
	pos [maxExcluded]int
	n   int
}

// set finds the positions of vals, which sorted holds; vals is reordered.
func (x *excluded) set(sorted, vals []float64) {
	slices.Sort(vals)
	x.n = len(vals)
	for i, v := range vals {
		p := lowerBound(sorted, v)
		if i > 0 && vals[i-1] == v {
			p = x.pos[i-1] + 1
		}
		x.pos[i] = p
	}
}

// index is the position in sorted of rank k of the values not left out.
func (x *excluded) index(k int) int {
	for _, p := range x.pos[:x.n] {
		if p > k {
			break
		}
		k++
	}
	return k
}

// quantile interpolates linearly between the two closest ranks of the n
// values not left out, as quantileSelect does.
func (x *excluded) quantile(sorted []float64, n int, q float64) float64 {
	if n == 1 {
		return sorted[x.index(0)]
	}
	rank := q * float64(n-1)
	lo := int(math.Floor(rank))
	v := sorted[x.index(lo)]
	if lo+1 >= n {
		return v
	}
	return v + (rank-float64(lo))*(sorted[x.index(lo+1)]-v)
}
