package nativehist

import (
	"encoding/binary"
	"math"
)

// Protobuf's wire types of the fields below.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
)

// Field numbers and wire types of client_model's Histogram and BucketSpan
// (metrics.proto), as tags: (number << 3) | wire type.
const (
	tagSampleCount   = 1<<3 | wireVarint
	tagSampleSum     = 2<<3 | wireFixed64
	tagSchema        = 5<<3 | wireVarint
	tagZeroThreshold = 6<<3 | wireFixed64
	tagZeroCount     = 7<<3 | wireVarint
	tagNegativeSpan  = 9<<3 | wireBytes
	tagNegativeDelta = 10<<3 | wireVarint
	tagPositiveSpan  = 12<<3 | wireBytes
	tagPositiveDelta = 13<<3 | wireVarint
	tagSpanOffset    = 1<<3 | wireVarint
	tagSpanLength    = 2<<3 | wireVarint
)

// AppendProto appends the histogram as the fields of client_model's
// Histogram message, byte for byte what protobuf-go marshals of the message
// Write fills, without building it: a scrape encodes every series' histogram,
// and the message's pointers cost more than the encoding.
func (h *Histogram) AppendProto(buf []byte) []byte {
	buf = append(buf, tagSampleCount)
	buf = binary.AppendUvarint(buf, h.count)
	buf = append(buf, tagSampleSum)
	buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(h.sum))
	buf = append(buf, tagSchema)
	buf = binary.AppendUvarint(buf, zigzag(int64(h.schema)))
	buf = append(buf, tagZeroThreshold)
	buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(h.zeroThr))
	buf = append(buf, tagZeroCount)
	buf = binary.AppendUvarint(buf, h.zero)
	if len(h.pos.counts) == 0 && len(h.neg.counts) == 0 {
		// Write's empty span: offset 0, length 0.
		return append(buf, tagPositiveSpan, 4, tagSpanOffset, 0, tagSpanLength, 0)
	}
	buf = h.neg.appendSparse(buf, tagNegativeSpan, tagNegativeDelta)
	return h.pos.appendSparse(buf, tagPositiveSpan, tagPositiveDelta)
}

// appendSparse appends the spans, then the deltas, of the buckets in use,
// laid out as sparse lays them out.
func (b *buckets) appendSparse(buf []byte, spanTag, deltaTag byte) []byte {
	b.eachSpan(func(off int32, length uint32) {
		n := 1 + uvarintLen(zigzag(int64(off))) + 1 + uvarintLen(uint64(length))
		buf = append(buf, spanTag, byte(n), tagSpanOffset)
		buf = binary.AppendUvarint(buf, zigzag(int64(off)))
		buf = append(buf, tagSpanLength)
		buf = binary.AppendUvarint(buf, uint64(length))
	})
	b.eachDelta(func(d int64) {
		buf = append(buf, deltaTag)
		buf = binary.AppendUvarint(buf, zigzag(d))
	})
	return buf
}

// eachSpan calls f with each span sparse writes: its offset from the end of
// the one before (from 0 for the first) and its length. A gap of one or two
// empty buckets stays inside a span, as zero counts.
func (b *buckets) eachSpan(f func(off int32, length uint32)) {
	started := false
	var off int32
	var length uint32
	next := int32(0) // the index after the last one in a span
	for i, c := range b.counts {
		if c == 0 {
			continue
		}
		k := b.offset + int32(i)
		gap := k - next
		switch {
		case !started:
			started, off, length = true, k, 0
		case gap > 2:
			f(off, length)
			off, length = gap, 0
		default:
			length += uint32(gap)
		}
		length++
		next = k + 1
	}
	if started {
		f(off, length)
	}
}

// eachDelta calls f with the deltas sparse writes: each count in the spans
// less the one before it, the gaps inside a span counting 0.
func (b *buckets) eachDelta(f func(int64)) {
	prev := int64(0)
	started := false
	next := int32(0)
	for i, c := range b.counts {
		if c == 0 {
			continue
		}
		k := b.offset + int32(i)
		if gap := k - next; started && gap <= 2 {
			for range gap {
				f(-prev)
				prev = 0
			}
		}
		started = true
		f(int64(c) - prev)
		prev = int64(c)
		next = k + 1
	}
}

func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
