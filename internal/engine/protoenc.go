package engine

import (
	"encoding/binary"
	"io"
	"maps"
	"math"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of client_model's metrics.proto.
const (
	fieldFamilyName   = 1
	fieldFamilyHelp   = 2
	fieldFamilyType   = 3
	fieldFamilyMetric = 4
	fieldMetricLabel  = 1
	fieldMetricGauge  = 2
	fieldMetricCount  = 3
	fieldMetricUntyp  = 5
	fieldMetricHist   = 7
	fieldLabelName    = 1
	fieldLabelValue   = 2
	fieldValue        = 1
)

// client_model's MetricType values.
const (
	typeCounter   = 0
	typeGauge     = 1
	typeUntyped   = 3
	typeHistogram = 4
)

// valueSize is the encoded size of a Metric's gauge, counter or untyped
// field: tag, length, and a double with its tag.
const valueSize = 1 + 1 + 1 + 8

// AppendProto appends the delimited protobuf exposition of the series as
// they are now, native histograms included: what expfmt's encoder writes of
// the same families.
func (e *Engine) AppendProto(buf []byte) ([]byte, error) {
	s := snapshots.Get().(*Snapshot)
	defer putSnapshot(s)
	e.Snapshot(s, true)
	c := chunked{buf: buf}
	s.appendProto(&c, &e.protoLabels)
	return c.buf, c.err
}

// WriteProto writes the delimited protobuf exposition to w, chunkSize bytes
// at a time: each family is sized from its series' encoded label sets, then
// written. An error is w's.
func (s *Snapshot) WriteProto(w io.Writer) error {
	bp := chunkBufs.Get().(*[]byte)
	c := chunked{buf: (*bp)[:0], w: w}
	s.appendProto(&c, s.labels)
	err := c.flush()
	if cap(c.buf) <= 2*chunkSize {
		*bp = c.buf[:0]
		chunkBufs.Put(bp)
	}
	return err
}

// protoScratch is one protobuf writer's working memory, pooled: the
// encoding of each label string of the snapshot, by index, and those it had
// to make.
type protoScratch struct {
	tab  [][]byte
	miss map[string][]byte
}

var protoScratches = sync.Pool{New: func() any { return &protoScratch{miss: map[string][]byte{}} }}

// maxPooledStrs keeps a huge snapshot's scratch from staying in the pool.
const maxPooledStrs = 1 << 16

func (s *Snapshot) appendProto(c *chunked, cache *protoLabelCache) {
	ps := protoScratches.Get().(*protoScratch)
	defer func() {
		cache.add(ps.miss)
		clear(ps.miss)
		clear(ps.tab)
		if cap(ps.tab) <= maxPooledStrs {
			ps.tab = ps.tab[:0]
			protoScratches.Put(ps)
		}
	}()
	// Each label string once, not each series: a snapshot holds a few
	// hundred of them for thousands of series.
	for _, str := range s.strs {
		ps.tab = append(ps.tab, ps.enc(str, cache))
	}
	recs, hists := s.main.recs, s.hists
	for i := range s.main.fams {
		f := &s.main.fams[i]
		if f.hist {
			ps.histFamily(c, f, hists[:f.n], s.hbuf)
			hists = hists[f.n:]
		} else {
			ps.family(c, f, recs[:f.n])
			recs = recs[f.n:]
		}
		if c.err != nil {
			return
		}
	}
}

// familyStart appends a family's length and its name, help and type.
func familyStart(buf []byte, f *famRec, typ uint64, body int) []byte {
	size := protowire.SizeTag(fieldFamilyName) + protowire.SizeBytes(len(f.name)) +
		protowire.SizeTag(fieldFamilyHelp) + protowire.SizeBytes(len(f.help)) +
		protowire.SizeTag(fieldFamilyType) + protowire.SizeVarint(typ) + body
	buf = protowire.AppendVarint(buf, uint64(size))
	buf = appendString(buf, fieldFamilyName, f.name)
	buf = appendString(buf, fieldFamilyHelp, f.help)
	buf = protowire.AppendTag(buf, fieldFamilyType, protowire.VarintType)
	return protowire.AppendVarint(buf, typ)
}

// family writes a family of gauges, counters or untyped series.
func (ps *protoScratch) family(c *chunked, f *famRec, recs []sampleRec) {
	typ, field := uint64(typeUntyped), byte(fieldMetricUntyp<<3|2)
	switch f.typ {
	case "gauge":
		typ, field = typeGauge, fieldMetricGauge<<3|2
	case "counter":
		typ, field = typeCounter, fieldMetricCount<<3|2
	}
	body := 0
	for _, r := range recs {
		n := len(ps.tab[r.labels]) + len(ps.tab[r.tail]) + valueSize
		body += protowire.SizeTag(fieldFamilyMetric) + protowire.SizeBytes(n)
	}
	c.buf = familyStart(c.buf, f, typ, body)
	for _, r := range recs {
		l, t := ps.tab[r.labels], ps.tab[r.tail]
		c.buf = append(c.buf, fieldFamilyMetric<<3|2)
		c.buf = protowire.AppendVarint(c.buf, uint64(len(l)+len(t)+valueSize))
		c.buf = append(c.buf, l...)
		c.buf = append(c.buf, t...)
		c.buf = append(c.buf, field, 9, fieldValue<<3|1)
		c.buf = binary.LittleEndian.AppendUint64(c.buf, math.Float64bits(r.v))
		if len(c.buf) >= chunkSize && !c.spill() {
			return
		}
	}
}

// histFamily writes a family of native histograms.
func (ps *protoScratch) histFamily(c *chunked, f *famRec, hists []histRec, hbuf []byte) {
	body := 0
	for _, hr := range hists {
		h := int(hr.to - hr.from)
		n := len(ps.tab[hr.labels]) + protowire.SizeTag(fieldMetricHist) + protowire.SizeBytes(h)
		body += protowire.SizeTag(fieldFamilyMetric) + protowire.SizeBytes(n)
	}
	c.buf = familyStart(c.buf, f, typeHistogram, body)
	for _, hr := range hists {
		l, h := ps.tab[hr.labels], hbuf[hr.from:hr.to]
		c.buf = append(c.buf, fieldFamilyMetric<<3|2)
		c.buf = protowire.AppendVarint(c.buf, uint64(len(l)+protowire.SizeTag(fieldMetricHist)+protowire.SizeBytes(len(h))))
		c.buf = append(c.buf, l...)
		c.buf = append(c.buf, fieldMetricHist<<3|2)
		c.buf = protowire.AppendVarint(c.buf, uint64(len(h)))
		c.buf = append(c.buf, h...)
		if len(c.buf) >= chunkSize && !c.spill() {
			return
		}
	}
}

// enc is the encoding of the label pairs in str (a label set or a tail).
func (ps *protoScratch) enc(str string, cache *protoLabelCache) []byte {
	if len(str) <= 2 {
		// "", " ", "{" and "} " hold no pair.
		return nil
	}
	enc, ok := cache.get(str)
	if !ok {
		if enc, ok = ps.miss[str]; !ok {
			enc = encodeLabels(str)
			ps.miss[str] = enc
		}
	}
	return enc
}

// maxProtoLabelSets bounds the label cache: far above the label strings of
// one exposition (entities times copies, and the tails), so that it is
// emptied only when entities and their labels have turned over many times.
const maxProtoLabelSets = 1 << 14

// protoLabelCache keeps the protobuf encoding of each label string the
// render writes, read from its text once rather than at every scrape.
// Writers read it without a lock; what a writer had to encode is added
// after it, in a new map.
type protoLabelCache struct {
	mu sync.Mutex
	m  atomic.Pointer[map[string][]byte]
}

func (c *protoLabelCache) get(s string) ([]byte, bool) {
	m := c.m.Load()
	if m == nil {
		return nil, false
	}
	enc, ok := (*m)[s]
	return enc, ok
}

// add publishes the encodings of news beside those already kept, or
// instead of them when the cache would pass its bound.
func (c *protoLabelCache) add(news map[string][]byte) {
	if len(news) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	n := len(news)
	if old != nil && len(*old)+n <= maxProtoLabelSets {
		n += len(*old)
	} else {
		old = nil
	}
	m := make(map[string][]byte, n)
	if old != nil {
		maps.Copy(m, *old)
	}
	for s, enc := range news {
		if len(m) < maxProtoLabelSets {
			m[strings.Clone(s)] = enc
		}
	}
	c.m.Store(&m)
}

// encodeLabels reads a label string as the render writes it (an entity's
// label set after its opening brace, or a tail's pairs before the closing
// one) and encodes its pairs as Metric.label fields.
func encodeLabels(s string) []byte {
	var enc []byte
	for _, p := range labelPairs(strings.TrimSuffix(strings.TrimSuffix(s, " "), "}")) {
		size := protowire.SizeTag(fieldLabelName) + protowire.SizeBytes(len(p.name)) +
			protowire.SizeTag(fieldLabelValue) + protowire.SizeBytes(len(p.value))
		enc = protowire.AppendTag(enc, fieldMetricLabel, protowire.BytesType)
		enc = protowire.AppendVarint(enc, uint64(size))
		enc = appendString(enc, fieldLabelName, p.name)
		enc = appendString(enc, fieldLabelValue, p.value)
	}
	return enc
}

func appendString(buf []byte, field protowire.Number, s string) []byte {
	buf = protowire.AppendTag(buf, field, protowire.BytesType)
	return protowire.AppendString(buf, s)
}
