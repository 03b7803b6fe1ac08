// Package nativehist keeps a Prometheus native histogram (sparse exponential
// buckets) of every sample of a series, bounded in buckets, and writes it as
// client_model's protobuf type.
package nativehist

import (
	"math"

	dto "github.com/prometheus/client_model/go"
)

// MaxBuckets bounds the buckets of one sign: past it the histogram halves
// its resolution (lowers the schema by one), as client_golang's do, so a
// series costs at most 2 x 8 x MaxBuckets bytes of counts whatever it sees.
const MaxBuckets = 160

// minSchema is the coarsest resolution a histogram falls back to: a factor
// of 2^16 a bucket covers every float64 in 64 buckets.
const minSchema = -4

// Layout is the bucket layout of a unit: the schema (each bucket's upper
// bound is 2^(2^-Schema) times its lower one) and the zero bucket's
// threshold (values of at most this size count as zero).
type Layout struct {
	Schema        int32
	ZeroThreshold float64
}

// Histogram counts the samples of one series since it was made. It is not
// safe for concurrent use; the engine guards it.
type Histogram struct {
	schema   int32
	zeroThr  float64
	count    uint64
	zero     uint64
	sum      float64
	pos, neg buckets
}

// buckets are the counts of consecutive bucket indexes from offset.
type buckets struct {
	offset int32
	counts []uint64
}

// New returns an empty histogram with layout l; a schema outside
// Prometheus' range [-4, 8] is clamped to it.
func New(l Layout) *Histogram {
	s := min(max(l.Schema, minSchema), 8)
	return &Histogram{schema: s, zeroThr: max(l.ZeroThreshold, 0)}
}

// Schema is the histogram's resolution now.
func (h *Histogram) Schema() int32 { return h.schema }

// Count is the number of samples observed.
func (h *Histogram) Count() uint64 { return h.count }

// Observe counts v. NaN is a sample DCGM could not read, not a value, and
// is not counted.
func (h *Histogram) Observe(v float64) {
	if v != v {
		return
	}
	h.count++
	h.sum += v
	a := math.Abs(v)
	if a <= h.zeroThr {
		h.zero++
		return
	}
	b := &h.pos
	if v < 0 {
		b = &h.neg
	}
	k := index(a, h.schema)
	for !b.fits(k) && h.schema > minSchema {
		h.reduce()
		k = index(a, h.schema)
	}
	b.inc(k)
}

// reduce halves the resolution: bucket k of schema s and its neighbour are
// bucket ceil(k/2) of schema s-1.
func (h *Histogram) reduce() {
	h.schema--
	h.pos.halve()
	h.neg.halve()
}

func (b *buckets) fits(k int32) bool {
	if len(b.counts) == 0 {
		return true
	}
	lo, hi := min(b.offset, k), max(b.offset+int32(len(b.counts))-1, k)
	return hi-lo < MaxBuckets
}

func (b *buckets) inc(k int32) {
	switch {
	case len(b.counts) == 0:
		b.offset = k
		b.counts = append(b.counts, 0)
	case k < b.offset:
		grow := int(b.offset - k)
		b.counts = append(make([]uint64, grow, grow+len(b.counts)), b.counts...)
		b.offset = k
	case int(k-b.offset) >= len(b.counts):
		b.counts = append(b.counts, make([]uint64, int(k-b.offset)+1-len(b.counts))...)
	}
	b.counts[k-b.offset]++
}

func (b *buckets) halve() {
	if len(b.counts) == 0 {
		return
	}
	first := (b.offset + 1) >> 1
	last := (b.offset + int32(len(b.counts)) - 1 + 1) >> 1
	out := make([]uint64, last-first+1)
	for i, c := range b.counts {
		out[((b.offset+int32(i)+1)>>1)-first] += c
	}
	b.offset, b.counts = first, out
}

// bounds[s] are the bucket bounds of schema s within one power of two, as
// fractions in [0.5, 1) of math.Frexp. They are the floats client_golang
// and Prometheus use, bit for bit: every other bound is one of the coarser
// schema's, and the one between is the bound below it times the schema's
// factor. math.Exp2 of the exponent is up to two units in the last place
// away from them, which put a sample on a bound in the next bucket.
var bounds = func() [9][]float64 {
	var b [9][]float64
	b[0] = []float64{0.5}
	for s := 1; s <= 8; s++ {
		factor := math.Exp2(math.Exp2(float64(-s)))
		b[s] = make([]float64, 1<<s)
		for j := range b[s] {
			if j%2 == 0 {
				b[s][j] = b[s-1][j/2]
			} else {
				b[s][j] = b[s][j-1] * factor
			}
		}
	}
	return b
}()

