package window

// pendingMax is how many samples a window holds back before merging them
// into its sorted values, and how many departures. A merge is a sequential
// pass over the values, so a sample costs 1/pendingMax of a pass instead of
// two binary searches and a move in an array that, with a thousand windows
// sampled in turn, is never in the CPU's caches; a read combines the
// held-back samples with the sorted values at a cost that depends on
// pendingMax, not on the window.
const pendingMax = 32

// multiset holds a window's values (no NaN) in ascending order,
// each with the push number (seq) of its sample, so that the samples that
// left the window are taken out by one pass that keeps the newer ones. The
// samples held back are its caller's (the newest of the ring), handed to
// merge and view.
type multiset struct {
	// nd is how many values del holds; every push reads it, so it comes
	// first, beside the tracker's other fields.
	nd int
	// vals are the merged values, ascending; seqs[i] is the push number of
	// the sample of vals[i].
	vals []float64
	seqs []uint32
	// del are the values of the merged samples that left the window since
	// the last merge, for reads until the next one takes them out.
	del [pendingMax]float64
}

// entry is a sample held back: its value and push number.
type entry struct {
	v   float64
	seq uint32
}

// newer says whether push number a comes after b. Push numbers wrap; the
// samples compared are at most a ring apart.
func newer(a, b uint32) bool { return int32(a-b) > 0 }

// left records the value of a merged sample that left the window; the
// caller merges first when nd is pendingMax.
func (b *multiset) left(v float64) {
	b.del[b.nd] = v
	b.nd++
}

// merge takes out the samples not newer than drop, which left the window,
// and puts in add (reordered).
func (b *multiset) merge(add []entry, drop uint32) {
	if b.nd > 0 {
		b.keepNewer(drop)
		b.nd = 0
	}
	if len(add) > 0 {
		sortEntries(add)
		b.insert(add)
	}
}

// keepNewer keeps the values whose samples are newer than drop, in order,
// in one pass that writes every value back, without a branch on which go.
func (b *multiset) keepNewer(drop uint32) {
	vals := b.vals
	seqs := b.seqs[:len(vals)]
	w := 0
	for r, s := range seqs {
		vals[w], seqs[w] = vals[r], s
		w += b2i(newer(s, drop))
	}
	b.vals, b.seqs = vals[:w], seqs[:w]
}

// sortEntries sorts a few entries by value, by insertion.
func sortEntries(a []entry) {
	for i := 1; i < len(a); i++ {
		x := a[i]
		j := i
		for ; j > 0 && a[j-1].v > x.v; j-- {
			a[j] = a[j-1]
		}
		a[j] = x
	}
}

// insert puts add (ascending) into the values, from the top down: the
// run of values above each value of add moves up once, by one copy, so only
// the values above add's smallest move. The arrays grow to twice their
// capacity at most, when they must.
func (b *multiset) insert(add []entry) {
	n := len(b.vals)
	if cap(b.vals) < n+len(add) || cap(b.seqs) < n+len(add) {
		c := max(2*cap(b.vals), n+len(add))
		vals, seqs := make([]float64, n, c), make([]uint32, n, c)
		copy(vals, b.vals)
		copy(seqs, b.seqs[:n])
		b.vals, b.seqs = vals, seqs
	}
	vals, seqs := b.vals[:n+len(add)], b.seqs[:n+len(add)]
	// vals[:i] are still in place; the values of add[:j+1] go below the
	// ones moved.
	i := n
	for j := len(add) - 1; j >= 0; j-- {
		x := add[j]
		below := vals[:i]
		for len(below) > 0 && below[len(below)-1] > x.v {
			below = below[:len(below)-1]
		}
		k := len(below)
		if k < i {
			copy(vals[k+j+1:], vals[k:i])
			copy(seqs[k+j+1:], seqs[k:i])
		}
		vals[k+j], seqs[k+j] = x.v, x.seq
		i = k
	}
	b.vals, b.seqs = vals, seqs
}

