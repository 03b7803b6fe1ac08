package nativehist

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
)

// reference observes vals with client_golang's native histogram of the
// same schema and zero threshold, and no bound on its buckets.
func reference(t *testing.T, l Layout, vals []float64) *dto.Histogram {
	t.Helper()
	thr := l.ZeroThreshold
	if thr == 0 {
		thr = prometheus.NativeHistogramZeroThresholdZero
	}
	h := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "ref", Help: "ref",
		// A factor a little above 2^(2^-schema) picks that schema.
		NativeHistogramBucketFactor:    math.Exp2(math.Exp2(-float64(l.Schema))) * 1.0001,
		NativeHistogramZeroThreshold:   thr,
		NativeHistogramMaxBucketNumber: 0,
	})
	for _, v := range vals {
		h.Observe(v)
	}
	var m dto.Metric
	require.NoError(t, h.Write(&m))
	m.Histogram.CreatedTimestamp = nil
	return m.Histogram
}

func written(h *Histogram) *dto.Histogram {
	var m dto.Metric
	h.Write(&m)
	return m.Histogram
}

// TestMatchesClientGolang: the buckets, spans, deltas, zero bucket, count
// and sum equal those of client_golang's native histogram on the same
// samples, for the layouts gpuscope uses and values of every sign and size.
func TestMatchesClientGolang(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	gens := []struct {
		name string
		gen  func() float64
	}{
		{"ratios", func() float64 { return rng.Float64() }},
		{"ratios with idle zeros", func() float64 {
			if rng.IntN(4) == 0 {
				return 0
			}
			return rng.Float64()
		}},
		{"percent", func() float64 { return math.Round(rng.Float64() * 100) }},
		{"watts", func() float64 { return 60 + rng.Float64()*640 }},
		{"bytes per second", func() float64 { return math.Exp2(10 + rng.Float64()*26) }},
		{"signed", func() float64 { return rng.NormFloat64() * 10 }},
		{"powers of two on bucket bounds", func() float64 { return math.Exp2(float64(rng.IntN(20) - 10)) }},
	}
	layouts := []Layout{{Schema: 3, ZeroThreshold: 1e-3}, {Schema: 4}, {Schema: 2}, {Schema: 0}, {Schema: -2, ZeroThreshold: 0.5}}
	for _, g := range gens {
		for _, l := range layouts {
			t.Run(g.name, func(t *testing.T) {
				vals := make([]float64, 2000)
				for i := range vals {
					vals[i] = g.gen()
				}
				h := New(l)
				for _, v := range vals {
					h.Observe(v)
				}
				// Values over more than MaxBuckets buckets lowered the
				// schema; client_golang counts at the lowered one from the
				// start.
				want := reference(t, Layout{Schema: h.Schema(), ZeroThreshold: l.ZeroThreshold}, vals)
				require.True(t, proto.Equal(want, written(h)), "schema %d\nwant %v\ngot  %v", l.Schema, want, written(h))
			})
		}
	}
}

// TestBoundedByLoweringTheSchema: values spread over more than MaxBuckets
// buckets lower the resolution until they fit, and the result is the
// histogram the lower schema would have counted from the start.
func TestBoundedByLoweringTheSchema(t *testing.T) {
	tests := []struct {
		name       string
		from, span float64 // log2 of the smallest value and of the range
		schema     int32
	}{
		{"fits", 0, 10, 3},
		{"one halving", 0, 30, 2},
		{"several", -40, 80, 1},
		{"every float64", -1000, 2000, minSchema},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 1))
			h := New(Layout{Schema: 3})
			var vals []float64
			for range 5000 {
				v := math.Exp2(tt.from + rng.Float64()*tt.span)
				if rng.IntN(2) == 0 {
					v = -v
				}
				vals = append(vals, v)
				h.Observe(v)
			}
			require.Equal(t, tt.schema, h.Schema())
			require.LessOrEqual(t, len(h.pos.counts), MaxBuckets)
			require.LessOrEqual(t, len(h.neg.counts), MaxBuckets)
			direct := New(Layout{Schema: h.Schema()})
			for _, v := range vals {
				direct.Observe(v)
			}
			require.True(t, proto.Equal(written(direct), written(h)))
		})
	}
}

func TestNaNIsNotCounted(t *testing.T) {
	h := New(Layout{Schema: 3})
	h.Observe(math.NaN())
	h.Observe(0.5)
	require.Equal(t, uint64(1), h.Count())
	require.Equal(t, 0.5, written(h).GetSampleSum())
}

func TestEmptyIsStillNative(t *testing.T) {
	got := written(New(Layout{Schema: 3}))
	require.Len(t, got.PositiveSpan, 1, "an empty span marks the histogram native")
	require.Zero(t, got.GetSampleCount())
}

