package window

import (
	"math"
	mbig "math/big"
	"math/rand"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// heldSince returns the samples the ring holds newer than since, oldest
// first: what an exact computation of the window reads.
func heldSince(r *Ring, since int64) ([]int64, []float64) {
	return r.AppendSince(since, nil, nil)
}

// requireSameStats compares got with want, the average with the exact
// average of vals (a naive sum of values of very different sizes is itself
// off) within a billionth, or a 1e-28 of the largest value pushed before
// (big: a compensated running sum keeps that much of what it took away).
func requireSameStats(t *testing.T, want, got Stats, vals []float64, big float64, msg string, args ...any) {
	t.Helper()
	where := append([]any{msg}, args...)
	require.Equal(t, want.Count, got.Count, where...)
	for _, pair := range [][2]float64{{want.Min, got.Min}, {want.Max, got.Max}, {want.Quantile(0.50), got.Quantile(0.50)},
		{want.Quantile(0.90), got.Quantile(0.90)}, {want.Quantile(0.99), got.Quantile(0.99)}} {
		if !(math.IsNaN(pair[0]) && math.IsNaN(pair[1])) {
			require.Equal(t, pair[0], pair[1], where...)
		}
	}
	require.Equal(t, want.Oldest, got.Oldest, where...)
	require.Equal(t, want.Newest, got.Newest, where...)
	if want.Count == 0 || math.IsNaN(want.Avg) || math.IsInf(want.Avg, 0) {
		return
	}
	exact := new(mbig.Float).SetPrec(1200)
	for _, v := range vals {
		if v == v {
			exact.Add(exact, new(mbig.Float).SetFloat64(v))
		}
	}
	avg, _ := exact.Quo(exact, mbig.NewFloat(float64(want.Count))).Float64()
	require.InDelta(t, avg, got.Avg, 1e-9*math.Abs(avg)+1e-28*big, where...)
}

// TestTrackedStatsMatchASortedReference: the statistics kept up to date as
// samples arrive equal those of sorting the window at read time (the
// percentiles exactly, the average within rounding), over random,
// repeated, NaN-holed, infinite and monotone values, rings that wrap, spans
// shorter and longer than the ring holds, late, repeated and replaced
// samples, and reads whose clock is a little or a lot past the newest
// sample.
func TestTrackedStatsMatchASortedReference(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	gens := append(finiteValues(rng), []valueGen{
		{"with NaN", func(i int) float64 {
			if i%7 == 0 {
				return math.NaN()
			}
			return rng.NormFloat64()
		}},
		{"with infinities", func(i int) float64 {
			switch i % 41 {
			case 3:
				return math.Inf(1)
			case 9:
				return math.Inf(-1)
			}
			return rng.Float64()
		}},
	}...)
	for _, g := range gens {
		t.Run(g.name, func(t *testing.T) {
			for trial := 0; trial < 12; trial++ {
				capacity := 2 + rng.Intn(300)
				span := int64(10 * (1 + rng.Intn(2*capacity)))
				r := NewRing(capacity)
				trackAt := rng.Intn(capacity) // Track on a ring that holds samples already
				ts, largest := int64(0), 0.0
				push := func(ts int64, v float64) {
					if !math.IsInf(v, 0) && v == v {
						largest = math.Max(largest, math.Abs(v))
					}
					r.Push(ts, v)
				}
				for i := 0; i < 3*capacity; i++ {
					if i == trackAt {
						r.Track(span)
					}
					switch rng.Intn(20) {
					case 0: // a late sample is dropped
						push(ts-5, g.gen(i))
						continue
					case 1: // a sample at the same time replaces the last
						push(ts, g.gen(i))
						continue
					}
					ts += int64(10 * (1 + rng.Intn(3)))
					push(ts, g.gen(i))
					// A read at the newest sample, one a few samples on, and
					// one from a series that stopped.
					for _, lag := range []int64{0, 10 + rng.Int63n(40), 10 * int64(maxExcluded+rng.Intn(capacity))} {
						since := ts + lag - span
						got, _ := r.Stats(since, nil)
						want, _ := r.Compute(since, nil)
						_, vals := heldSince(r, since)
						requireSameStats(t, want, got, vals, largest, "capacity %d span %d step %d lag %d", capacity, span, i, lag)
					}
				}
			}
		})
	}
}

func TestTrackStopsAndChangesSpan(t *testing.T) {
	tests := []struct {
		name  string
		spans []int64
		count int
	}{
		{"a span shorter than the ring", []int64{50}, 5},
		{"a longer span after a shorter one reads what the ring holds", []int64{50, 200}, 10},
		{"a shorter span after a longer one", []int64{200, 30}, 3},
		{"stopped", []int64{50, 0}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRing(32)
			for i := 1; i <= 10; i++ {
				r.Push(int64(i*10), float64(i))
			}
			for _, s := range tt.spans {
				r.Track(s)
			}
			require.Equal(t, tt.spans[len(tt.spans)-1] != 0, r.Tracked())
			since := int64(100) - tt.spans[0]
			if last := tt.spans[len(tt.spans)-1]; last != 0 {
				since = 100 - last
			}
			st, _ := r.Stats(since, nil)
			require.Equal(t, tt.count, st.Count)
			require.Equal(t, 10.0, st.Max)
		})
	}
}