// removeSeq takes out at once the value v of sample seq, if merged.
func (b *multiset) removeSeq(v float64, seq uint32) {
	for i := lowerBound(b.vals, v); i < len(b.vals) && b.vals[i] == v; i++ {
		if b.seqs[i] == seq {
			b.vals = append(b.vals[:i], b.vals[i+1:]...)
			b.seqs = append(b.seqs[:i], b.seqs[i+1:]...)
			return
		}
	}
}

// maxLeftOut bounds the values a read takes out of a multiset: those of the
// samples that left it since the last merge, and those the read leaves out
// itself.
const maxLeftOut = pendingMax + maxExcluded

// multisetView reads the multiset's values less some, plus the samples held back,
// in rank order, without changing the multiset: the sorted values with some
// positions skipped, merged with the held-back values. A read costs what
// pendingMax and maxExcluded allow, whatever the number of values.
type multisetView struct {
	vals []float64
	// pos are the positions of vals left out, ascending.
	pos  [maxLeftOut]int
	npos int
	// add are the held-back values left in, ascending.
	add  [pendingMax]float64
	nadd int
}

// view reads b plus the held-back values add (at most pendingMax) less
// the values of out (which b or add holds; at most maxExcluded). False when
// b does not hold them all: its state is not what its caller kept, and the
// caller reads the samples instead.
func (b *multiset) view(add, out []float64, v *multisetView) bool {
	v.vals = b.vals
	v.nadd = copy(v.add[:], add)
	var del [maxLeftOut]float64
	nd := copy(del[:], b.del[:b.nd])
	nd += copy(del[nd:], out)
	insertionSort(v.add[:v.nadd])
	insertionSort(del[:nd])
	in, gone := cancel(v.add[:v.nadd], del[:nd])
	v.nadd, v.npos = len(in), len(gone)
	for i, x := range gone {
		p := lowerBound(b.vals, x)
		if i > 0 && gone[i-1] == x {
			p = v.pos[i-1] + 1
		}
		if p >= len(b.vals) || b.vals[p] != x {
			return false
		}
		v.pos[i] = p
	}
	return true
}

// cancel takes out of two ascending lists the values they share (each
// common copy once from both) and returns what is left of each, in place:
// a value held back that a read leaves out again.
func cancel(a, d []float64) ([]float64, []float64) {
	i, j, na, nd := 0, 0, 0, 0
	for i < len(a) && j < len(d) {
		switch {
		case a[i] < d[j]:
			a[na] = a[i]
			na, i = na+1, i+1
		case d[j] < a[i]:
			d[nd] = d[j]
			nd, j = nd+1, j+1
		default:
			i, j = i+1, j+1
		}
	}
	na += copy(a[na:], a[i:])
	nd += copy(d[nd:], d[j:])
	return a[:na], d[:nd]
}

// size is the number of values the view reads.
func (v *multisetView) size() int { return len(v.vals) - v.npos + v.nadd }

// sorted is the value of rank k of the sorted values left in.
func (v *multisetView) sorted(k int) float64 {
	for _, p := range v.pos[:v.npos] {
		if p > k {
			break
		}
		k++
	}
	return v.vals[k]
}

// rank is the value of rank k (from 0) of the values the view reads. Of
// the first k+1 values of the merge, x come from the held-back values and
// the rest from the sorted ones: x is the largest count for which the x-th
// held-back value is at most the next sorted value, found by bisection.
func (v *multisetView) rank(k int) float64 {
	if v.nadd == 0 {
		return v.sorted(k)
	}
	m := len(v.vals) - v.npos
	// take says whether the first k+1 values can hold x held-back ones.
	take := func(x int) bool {
		y := k + 1 - x
		return x == 0 || y == m || v.add[x-1] <= v.sorted(y)
	}
	lo, hi := max(0, k+1-m), min(v.nadd, k+1)
	for lo < hi {
		mid := int(uint(lo+hi+1) >> 1)
		if take(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	x, y := lo, k+1-lo
	switch {
	case x == 0:
		return v.sorted(y - 1)
	case y == 0:
		return v.add[x-1]
	}
	return max(v.add[x-1], v.sorted(y-1))
}

// quantile is the q quantile of the view's values (interpolate).
func (v *multisetView) quantile(q float64) float64 { return interpolate(v.size(), q, v.rank) }
