package engine

import (
	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/engine/nativehist"
	"github.com/gpuscope/gpuscope/source"
)

// apply moves a staged batch into the store.
func (e *Engine) apply(b *batch) {
	if len(b.vals)+len(b.texts)+len(b.unsupported)+len(b.fails)+len(b.xids)+len(b.health)+len(b.p2p)+len(b.nonFinite) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.plan
	e.applyValuesLocked(p, b)
	e.applyEventsLocked(b)
	e.applyTextsLocked(p, b)
	e.applyProblemsLocked(p, b)
}

// applyValuesLocked stores the batch's samples: the latest value of each
// series, its ring, and the clock-event reasons' bits.
func (e *Engine) applyValuesLocked(p *plan, b *batch) {
	for i := range b.vals {
		s := &b.vals[i]
		es := e.byPtrCache.get(s.e, e.byPtr)
		si, ok := p.slotFor(s.field)
		if es == nil || !ok {
			continue
		}
		sv := &es.vals[si]
		// A sample at the time of the latest one is a read of the same
		// sample: the histogram counts it once.
		if h := p.slots[si].hist; h != nil && (s.ts > sv.ts || !sv.has) {
			if sv.hist == nil {
				sv.hist = nativehist.New(*h)
			}
			sv.hist.Observe(s.v)
		}
		if s.ts >= sv.ts {
			sv.ts, sv.v = s.ts, s.v
		}
		sv.has = true
		if sv.support != supportYes {
			sv.support, sv.reason = supportYes, ""
		}
		sv.failing = false
		// Rings are made on an entity's first sample of the slot: most
		// entities of a large node never get most fields (a link has no
		// per-link field of another link), and rings for them all would
		// dominate memory.
		if sv.ring == nil && p.slots[si].ringCap > 0 {
			sv.ring = newRing(&p.slots[si])
		}
		if sv.ring != nil {
			sv.ring.Push(s.ts, s.v)
		}
		if s.field == fieldid.ClocksEventReasons && p.clock {
			es.addClockMask(uint64(s.v), s.ts, p.clockRingCap)
		}
		e.sampled = true
	}
	if len(b.vals) > 0 {
		e.raw.publishLocked()
	}
}

// applyEventsLocked stores the batch's XID events and health checks.
func (e *Engine) applyEventsLocked(b *batch) {
	for _, x := range b.xids {
		if es := e.byPtr[x.e]; es != nil {
			es.addXID(x.code, x.ts)
		}
	}
	for _, h := range b.health {
		es := e.byPtr[h.e]
		if es == nil {
			es = e.healthPtr[h.e]
		}
		if es != nil && h.ts >= es.healthTS {
			es.health, es.healthTS = h.results, h.ts
			e.sampled = true
		}
	}
	for _, l := range b.p2p {
		es := e.byPtr[l.e]
		if es == nil {
			es = e.healthPtr[l.e]
		}
		if es != nil && l.ts >= es.p2pTS {
			es.p2p, es.p2pTS = l.links, l.ts
			e.sampled = true
		}
	}
}

// applyTextsLocked stores the label-type fields' values and rebuilds the
// label strings once for the batch when one changed: a driver upgrade
// changes a text field on every GPU at once.
func (e *Engine) applyTextsLocked(p *plan, b *batch) {
	relabel := false
	for _, t := range b.texts {
		es := e.byPtr[t.e]
		if es == nil {
			es = e.healthPtr[t.e] // label fields name a health-only GPU too
		}
		ti, ok := p.textOf[t.field]
		if es == nil || !ok || es.text[ti] == t.s {
			continue
		}
		es.text[ti] = t.s
		relabel = true
	}
	if relabel {
		e.relabelLocked()
	}
}

// applyProblemsLocked records the fields an entity does not support, which
// leave the exposition, the failed reads, each logged once until the field
// reads again, and counts the samples left out as non-finite.
func (e *Engine) applyProblemsLocked(p *plan, b *batch) {
	for _, u := range b.unsupported {
		es := e.byPtr[u.e]
		si, ok := p.slotOf[u.field]
		if es == nil || !ok {
			continue
		}
		sv := &es.vals[si]
		if sv.support != supportNo {
			e.log.WithFields(logrus.Fields{"field": fieldName(p, u.field), "entity": es.key, "reason": u.s}).
				Warn("Field is not supported on this entity; it is left out of the exposition")
		}
		sv.support, sv.has, sv.reason = supportNo, false, u.s
	}
	for _, f := range b.fails {
		es := e.byPtr[f.e]
		si, ok := p.slotOf[f.field]
		if es == nil || !ok {
			continue
		}
		name := fieldName(p, f.field)
		e.m.sampleErrors.WithLabelValues(name).Inc()
		if sv := &es.vals[si]; !sv.failing {
			sv.failing = true
			e.log.WithError(f.err).WithFields(logrus.Fields{"field": name, "entity": es.key}).Warn("Reading a field failed")
		}
	}
	for _, id := range b.nonFinite {
		if _, ok := p.slotOf[id]; ok {
			e.m.nonFinite.WithLabelValues(fieldName(p, id)).Inc()
		}
	}
}

func fieldName(p *plan, id uint16) string { return source.FieldFor(p.set.Fields, id).Name }
