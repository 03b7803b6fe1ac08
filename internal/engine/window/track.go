package window

import (
	"cmp"
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
// the samples in the last span (the newest tn the ring holds), in a multiset
// that keeps them sorted, and their sum. Min and max are its ends and a
// percentile two of its ranks. The newest pn samples are not in the multiset
// yet: they are merged pendingMax at a time, read from the ring.
type tracker struct {
	// span is 0 when the ring keeps no statistics.
	span int64
	// tn is how many of the newest samples the ring holds are in the
	// window, NaNs included; pn how many of those are not merged into multiset
	// (pn <= tn); cut is the newest sample's time less span.
	tn, pn int
	cut    int64
	// seq is the push number of the newest sample, drop that of the newest
	// sample that left the window.
	seq, drop uint32
	// sum is the sum of the finite values of the tracked samples,
	// compensated (ksum) so that adding and taking away values of very
	// different sizes loses nothing; inf counts the others, which would
	// make it NaN once removed.
	sum ksum
	inf int
	// ops counts the updates since sum was last added up from scratch: a
	// running sum of adds and removes drifts, so it is redone once in a
	// while (resumEvery).
	ops int
	// multiset holds the values of the tracked samples that are numbers, but
	// for the newest pn. It comes last: a push reads the fields above, the
	// multiset's held departures only when one leaves.
	multiset multiset
}

// lowerBound is the index of the first value of a not below x: what
// sort.SearchFloat64s returns, without its call per step, and without a
// branch on the comparison, which a read mispredicts at half the steps.
func lowerBound(a []float64, x float64) int {
	base, n := 0, len(a)
	if n == 0 {
		return 0
	}
	for n > 1 {
		half := n >> 1
		// base+half-1 < base+n <= len(a)
		base += half & -b2i(a[base+half-1] < x)
		n -= half
	}
	return base + b2i(a[base] < x)
}

// b2i is 1 for true: the compiler sets it from the flags, without a jump.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ksum is a sum compensated for rounding: c gathers the exact rounding
// error of every addition (Knuth's two-sum, which Neumaier's sum computes
// with a branch), so a running sum that takes away values of very
// different sizes keeps the small ones.
type ksum struct{ s, c float64 }

func (k *ksum) add(v float64) {
	s := k.s + v
	bv := s - k.s
	k.c += (k.s - (s - bv)) + (v - bv)
	k.s = s
}

func (k ksum) value() float64 { return k.s + k.c }

// count adds v to the running sum, or takes it away (sign -1).
func (t *tracker) count(v, sign float64) {
	if v-v != 0 { // an infinity (NaN is never counted)
		t.inf += int(sign)
	} else {
		t.sum.add(sign * v)
	}
	t.ops++
}

// Track makes the ring keep the statistics of its samples in the last span
// (nanoseconds) as they arrive, for Stats; 0 stops it. Changing the span
// goes over the samples held once.
func (r *Ring) Track(span int64) {
	if span <= 0 {
		r.tr = tracker{}
		return
	}
	if r.tr.span == span {
		return
	}
	c := len(r.s)
	r.tr = tracker{span: span}
	t := &r.tr
	newest, ok := r.Newest()
	if !ok {
		t.multiset.vals, t.multiset.seqs = make([]float64, 0, min(c, 256)), make([]uint32, 0, min(c, 256))
		return
	}
	// The samples newer than the cut, numbered from 1 up and sorted once.
	t.cut = newest - span
	for i := r.n - 1; i >= 0 && r.s[wrap(r.head-r.n+i, c)].ts > t.cut; i-- {
		t.tn++
	}
	t.seq = uint32(t.tn)
	es := make([]entry, 0, t.tn)
	for i := 0; i < t.tn; i++ {
		if v := r.s[wrap(r.head-t.tn+i, c)].v; v == v {
			es = append(es, entry{v: v, seq: uint32(i + 1)})
			t.count(v, 1)
		}
	}
	slices.SortFunc(es, func(a, b entry) int { return cmp.Compare(a.v, b.v) })
	n := min(c, max(len(es), 256))
	t.multiset.vals, t.multiset.seqs = make([]float64, len(es), n), make([]uint32, len(es), n)
	for i, e := range es {
		t.multiset.vals[i], t.multiset.seqs[i] = e.v, e.seq
	}
}

// Tracked says whether the ring keeps its window statistics up to date.
func (r *Ring) Tracked() bool { return r.tr.span != 0 }

// makeRoom merges the held-back updates when there is no room for one
// more.
func (r *Ring) makeRoom() {
	if t := &r.tr; t.pn == pendingMax || t.multiset.nd == pendingMax {
		r.merge()
	}
}

// resumEvery is how many times the ring's capacity in updates the running
// sum goes before it is added up again from the values: each addition's
// rounding error is kept, so it drifts by far less than the average's
// stated error over that many; the sum costs a sample 1/resumEvery of an
// addition.
const resumEvery = 16

// merge merges the newest pn samples into the multiset and takes out those
// that left the window and, once enough updates could have made the running
// sum drift, adds it up again from the merged values.
func (r *Ring) merge() {
	t := &r.tr
	var add [pendingMax]entry
	na, c := 0, len(r.s)
	for i := 0; i < t.pn; i++ {
		if v := r.s[wrap(r.head-1-i, c)].v; v == v {
			add[na] = entry{v: v, seq: t.seq - uint32(i)}
			na++
		}
	}
	t.multiset.merge(add[:na], t.drop)
	t.pn = 0
	if t.ops < resumEvery*len(r.s) {
		return
	}
	t.ops, t.sum = 0, ksum{}
	for _, v := range t.multiset.vals {
		if !math.IsInf(v, 0) {
			t.sum.add(v)
		}
	}
}

// pendingValues copies the values of the newest pn samples that are
// numbers into add and returns how many.
func (r *Ring) pendingValues(add *[pendingMax]float64) int {
	na, c := 0, len(r.s)
	for i := 1; i <= r.tr.pn; i++ {
		if v := r.s[wrap(r.head-i, c)].v; v == v {
			add[na] = v
			na++
		}
	}
	return na
}

// leave takes the oldest tracked sample, of value v, out of the window.
func (r *Ring) leave(v float64) {
	t := &r.tr
	if v == v {
		if t.tn > t.pn {
			// It is in the multiset, and a merge here keeps it there: the merge
			// takes out only the samples that left before it, and adds the
			// sum up again, so it comes first.
			r.makeRoom()
			t.multiset.left(v)
		}
		t.count(v, -1)
	}
	t.drop = t.seq - uint32(t.tn-1)
	if t.tn == t.pn {
		t.pn--
	}
	t.tn--
}

// trackReplace is Push's replacement of the newest sample's value old by
// v, at the same time.
func (r *Ring) trackReplace(old, v float64) {
	t := &r.tr
	if old == old {
		if t.pn == 0 {
			// Rare (a source handing over a sample twice): taken out now.
			t.multiset.removeSeq(old, t.seq)
		}
		t.count(old, -1)
	}
	// The newest sample is pending from now on, with its new value.
	t.pn = max(t.pn, 1)
	if v == v {
		t.count(v, 1)
	}
}

// pushTracked is Push of a new sample into a tracked ring, in one
// function: it runs for every sample of a field with window statistics.
// The sample the push overwrites leaves the window first if it is in it;
// the new one is held back, and the samples that the new one's time puts
// out of the window leave, oldest first (in the steady state, one).
func (r *Ring) pushTracked(ts int64, v float64) {
	t, c := &r.tr, len(r.s)
	if r.n == c && t.tn == c {
		r.leave(r.s[r.head].v)
	}
	if t.pn == pendingMax || t.multiset.nd == pendingMax {
		r.merge()
	}
	r.s[r.head] = sample{ts: ts, v: v}
	r.head = wrap(r.head+1, c)
	r.n = min(r.n+1, c)
	t.tn++
	t.pn++
	t.seq++
	if v == v {
		t.count(v, 1)
	}
	r.expire(ts - t.span)
}

// expire drops the tracked samples not newer than cut, oldest first.
func (r *Ring) expire(cut int64) {
	t, c := &r.tr, len(r.s)
	t.cut = cut
	for t.tn > 0 {
		j := wrap(r.head-t.tn, c)
		if r.s[j].ts > cut {
			return
		}
		r.leave(r.s[j].v)
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
	t := &r.tr
	if t.span == 0 || t.inf > 0 {
		return r.Compute(since, scratch)
	}
	c := len(r.s)
	// The oldest tracked samples may be older than since: they are left out
	// by correcting the ranks, as long as there are few of them.
	var out [maxExcluded]float64
	nout, skip := 0, 0
	for ; skip < t.tn; skip++ {
		j := wrap(r.head-t.tn+skip, c)
		if r.s[j].ts > since {
			break
		}
		if skip == maxExcluded {
			return r.Compute(max(since, t.cut), scratch)
		}
		if v := r.s[j].v; v == v {
			out[nout] = v
			nout++
		}
	}
	var add [pendingMax]float64
	na := r.pendingValues(&add)
	var v multisetView
	if !t.multiset.view(add[:na], out[:nout], &v) {
		return r.Compute(max(since, t.cut), scratch)
	}
	var st Stats
	n := v.size()
	if n <= 0 {
		return st, scratch[:0]
	}
	sum := t.sum
	for _, x := range out[:nout] {
		sum.add(-x)
	}
	st.Count = n
	st.Min, st.Max = v.rank(0), v.rank(n-1)
	st.Avg = sum.value() / float64(n)
	for i, q := range quantiles {
		st.q[i] = v.quantile(q)
	}
	st.Oldest, st.Newest = r.numberTimes(t.tn - skip)
	return st, scratch[:0]
}

// numberTimes returns the times of the oldest and the newest sample that is
// a number among the newest n the ring holds.
func (r *Ring) numberTimes(n int) (oldest, newest int64) {
	c := len(r.s)
	for i := 0; i < n; i++ {
		if j := (r.head - n + i + c) % c; r.s[j].v == r.s[j].v {
			oldest = r.s[j].ts
			break
		}
	}
	for i := 1; i <= n; i++ {
		if j := (r.head - i + c) % c; r.s[j].v == r.s[j].v {
			newest = r.s[j].ts
			break
		}
	}
	return oldest, newest
}
