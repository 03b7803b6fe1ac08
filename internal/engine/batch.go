package engine

import "github.com/gpuscope/gpuscope/source"

// batch is the Sink a Collect call writes into. It stages the samples so the
// source never runs under the engine's lock; its slices are reused, so the
// steady state does not allocate.
type batch struct {
	vals        []stagedValue
	texts       []stagedText
	unsupported []stagedText
	fails       []stagedFail
	xids        []stagedValue
	health      []stagedHealth
	p2p         []stagedP2P
	// nonFinite are the fields of the samples left out as no reading.
	nonFinite []uint16
}

type stagedP2P struct {
	e     *source.Entity
	ts    int64
	links []source.P2PLink
}

type stagedHealth struct {
	e       *source.Entity
	ts      int64
	results []source.HealthResult
}

type stagedValue struct {
	e     *source.Entity
	field uint16
	ts    int64
	v     float64
	code  uint64
}

type stagedText struct {
	e     *source.Entity
	field uint16
	s     string
}

type stagedFail struct {
	e     *source.Entity
	field uint16
	err   error
}

func (b *batch) reset() {
	clear(b.vals)
	b.vals = b.vals[:0]
	clear(b.texts)
	b.texts = b.texts[:0]
	clear(b.unsupported)
	b.unsupported = b.unsupported[:0]
	clear(b.fails)
	b.fails = b.fails[:0]
	clear(b.xids)
	b.xids = b.xids[:0]
	clear(b.health)
	b.health = b.health[:0]
	clear(b.p2p)
	b.p2p = b.p2p[:0]
	b.nonFinite = b.nonFinite[:0]
}

// Value stages a sample. A NaN or an infinity is no reading: DCGM marks a
// value it has not got as blank, which its source leaves out, and no GPU
// quantity is infinite; one infinity would also stay in a histogram's sum
// for as long as gpuscope runs. It is left out here, whatever the source,
// and counted.
func (b *batch) Value(e *source.Entity, field uint16, ts int64, v float64) {
	if v-v != 0 {
		b.nonFinite = append(b.nonFinite, field)
		return
	}
	b.vals = append(b.vals, stagedValue{e: e, field: field, ts: ts, v: v})
}

func (b *batch) Text(e *source.Entity, field uint16, s string) {
	b.texts = append(b.texts, stagedText{e: e, field: field, s: s})
}

func (b *batch) Unsupported(e *source.Entity, field uint16, reason string) {
	b.unsupported = append(b.unsupported, stagedText{e: e, field: field, s: reason})
}

func (b *batch) Fail(e *source.Entity, field uint16, err error) {
	b.fails = append(b.fails, stagedFail{e: e, field: field, err: err})
}

func (b *batch) XID(e *source.Entity, xid uint64, ts int64) {
	b.xids = append(b.xids, stagedValue{e: e, ts: ts, code: xid})
}

func (b *batch) Health(e *source.Entity, ts int64, results []source.HealthResult) {
	b.health = append(b.health, stagedHealth{e: e, ts: ts, results: results})
}

func (b *batch) P2P(e *source.Entity, ts int64, links []source.P2PLink) {
	b.p2p = append(b.p2p, stagedP2P{e: e, ts: ts, links: links})
}
