package engine

import (
	"strings"
	"sync"

	dto "github.com/prometheus/client_model/go"
)

// expo is where a render writes its series: the text exposition into buf,
// or, when fams is set, client_model families for the protobuf exposition.
// One walk of the store serves both, so the two cannot disagree on which
// series exist, their labels or their values.
type expo struct {
	buf  []byte
	fams *famBuilder
}

// family opens a family; in text its header is written now, and dropped
// again by rollback when no sample follows.
func (w *expo) family(name, help, typ string) {
	if w.fams != nil {
		w.fams.declare(name, help, typ)
		return
	}
	w.buf = append(w.buf, familyHeader(name, help, typ)...)
}

// familyWith is family with the text header built beforehand.
func (w *expo) familyWith(header, name, help, typ string) {
	if w.fams != nil {
		w.fams.declare(name, help, typ)
		return
	}
	w.buf = append(w.buf, header...)
}

// sample writes one series: labels is an entity's label set as rendered
// (an opening brace and its pairs), tail the extra pairs and the closing
// "} ", or both empty for a series without labels.
func (w *expo) sample(name, labels, tail string, v float64) {
	if w.fams != nil {
		w.fams.add(name, labels, tail, v)
		return
	}
	w.buf = appendSample(w.buf, name, labels, tail, v)
}

// famBuilder collects the families of one protobuf render. Metrics come
// from slabs and label sets from the engine's cache, so the cost per series
// is a few pointer stores.
type famBuilder struct {
	out      []*dto.MetricFamily
	byName   map[string]*dto.MetricFamily
	declared map[string]famDecl
	cur      *dto.MetricFamily
	prev     *dto.MetricFamily
	labels   *protoLabelCache

	metrics []dto.Metric
	gauges  []dto.Gauge
	ctrs    []dto.Counter
	untyped []dto.Untyped
	floats  []float64
}

type famDecl struct {
	help string
	typ  dto.MetricType
}

const slabSize = 256

func newFamBuilder(labels *protoLabelCache) *famBuilder {
	return &famBuilder{byName: map[string]*dto.MetricFamily{}, declared: map[string]famDecl{}, labels: labels}
}

// declare records a family's HELP and TYPE; the family itself is made by
// its first sample, as the text render leaves out a header without one.
func (f *famBuilder) declare(name, help, typ string) {
	if _, ok := f.declared[name]; ok {
		return
	}
	t := dto.MetricType_UNTYPED
	switch typ {
	case "gauge":
		t = dto.MetricType_GAUGE
	case "counter":
		t = dto.MetricType_COUNTER
	}
	f.declared[name] = famDecl{help: help, typ: t}
}

func (f *famBuilder) familyOf(name string) *dto.MetricFamily {
	// The window statistics and their samples counts alternate.
	if f.cur != nil && *f.cur.Name == name {
		return f.cur
	}
	if f.prev != nil && *f.prev.Name == name {
		f.cur, f.prev = f.prev, f.cur
		return f.cur
	}
	f.prev = f.cur
	mf, ok := f.byName[name]
	if !ok {
		d := f.declared[name]
		n, h, t := name, d.help, d.typ
		mf = &dto.MetricFamily{Name: &n, Help: &h, Type: &t, Metric: make([]*dto.Metric, 0, f.labels.sizes[name])}
		f.byName[name] = mf
		f.out = append(f.out, mf)
	}
	f.cur = mf
	return mf
}

func (f *famBuilder) add(name, labels, tail string, v float64) {
	mf := f.familyOf(name)
	if len(f.metrics) == 0 {
		f.metrics = make([]dto.Metric, slabSize)
		f.floats = make([]float64, slabSize)
	}
	m := &f.metrics[0]
	f.metrics = f.metrics[1:]
	f.floats[0] = v
	vp := &f.floats[0]
	f.floats = f.floats[1:]
	m.Label = f.labels.get(labels, tail).pairs
	switch mf.GetType() {
	case dto.MetricType_GAUGE:
		if len(f.gauges) == 0 {
			f.gauges = make([]dto.Gauge, slabSize)
		}
		m.Gauge, f.gauges = &f.gauges[0], f.gauges[1:]
		m.Gauge.Value = vp
	case dto.MetricType_COUNTER:
		if len(f.ctrs) == 0 {
			f.ctrs = make([]dto.Counter, slabSize)
		}
		m.Counter, f.ctrs = &f.ctrs[0], f.ctrs[1:]
		m.Counter.Value = vp
	default:
		if len(f.untyped) == 0 {
			f.untyped = make([]dto.Untyped, slabSize)
		}
		m.Untyped, f.untyped = &f.untyped[0], f.untyped[1:]
		m.Untyped.Value = vp
	}
	mf.Metric = append(mf.Metric, m)
}

// maxProtoLabelSets bounds the label cache: far above the label sets of one
// render (entities times copies times tails), so that it is emptied only
// when entities and their labels have turned over many times.
const maxProtoLabelSets = 1 << 16

// protoLabelCache keeps each label set of the exposition as client_model
// pairs and as their protobuf encoding, read from the rendered form once
// rather than at every scrape. Its mutex is held for a whole protobuf
// render.
type protoLabelCache struct {
	mu    sync.Mutex
	sets  map[[2]string]*labelSet
	byPtr map[*dto.LabelPair]*labelSet
	// sizes is each family's series at the last render, to size the next.
	sizes map[string]int
}

// labelSet is one label set; enc is the pairs encoded as Metric.label
// fields.
type labelSet struct {
	pairs []*dto.LabelPair
	enc   []byte
}

// lock takes the cache for a render, emptying it when full.
func (c *protoLabelCache) lock() {
	c.mu.Lock()
	if c.sets == nil || len(c.sets) > maxProtoLabelSets {
		c.sets = map[[2]string]*labelSet{}
		c.byPtr = map[*dto.LabelPair]*labelSet{}
		c.sizes = map[string]int{}
	}
}

// done notes the families' sizes for the next render.
func (f *famBuilder) done() []*dto.MetricFamily {
	if len(f.labels.sizes) > maxProtoLabelSets {
		clear(f.labels.sizes)
	}
	for _, mf := range f.out {
		f.labels.sizes[mf.GetName()] = len(mf.Metric)
	}
	return f.out
}

func (c *protoLabelCache) unlock() { c.mu.Unlock() }

// get is the label set of labels (an entity's, as rendered) and tail (the
// extra pairs and closing brace of a sample).
func (c *protoLabelCache) get(labels, tail string) *labelSet {
	key := [2]string{labels, tail}
	if ls, ok := c.sets[key]; ok {
		return ls
	}
	s := strings.TrimSuffix(strings.TrimSuffix(tail, " "), "}")
	lp := labelPairs(labels)
	if s != "" {
		lp = append(lp[:len(lp):len(lp)], labelPairs(strings.TrimPrefix(s, ","))...)
	}
	ls := &labelSet{pairs: lp}
	for _, p := range lp {
		ls.enc = appendLabelPair(ls.enc, p)
	}
	c.sets[key] = ls
	if len(lp) > 0 {
		c.byPtr[lp[0]] = ls
	}
	return ls
}

// encoded is the encoding of a metric's label pairs when the cache made
// them, or nil.
func (c *protoLabelCache) encoded(pairs []*dto.LabelPair) []byte {
	if len(pairs) == 0 {
		return nil
	}
	if ls, ok := c.byPtr[pairs[0]]; ok && len(ls.pairs) == len(pairs) {
		return ls.enc
	}
	return nil
}
