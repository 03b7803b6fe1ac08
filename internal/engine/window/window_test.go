package window

import (
	"math"
	"math/rand"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestComputeIsExact(t *testing.T) {
	tests := []struct {
		name                         string
		vals                         []float64
		min, max, avg, p50, p90, p99 float64
	}{
		{"one sample", []float64{3}, 3, 3, 3, 3, 3, 3},
		{"two samples interpolate", []float64{0, 10}, 0, 10, 5, 5, 9, 9.9},
		{"unsorted input", []float64{5, 1, 4, 2, 3}, 1, 5, 3, 3, 4.6, 4.96},
		{"constant", []float64{7, 7, 7, 7}, 7, 7, 7, 7, 7, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRing(16)
			for i, v := range tt.vals {
				r.Push(int64(i+1), v)
			}
			st, _ := r.Compute(0, nil)
			assert.Equal(t, len(tt.vals), st.Count)
			assert.InDelta(t, tt.min, st.Min, 1e-12)
			assert.InDelta(t, tt.max, st.Max, 1e-12)
			assert.InDelta(t, tt.avg, st.Avg, 1e-12)
			assert.InDelta(t, tt.p50, st.Quantile(0.50), 1e-12)
			assert.InDelta(t, tt.p90, st.Quantile(0.90), 1e-12)
			assert.InDelta(t, tt.p99, st.Quantile(0.99), 1e-12)
		})
	}
}

// TestPercentilesOf150Samples checks the window of a 15 s span at 100 ms
// against an independent nearest-rank computation: the interpolated value
// lies between the two ranks around q*(n-1).
func TestPercentilesOf150Samples(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	r := NewRing(152)
	var vals []float64
	for i := range 150 {
		v := rng.Float64()
		vals = append(vals, v)
		r.Push(int64(i+1), v)
	}
	st, _ := r.Compute(0, nil)
	sort.Float64s(vals)
	for _, c := range []struct {
		q   float64
		got float64
	}{{0.5, st.Quantile(0.50)}, {0.9, st.Quantile(0.90)}, {0.99, st.Quantile(0.99)}} {
		pos := c.q * 149
		lo, hi := vals[int(pos)], vals[min(int(pos)+1, 149)]
		assert.GreaterOrEqual(t, c.got, lo)
		assert.LessOrEqual(t, c.got, hi)
		want := lo + (pos-float64(int(pos)))*(hi-lo)
		assert.InDelta(t, want, c.got, 1e-12)
	}
}

func TestRingKeepsTheNewestAndTheWindowSlides(t *testing.T) {
	r := NewRing(4)
	for i := 1; i <= 10; i++ {
		r.Push(int64(i), float64(i))
	}
	assert.Equal(t, 4, r.Len())
	st, _ := r.Compute(0, nil)
	assert.Equal(t, 7.0, st.Min)
	assert.Equal(t, 10.0, st.Max)
	st, _ = r.Compute(8, nil)
	assert.Equal(t, 2, st.Count, "only samples newer than since")
	st, _ = r.Compute(10, nil)
	assert.Zero(t, st.Count)
}

func TestPushIgnoresOlderAndReplacesSameTimestamp(t *testing.T) {
	r := NewRing(8)
	r.Push(10, 1)
	r.Push(5, 100)
	r.Push(10, 2)
	st, _ := r.Compute(0, nil)
	assert.Equal(t, 1, st.Count)
	assert.Equal(t, 2.0, st.Max)
}

func TestCopyFromKeepsNewest(t *testing.T) {
	old := NewRing(10)
	for i := 1; i <= 10; i++ {
		old.Push(int64(i), float64(i))
	}
	small := NewRing(3)
	small.CopyFrom(old)
	st, _ := small.Compute(0, nil)
	assert.Equal(t, 3, st.Count)
	assert.Equal(t, 8.0, st.Min)
	big := NewRing(20)
	big.CopyFrom(old)
	st, _ = big.Compute(0, nil)
	assert.Equal(t, 10, st.Count)
}

func TestCapacityIsBounded(t *testing.T) {
	assert.Equal(t, MaxCapacity, NewRing(1<<30).Cap())
	assert.Equal(t, 2, NewRing(0).Cap())
}

func TestComputeReusesScratch(t *testing.T) {
	r := NewRing(150)
	for i := range 150 {
		r.Push(int64(i+1), float64(i))
	}
	scratch := make([]float64, 0, 150)
	allocs := testing.AllocsPerRun(50, func() { _, scratch = r.Compute(0, scratch) })
	require.Zero(t, allocs)
}

func BenchmarkCompute150(b *testing.B) {
	r := NewRing(152)
	rng := rand.New(rand.NewSource(1))
	for i := range 150 {
		r.Push(int64(i+1), rng.Float64())
	}
	var scratch []float64
	b.ReportAllocs()
	for b.Loop() {
		_, scratch = r.Compute(0, scratch)
	}
}

