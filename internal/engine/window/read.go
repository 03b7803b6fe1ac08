package window

// AppendSince appends the samples with timestamps after since, oldest
// first, to ts and vals, and returns them grown; a caller that keeps them
// copies without allocating.
func (r *Ring) AppendSince(since int64, ts []int64, vals []float64) ([]int64, []float64) {
	for i := 0; i < r.n; i++ {
		j := (r.head - r.n + i + 2*len(r.s)) % len(r.s)
		if r.s[j].ts <= since {
			continue
		}
		ts = append(ts, r.s[j].ts)
		vals = append(vals, r.s[j].v)
	}
	return ts, vals
}

// Oldest returns the timestamp of the oldest sample held, and false when
// the ring is empty.
func (r *Ring) Oldest() (int64, bool) {
	if r.n == 0 {
		return 0, false
	}
	return r.s[(r.head-r.n+len(r.s))%len(r.s)].ts, true
}