func TestTrackedStatsDoNotAllocate(t *testing.T) {
	r := NewRing(MaxCapacity)
	r.Track(int64(MaxCapacity-2) * 10)
	for i := range 3 * MaxCapacity {
		r.Push(int64(i+1)*10, float64(i%97))
	}
	scratch := make([]float64, 0, maxExcluded)
	allocs := testing.AllocsPerRun(50, func() { _, scratch = r.Stats(int64(3*MaxCapacity)*10-int64(MaxCapacity-2)*10+5, scratch) })
	require.Zero(t, allocs)
}

// BenchmarkStats reads the statistics of a full ring kept up to date, and
// BenchmarkCompute computes them from the samples: side by side they show
// the read's cost does not grow with the window while computing does.
func BenchmarkStats(b *testing.B) {
	for _, n := range []int{150, MaxCapacity} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			r := fullRing(n, true)
			var scratch []float64
			since := int64(n+1)*10 - int64(n)*10 + 5
			for b.Loop() {
				_, scratch = r.Stats(since, scratch)
			}
		})
	}
}

func BenchmarkCompute(b *testing.B) {
	for _, n := range []int{150, MaxCapacity} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			r := fullRing(n, false)
			var scratch []float64
			since := int64(n+1)*10 - int64(n)*10 + 5
			for b.Loop() {
				_, scratch = r.Compute(since, scratch)
			}
		})
	}
}

// BenchmarkPush is the ingest cost of one sample into a full ring, with and
// without the window statistics kept up to date.
func BenchmarkPush(b *testing.B) {
	for _, n := range []int{150, MaxCapacity} {
		for _, tracked := range []bool{false, true} {
			name := strconv.Itoa(n) + "/untracked"
			if tracked {
				name = strconv.Itoa(n) + "/tracked"
			}
			b.Run(name, func(b *testing.B) {
				r := fullRing(n, tracked)
				rng := rand.New(rand.NewSource(3))
				ts := int64(10 * (n + 1))
				for b.Loop() {
					ts += 10
					r.Push(ts, rng.Float64())
				}
			})
		}
	}
}

// fullRing is a ring sized as the engine sizes one for a window of n
// samples (two more), with the window full.
func fullRing(n int, tracked bool) *Ring {
	r := NewRing(n + 2)
	if tracked {
		r.Track(int64(n) * 10)
	}
	rng := rand.New(rand.NewSource(1))
	for i := range n + 3 {
		r.Push(int64(i+1)*10, rng.Float64())
	}
	return r
}

// BenchmarkPushRings pushes one sample into each of a thousand full rings
// in turn, as a node's sampling does: unlike BenchmarkPush, whose one ring
// stays in the CPU's caches, every push here finds its ring out of them.
// An op is one sample.
func BenchmarkPushRings(b *testing.B) {
	const rings = 1000
	for _, tracked := range []bool{false, true} {
		name := "untracked"
		if tracked {
			name = "tracked"
		}
		b.Run(name, func(b *testing.B) {
			rs := make([]*Ring, rings)
			for i := range rs {
				rs[i] = fullRing(150, tracked)
			}
			rng := rand.New(rand.NewSource(3))
			vals := make([]float64, 4096)
			for i := range vals {
				vals[i] = rng.Float64()
			}
			ts, i := int64(10*151), 0
			for b.Loop() {
				if i%rings == 0 {
					ts += 10
				}
				rs[i%rings].Push(ts, vals[i%len(vals)])
				i++
			}
		})
	}
}