// reference computes the statistics the slow, obvious way: filter, sort,
// interpolate.
func reference(ts []int64, vals []float64, since int64) Stats {
	var in []float64
	var st Stats
	for i, v := range vals {
		if ts[i] <= since || math.IsNaN(v) {
			continue
		}
		if len(in) == 0 {
			st.Oldest = ts[i]
		}
		st.Newest = ts[i]
		in = append(in, v)
	}
	st.Count = len(in)
	if st.Count == 0 {
		return st
	}
	sort.Float64s(in)
	st.Min, st.Max = in[0], in[len(in)-1]
	sum := 0.0
	for _, v := range in {
		sum += v
	}
	st.Avg = sum / float64(len(in))
	q := func(p float64) float64 {
		r := p * float64(len(in)-1)
		lo := int(math.Floor(r))
		if lo+1 >= len(in) {
			return in[len(in)-1]
		}
		return in[lo] + (r-float64(lo))*(in[lo+1]-in[lo])
	}
	st.SetQuantiles(q)
	return st
}

// TestSelectionMatchesASortedReference: the selection that
// replaced a full sort of every window on every scrape gives the same
// statistics as sorting, on random, repeated, sorted and NaN-holed values,
// wrapped rings and windows that start anywhere; and min, max and avg come
// without the percentiles when those are not asked for.
func TestSelectionMatchesASortedReference(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	gens := map[string]func(i int) float64{
		"uniform":    func(int) float64 { return rng.Float64() },
		"few values": func(int) float64 { return float64(rng.Intn(3)) },
		"rising":     func(i int) float64 { return float64(i) },
		"falling":    func(i int) float64 { return -float64(i) },
		"with NaN": func(i int) float64 {
			if i%7 == 0 {
				return math.NaN()
			}
			return rng.NormFloat64()
		},
	}
	for name, gen := range gens {
		t.Run(name, func(t *testing.T) {
			for trial := 0; trial < 200; trial++ {
				capacity := 2 + rng.Intn(300)
				pushed := rng.Intn(2 * capacity)
				r := NewRing(capacity)
				var ts []int64
				var vals []float64
				for i := 0; i < pushed; i++ {
					v := gen(i)
					r.Push(int64(i+1)*10, v)
					ts, vals = append(ts, int64(i+1)*10), append(vals, v)
				}
				if len(ts) > r.Cap() {
					ts, vals = ts[len(ts)-r.Cap():], vals[len(vals)-r.Cap():]
				}
				since := int64(rng.Intn(pushed*10 + 20))
				want := reference(ts, vals, since)
				got, _ := r.Compute(since, nil)
				require.Equal(t, want.Count, got.Count)
				for _, pair := range [][2]float64{{want.Min, got.Min}, {want.Max, got.Max}, {want.Avg, got.Avg},
					{want.Quantile(0.50), got.Quantile(0.50)}, {want.Quantile(0.90), got.Quantile(0.90)}, {want.Quantile(0.99), got.Quantile(0.99)}} {
					require.InDelta(t, pair[0], pair[1], 1e-9, "capacity %d, %d pushed, since %d", capacity, pushed, since)
				}
				require.Equal(t, want.Oldest, got.Oldest)
				require.Equal(t, want.Newest, got.Newest)
				some, _ := r.ComputeSome(since, nil, false)
				require.Equal(t, Stats{Count: want.Count, Min: got.Min, Max: got.Max, Avg: got.Avg, Oldest: got.Oldest, Newest: got.Newest}, some)
			}
		})
	}
}

// The ring sizing that the engine's plan, its window check and the samples
// API share: one sample per interval plus both ends of the window.
func TestSamplesForCoversTheWindowAndSpanOfInvertsIt(t *testing.T) {
	tests := []struct {
		win, iv      time.Duration
		samples, cap int
	}{
		{15 * time.Second, 100 * time.Millisecond, 152, 152},
		{5 * time.Minute, 100 * time.Millisecond, 3002, 3002},
		{time.Second, 300 * time.Millisecond, 5, 5},
		{24 * time.Hour, 100 * time.Millisecond, 864002, MaxCapacity},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.samples, SamplesFor(tt.win, tt.iv), "%s at %s", tt.win, tt.iv)
		assert.Equal(t, tt.cap, CapacityFor(tt.win, tt.iv), "%s at %s", tt.win, tt.iv)
		if tt.samples == tt.cap {
			assert.Equal(t, tt.win.Truncate(tt.iv), SpanOf(tt.samples, tt.iv), "%s at %s", tt.win, tt.iv)
		}
	}
	assert.Equal(t, 409400*time.Millisecond, SpanOf(MaxCapacity, 100*time.Millisecond))
}