func BenchmarkObserve(b *testing.B) {
	h := New(Layout{Schema: 3, ZeroThreshold: 1e-3})
	rng := rand.New(rand.NewPCG(1, 2))
	vals := make([]float64, 1024)
	for i := range vals {
		vals[i] = rng.Float64()
	}
	i := 0
	for b.Loop() {
		h.Observe(vals[i&1023])
		i++
	}
}

// TestIndexMatchesFrexp: the bucket index read from the tables equals the
// one math.Frexp and a bisection of the bounds give, for every schema, on
// random values of every size and on each bound and its neighbours.
func TestIndexMatchesFrexp(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for s := int32(1); s <= 8; s++ {
		t.Run("schema "+strconv.Itoa(int(s)), func(t *testing.T) {
			var vals []float64
			for range 20000 {
				vals = append(vals, math.Exp2(rng.Float64()*200-100))
			}
			for e := -3; e <= 3; e++ {
				for _, b := range bounds[s] {
					x := math.Ldexp(b, e)
					vals = append(vals, x, math.Nextafter(x, 0), math.Nextafter(x, 2*x))
				}
			}
			vals = append(vals, math.SmallestNonzeroFloat64, math.MaxFloat64, math.Inf(1), 1, 0.5, 2)
			for _, v := range vals {
				require.Equal(t, indexFrexp(v, s), index(v, s), "value %g", v)
			}
		})
	}
}

// TestInfLandsInTheWrongBucket places one value of every float class
// (normal, subnormal, signed zero, the largest finite values, infinities,
// NaN, bucket bounds and their neighbours) in a histogram of every schema
// and zero threshold, and compares its bucket with client_golang's: an
// infinity goes one bucket past the largest finite value's, as there, and
// not into bucket 0 (where math.Frexp's (Inf, 0) put it). NaN is in no
// bucket in either; client_golang counts it in the count and the sum, this
// histogram not at all (Observe says why).
func TestInfLandsInTheWrongBucket(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	classes := map[string][]float64{
		"normal":    {rng.Float64(), 1 + rng.Float64()*1e6, math.Exp2(rng.Float64()*2000 - 1000), math.SmallestNonzeroFloat64 * (1 << 52)},
		"subnormal": {math.SmallestNonzeroFloat64, math.SmallestNonzeroFloat64 * float64(1+rng.IntN(1<<51)), math.Nextafter(0x1p-1022, 0)},
		"zero":      {0, math.Copysign(0, -1)},
		"largest":   {math.MaxFloat64, math.Nextafter(math.MaxFloat64, 0)},
		"infinite":  {math.Inf(1)},
		"NaN":       {math.NaN(), math.Float64frombits(0x7ff8000000000001)},
	}
	// Every bound of schema 8 (those of the coarser schemas among them) and
	// its neighbours, every eighth in another binade too, and the powers of
	// two the schemas of at most 0 have theirs at.
	for i, b := range bounds[8] {
		for _, e := range []int{0, -40} {
			if e != 0 && i%8 != 0 {
				continue
			}
			x := math.Ldexp(b, e)
			classes["bounds"] = append(classes["bounds"], x, math.Nextafter(x, 0), math.Nextafter(x, math.Inf(1)))
		}
	}
	for e := -20; e <= 20; e++ {
		x := math.Exp2(float64(e))
		classes["bounds"] = append(classes["bounds"], x, math.Nextafter(x, 0), math.Nextafter(x, math.Inf(1)))
	}
	for name, vals := range classes {
		for _, v := range vals {
			for _, sign := range []float64{1, -1} {
				for s := int32(minSchema); s <= 8; s++ {
					thresholds := []float64{0, 0x1p-128, 1e-3}
					if name == "bounds" {
						// Far above the threshold: the zero bucket is the
						// other classes' concern.
						thresholds = thresholds[:1]
					}
					for _, thr := range thresholds {
						l := Layout{Schema: s, ZeroThreshold: thr}
						h := New(l)
						h.Observe(sign * v)
						got, want := written(h), reference(t, l, []float64{sign * v})
						if v != v {
							require.Zero(t, got.GetSampleCount(), "NaN is not counted")
							want.SampleCount, want.SampleSum = got.SampleCount, got.SampleSum
						}
						// An empty span only marks the histogram native,
						// which client_golang leaves out where the zero
						// bucket's threshold or count already says so.
						for _, hist := range []*dto.Histogram{got, want} {
							if len(hist.PositiveSpan) == 1 && hist.PositiveSpan[0].GetLength() == 0 {
								hist.PositiveSpan = nil
							}
						}
						require.True(t, proto.Equal(want, got), "%s %g at schema %d, zero threshold %g\nwant %v\ngot  %v",
							name, sign*v, s, thr, want, got)
					}
				}
			}
		}
	}
}