// subBits is how many of a value's leading mantissa bits pick its entry in
// a schema's first table: 2^subBits slices of [0.5, 1), each narrower than
// the gap between two bounds of schema 8, hold one bound at most.
const subBits = 10

// first[s][m] is the index of the first bound of schema s not below the
// smallest fraction whose leading mantissa bits are m: the bucket of a
// fraction in that slice is that one or the next.
var first = func() [9][]uint16 {
	var t [9][]uint16
	for s := 1; s <= 8; s++ {
		t[s] = make([]uint16, 1<<subBits)
		for m := range t[s] {
			t[s][m] = uint16(searchBounds(bounds[s], 0.5+float64(m)/(2<<subBits)))
		}
	}
	return t
}()

// searchBounds is the index of the first of b not below frac.
func searchBounds(b []float64, frac float64) int {
	lo, hi := 0, len(b)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if b[m] < frac {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// index is the bucket of a > 0 at schema s: the k with
// 2^((k-1)/2^s) < a <= 2^(k/2^s).
func index(a float64, s int32) int32 {
	if s > 0 {
		bits := math.Float64bits(a)
		if e := int(bits>>52) & 0x7ff; e != 0 && e != 0x7ff {
			// A normal number is frac x 2^exp with frac in [0.5, 1), as
			// math.Frexp splits it; its slice of [0.5, 1) gives the bucket
			// to one comparison, a branch that is rarely taken.
			frac := math.Float64frombits(bits&(1<<52-1) | 0x3fe<<52)
			b := bounds[s]
			j := int(first[s][bits>>(52-subBits)&(1<<subBits-1)])
			if j < len(b) && b[j] < frac {
				j++
			}
			return int32(j + (e-1022-1)*len(b))
		}
	}
	return indexFrexp(a, s)
}

// indexFrexp is index by math.Frexp and a bisection of the bounds: for
// subnormal and infinite values, and schemas of at most 0. math.Frexp
// splits an infinity into (Inf, 0), which would put it in bucket 0: it
// goes in the bucket after the largest finite value's, as client_golang
// puts it.
func indexFrexp(a float64, s int32) int32 {
	if math.IsInf(a, 0) {
		return indexFrexp(math.MaxFloat64, s) + 1
	}
	frac, exp := math.Frexp(a)
	if s > 0 {
		b := bounds[s]
		return int32(searchBounds(b, frac) + (exp-1)*len(b))
	}
	k := int32(exp)
	if frac == 0.5 {
		k--
	}
	off := int32(1)<<-s - 1
	return (k + off) >> -s
}

// Write fills m's histogram with a copy of the counts so far, sparse as
// Prometheus reads them: spans of buckets in use, counts as deltas.
func (h *Histogram) Write(m *dto.Metric) {
	count, sum, schema, thr, zero := h.count, h.sum, h.schema, h.zeroThr, h.zero
	hist := &dto.Histogram{
		SampleCount:   &count,
		SampleSum:     &sum,
		Schema:        &schema,
		ZeroThreshold: &thr,
		ZeroCount:     &zero,
	}
	hist.PositiveSpan, hist.PositiveDelta = h.pos.sparse()
	hist.NegativeSpan, hist.NegativeDelta = h.neg.sparse()
	if len(hist.PositiveSpan) == 0 && len(hist.NegativeSpan) == 0 {
		// A histogram with no bucket in use is still native: an empty span
		// tells Prometheus so, as client_golang does.
		hist.PositiveSpan = []*dto.BucketSpan{{Offset: new(int32), Length: new(uint32)}}
	}
	m.Histogram = hist
}

// sparse returns the spans and deltas of the buckets in use. A gap of one
// or two empty buckets is written as zero counts, which costs less than a
// new span.
func (b *buckets) sparse() ([]*dto.BucketSpan, []int64) {
	var spans []*dto.BucketSpan
	var deltas []int64
	prev := int64(0)
	next := int32(0) // the index after the last one written
	for i, c := range b.counts {
		if c == 0 {
			continue
		}
		k := b.offset + int32(i)
		gap := k - next
		switch {
		case len(spans) == 0 || gap > 2:
			off := gap
			if len(spans) == 0 {
				off = k
			}
			spans = append(spans, &dto.BucketSpan{Offset: &off, Length: new(uint32)})
		default:
			for range gap {
				deltas = append(deltas, -prev)
				prev = 0
			}
			*spans[len(spans)-1].Length += uint32(gap)
		}
		*spans[len(spans)-1].Length++
		deltas = append(deltas, int64(c)-prev)
		prev = int64(c)
		next = k + 1
	}
	return spans, deltas
}