// TestTrackedEdgesOfTheHeldBackSamples: the statistics equal sorting the
// window where the samples held back before a merge meet the rest: a gap
// that empties the window while samples are held back, a sample replaced at
// the same time after a merge took it in, a span changed while samples are
// held back, and held-back samples that are all NaN.
func TestTrackedEdgesOfTheHeldBackSamples(t *testing.T) {
	nan := math.NaN()
	// The span holds 40 samples at one every 10: past pendingMax, so that
	// merges run while samples leave.
	const span, p = 400, pendingMax
	tests := []struct {
		name string
		// pushes are (time, value) pairs, in order.
		pushes [][2]float64
		span   int64 // a second Track after the pushes when not 0
	}{
		// p+1 pushes merge the first p; the window then holds p+9.
		{"gap empties a window with samples held back", append(seq(1, p+9, 1), [2]float64{1000, 7}), 0},
		// The 2p-th push fills the held-back samples, and the sample that
		// leaves with it (merged) merges them all.
		{"replaced after a merge took it in", append(seq(1, 2*p, 1), [2]float64{2 * p, -5}), 0},
		{"replaced while held back", append(seq(1, 2*p+1, 1), [2]float64{2*p + 1, 99}), 0},
		{"span shortened with samples held back", seq(1, p+13, 1), 50},
		{"span lengthened with samples held back", seq(1, p+13, 1), 800},
		{"held back samples all NaN", append(seq(1, 2*p, 1), [2]float64{2*p + 1, nan}, [2]float64{2*p + 2, nan}, [2]float64{2*p + 3, nan}), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRing(4 * p)
			r.Track(span)
			for _, p := range tt.pushes {
				r.Push(int64(p[0])*10, p[1])
			}
			if tt.span != 0 {
				r.Track(tt.span)
			}
			newest, _ := r.Newest()
			for _, since := range []int64{newest - r.tr.span, newest - r.tr.span + 25} {
				got, _ := r.Stats(since, nil)
				want, _ := r.Compute(since, nil)
				_, vals := heldSince(r, since)
				requireSameStats(t, want, got, vals, 1000, "since %d", since)
			}
		})
	}
}

// seq is the pushes (i, i*i mod 17) for i from..to by step.
func seq(from, to, step int) [][2]float64 {
	var out [][2]float64
	for i := from; i <= to; i += step {
		out = append(out, [2]float64{float64(i), float64(i * i % 17)})
	}
	return out
}

// TestTrackedAverageOverALongRun: after hundreds of thousands of samples
// of every size, added and taken away, the running sum still gives the
// average within its stated error.
func TestTrackedAverageOverALongRun(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	r := NewRing(152)
	r.Track(150 * 10)
	largest := 0.0
	for i := 1; i <= 300000; i++ {
		v := rng.NormFloat64() * math.Pow(10, float64(rng.Intn(24)-12))
		largest = math.Max(largest, math.Abs(v))
		r.Push(int64(i)*10, v)
		if i%50000 == 0 {
			since := int64(i)*10 - 150*10
			got, _ := r.Stats(since, nil)
			want, _ := r.Compute(since, nil)
			_, vals := heldSince(r, since)
			requireSameStats(t, want, got, vals, largest, "after %d samples", i)
		}
	}
}

// valueGen makes the i-th value of a test sequence.
type valueGen struct {
	name string
	gen  func(i int) float64
}

// finiteValues are the sequences every statistic is checked on: random,
// repeated, monotone and of mixed magnitudes.
func finiteValues(rng *rand.Rand) []valueGen {
	return []valueGen{
		{"uniform", func(int) float64 { return rng.Float64() }},
		{"few values", func(int) float64 { return float64(rng.Intn(3)) }},
		{"rising", func(i int) float64 { return float64(i) }},
		{"falling", func(i int) float64 { return -float64(i) }},
		{"large and small", func(int) float64 { return rng.NormFloat64() * math.Pow(10, float64(rng.Intn(24)-12)) }},
	}
}
