package engine

import (
	"maps"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/engine/window"
	"github.com/gpuscope/gpuscope/internal/sampleapi"
)

// rawState is what the raw-sample API adds to the engine: the fields a
// client asked rings for, and the channel that tells streams new samples are
// in. Both are guarded by Engine.mu.
type rawState struct {
	// onDemand are fields of the counters file without window statistics
	// that a client asked samples of: they keep a ring, sized by the window,
	// across reloads. Bounded by the fields of the counters file.
	onDemand map[uint16]struct{}
	// updated is closed, and replaced, each time samples are applied.
	updated chan struct{}
}

// publishLocked wakes the streams waiting for samples.
func (r *rawState) publishLocked() {
	if r.updated != nil {
		close(r.updated)
		r.updated = nil
	}
}

// Updated returns a channel that is closed when the next samples are in.
// Streams wait on it instead of polling; the engine never waits on them.
func (e *Engine) Updated() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.raw.updated == nil {
		e.raw.updated = make(chan struct{})
	}
	return e.raw.updated
}

// applyDemandLocked gives the fields clients asked samples of a ring in
// plan p.
func (e *Engine) applyDemandLocked(p *plan) {
	for id := range e.raw.onDemand {
		si, ok := p.slotOf[id]
		if !ok {
			delete(e.raw.onDemand, id)
			continue
		}
		if s := &p.slots[si]; s.ringCap == 0 {
			s.ringCap = window.CapacityFor(e.opts.Window, s.interval)
		}
	}
}

// resolveLocked maps the query's field names to slots, or says why a field
// cannot be answered. needRing is set when a field has no ring yet.
func (e *Engine) resolveLocked(q *sampleapi.Query) (slots []int, infos []counters.FieldInfo, needRing bool, err error) {
	p := e.plan
	for _, name := range q.Fields {
		info, ok := counters.Lookup(name)
		if !ok {
			reason := "unknown field name"
			if s := counters.Suggest(name); s != "" {
				reason += "; did you mean " + s + "?"
			}
			return nil, nil, false, &sampleapi.FieldError{Field: name, Reason: reason}
		}
		if info.Exporter() {
			return nil, nil, false, &sampleapi.FieldError{Field: name, Reason: "gpuscope computes it from events at scrape time; it has no samples"}
		}
		if _, isText := p.textOf[info.ID]; isText || info.Type == counters.Label {
			return nil, nil, false, &sampleapi.FieldError{Field: name, Reason: "a label field has no samples; its value is in every entity's labels"}
		}
		si, ok := p.slotOf[info.ID]
		if !ok {
			return nil, nil, false, &sampleapi.FieldError{Field: name, Reason: "not in the counters file " + p.set.File +
				"; add a line for it (its WATCH INTERVAL column sets the sampling, e.g. 100ms)"}
		}
		if p.slots[si].ringCap == 0 {
			needRing = true
		}
		slots = append(slots, si)
		infos = append(infos, info)
	}
	return slots, infos, needRing, nil
}

// Samples returns the samples the rings hold for the query. A field of the
// counters file that asks for no window statistics has no ring: the first
// request gives it one, sized by --window, so its answer fills from then
// on. An unknown field, one outside the counters file, and a label field are
// a *sampleapi.FieldError.
func (e *Engine) Samples(q sampleapi.Query) (*sampleapi.Result, error) {
	e.mu.RLock()
	_, _, needRing, err := e.resolveLocked(&q)
	if err != nil || !needRing {
		defer e.mu.RUnlock()
		if err != nil {
			return nil, err
		}
		return e.samplesLocked(&q)
	}
	e.mu.RUnlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	slots, _, _, err := e.resolveLocked(&q)
	if err != nil {
		return nil, err
	}
	if e.raw.onDemand == nil {
		e.raw.onDemand = map[uint16]struct{}{}
	}
	for _, si := range slots {
		e.raw.onDemand[e.plan.slots[si].id] = struct{}{}
	}
	e.applyDemandLocked(e.plan)
	return e.samplesLocked(&q)
}

func (e *Engine) samplesLocked(q *sampleapi.Query) (*sampleapi.Result, error) {
	slots, infos, _, err := e.resolveLocked(q)
	if err != nil {
		return nil, err
	}
	p := e.plan
	res := &sampleapi.Result{Now: e.opts.Now().UnixNano(), Hostname: e.opts.Hostname, Entities: []sampleapi.Entity{}}
	for i, si := range slots {
		res.Fields = append(res.Fields, sampleapi.Field{
			Name: q.Fields[i], Unit: infos[i].Unit, IntervalNS: int64(p.slots[si].interval), Help: infos[i].Help,
		})
	}
	total := 0
	for _, es := range e.order {
		if !q.WantsGPU(es.ent.GPU) {
			continue
		}
		var series []sampleapi.Series
		for i, si := range slots {
			r := es.vals[si].ring
			if r == nil {
				// The entity never had a sample of the field since its
				// ring was asked for (a link has no per-GPU field).
				continue
			}
			since := q.Since
			key := sampleapi.SeriesKey(es.key, q.Fields[i])
			if after, ok := q.After[key]; ok {
				since = after
			}
			s := sampleapi.Series{Field: q.Fields[i], T: []int64{}, V: sampleapi.Values{}}
			var vals []float64
			s.T, vals = r.AppendSince(since, s.T, vals)
			s.V = vals
			// Past the bound the answer is refused anyway: stop copying
			// before it holds more than one ring's worth past it.
			if total += len(s.T); q.MaxSamples > 0 && total > q.MaxSamples {
				return nil, &sampleapi.TooLargeError{MaxSamples: q.MaxSamples}
			}
			if s.V == nil {
				s.V = sampleapi.Values{}
			}
			if oldest, ok := r.Oldest(); ok && since > 0 && r.Len() == r.Cap() {
				// A full ring whose oldest sample is more than an interval
				// past the cursor has overwritten samples the client has
				// not seen.
				iv := int64(p.slots[si].interval)
				s.Missed = oldest > since+iv+iv/2
			}
			series = append(series, s)
		}
		if len(series) == 0 {
			continue
		}
		// An entity exported in several copies (one per HPC job) shows the
		// labels of its first.
		res.Entities = append(res.Entities, sampleapi.Entity{
			Key: es.key, Kind: es.ent.Kind.String(), GPU: es.ent.GPU, Labels: maps.Clone(es.labelMap), Series: series,
		})
	}
	return res, nil
}
