package engine

import (
	"math"
	"strconv"
	"sync"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/engine/eventnames"
	"github.com/gpuscope/gpuscope/source"
)

// renderScratch is the per-render working memory, pooled so that concurrent
// scrapes neither share nor allocate it.
type renderScratch struct {
	vals []float64
	// seen indexes the snapshot's label strings while the walk lasts.
	seen strIndex
}

var scratchPool = sync.Pool{New: func() any { return &renderScratch{} }}

// statLabels close the label set of each window statistic's series, built
// once from the registered statistics.
var statLabels = func() map[counters.Stat]string {
	out := make(map[counters.Stat]string, len(counters.AllStats))
	for _, st := range counters.AllStats {
		out[st] = `,` + labelStat + `="` + st.String() + `"} `
	}
	return out
}()

// clockEventTails close the label set of the clock-event families, one per
// reason of eventnames.ClockEvents, built once so a render does not concatenate
// them per GPU.
var clockEventTails = func() [9]string {
	var t [9]string
	for i, ce := range eventnames.ClockEvents {
		t[i] = `,` + labelClockEvent + `="` + ce.Name + `"} `
	}
	return t
}()

// Render appends the text exposition of the GPU series to buf: the CSV
// fields, their window statistics, the XID and clock-event families, and
// the per-GPU self metrics. It reads the store only.
func (e *Engine) Render(buf []byte) []byte {
	s := snapshots.Get().(*Snapshot)
	defer putSnapshot(s)
	return e.Snapshot(s, false).AppendText(buf)
}

// Snapshot fills s, or a new snapshot when s is nil, with the series as
// they are now, and returns it: what Render writes, and with proto the
// native histograms, which only the protobuf exposition carries. The
// store's read lock is held for the walk only, not while the snapshot is
// written.
func (e *Engine) Snapshot(s *Snapshot, proto bool) *Snapshot {
	if s == nil {
		s = &Snapshot{}
	}
	s.reset()
	s.labels = &e.protoLabels
	sc := scratchPool.Get().(*renderScratch)
	defer scratchPool.Put(sc)
	sc.seen = strIndex{}
	w := snapshotWriter{s: s, l: &s.main, seen: &sc.seen}
	e.mu.RLock()
	defer e.mu.RUnlock()
	now := e.opts.Now().UnixNano()
	e.render(&w, s, sc, now)
	if proto {
		e.appendHistograms(&w, s, now)
	}
	return s
}

// snapshots keeps the snapshots of Render and AppendProto for the next.
var snapshots = sync.Pool{New: func() any { return &Snapshot{} }}

// maxPooledSeries keeps the snapshot of a huge exposition out of the pool.
const maxPooledSeries = 1 << 18

func putSnapshot(s *Snapshot) {
	if cap(s.main.recs) > maxPooledSeries || len(s.hbuf) > maxPooledSeries*64 {
		return
	}
	s.reset()
	snapshots.Put(s)
}

func (e *Engine) render(w *snapshotWriter, s *Snapshot, sc *renderScratch, now int64) {
	e.renderValues(w, now)
	e.renderWindows(w, s, sc, now)
	e.renderEvents(w, now)
	e.renderNvidiaGPUExporter(w)
	e.renderHealthChecks(w, now)
	e.renderP2P(w, now)
	e.renderInsight(w, now)
	e.renderProcesses(w)
	e.renderHealth(w)
}

// renderValues writes the latest value of every field's series that is not
// stale.
func (e *Engine) renderValues(w *snapshotWriter, now int64) {
	p := e.plan
	for mi := range p.metrics {
		m := &p.metrics[mi]
		stale := int64(math.MinInt64)
		if d := p.slots[m.slot].stale; d > 0 {
			stale = now - int64(d)
		}
		xid := m.field.ID == fieldid.XIDErrors
		wrote := false
		for _, es := range e.order {
			if !m.shows(es, p.layout) {
				continue
			}
			sv := m.valueOf(es)
			if !sv.has || sv.ts < stale {
				continue
			}
			v := m.field.Export.Value(sv.v)
			if !wrote {
				w.familyWith(m.header, m.field.Name, m.field.Help, m.field.Type.String())
				wrote = true
			}
			if e.appendSplit(w, m.field.Name, es, m.field.ID, sv.v) {
				continue
			}
			for _, l := range es.labels {
				if xid {
					appendXIDSample(w, m.field.Name, l, sv.v)
					continue
				}
				w.sample(m.field.Name, l, "} ", v)
			}
		}
	}
}

// renderWindows writes the window statistics of the fields that ask for
// them, each family followed by its samples count.
func (e *Engine) renderWindows(w *snapshotWriter, s *Snapshot, sc *renderScratch, now int64) {
	p := e.plan
	since := now - int64(e.opts.Window)
	for mi := range p.metrics {
		m := &p.metrics[mi]
		if m.windowHeader == "" {
			continue
		}
		// The samples counts follow the statistics, so they are written
		// aside and appended.
		s.side.reset()
		counts := snapshotWriter{s: s, l: &s.side, seen: w.seen}
		w.familyWith(m.windowHeader, m.windowName, m.windowHelp, "gauge")
		counts.familyWith(m.samplesHeader, m.samplesName, m.samplesHelp, "gauge")
		for _, es := range e.order {
			if !m.shows(es, p.layout) {
				continue
			}
			sv := m.valueOf(es)
			if sv.ring == nil || sv.support == supportNo {
				continue
			}
			var st statsView
			st.Stats, sc.vals = sv.ring.Stats(since, sc.vals)
			if st.Count == 0 {
				continue
			}
			for _, l := range es.labels {
				for _, stat := range m.field.Stats {
					w.sample(m.windowName, l, statLabels[stat], st.get(stat))
				}
				counts.sample(m.samplesName, l, "} ", float64(st.Count))
			}
		}
		w.l.add(&s.side)
	}
	s.side.reset()
}

// valueOf is the value of m's slot that es exports: its own, or for a MIG
// instance without one of a GPU-level field, its GPU's. dcgm-exporter's
// default (-d f) exports the GPU instances of a MIG GPU in place of the GPU,
// and DCGM answers GPU-level fields asked on an instance with the GPU's
// value, so power and temperature reach a MIG pod's series.
func (m *metric) valueOf(es *entityState) *seriesVal {
	sv := &es.vals[m.slot]
	if sv.has || !m.gpuLevel || es.parent == nil {
		return sv
	}
	if k := es.ent.Kind; k != source.GPUInstance && k != source.ComputeInstance {
		return sv
	}
	return &es.parent.vals[m.slot]
}

// expEntity is the entity whose XIDs and clock events an entity's series of
// dcgm-exporter's window-count families show, or nil when it has none of
// them: a GPU shows its own unless its MIG instances stand in for it; a GPU
// instance shows its GPU's, as dcgm-exporter counts by GPU and writes a
// series per monitored entity (internal/pkg/collector/expcollector.go).
func expEntity(es *entityState) *entityState {
	switch es.ent.Kind {
	case source.GPU:
		if !es.migParent {
			return es
		}
	case source.GPUInstance:
		return es.parent
	}
	return nil
}

// renderHealthChecks writes DCGM_EXP_GPU_HEALTH_STATUS as dcgm-exporter does
// (internal/pkg/collector/gpu_health_collector.go, GetMetrics): for each GPU
// one series per health watch, labelled health_watch and health_error_code,
// valued 0 pass, 10 warn, 20 fail.
func (e *Engine) renderHealthChecks(w *snapshotWriter, now int64) {
	p := e.plan
	f := p.expHealth
	if f == nil {
		return
	}
	stale := now - int64(p.slots[p.slotOf[f.ID]].stale)
	appendFamily(w, e.healthOrder, f.Name, f.Help, f.Type.String(),
		func(w *snapshotWriter, es *entityState, labels string) {
			if es.healthTS < stale {
				return
			}
			for _, r := range es.health {
				w.sample(f.Name, labels, `,`+labelHealthWatch+`="`+escapeLabel(r.Watch)+`",`+
					labelHealthErrorCode+`="`+escapeLabel(r.ErrorCode)+`"} `, float64(r.Result))
			}
		})
}

// renderP2P writes DCGM_EXP_P2P_STATUS as dcgm-exporter does
// (internal/pkg/collector/p2p_status_collector.go, GetMetrics): for each
// ordered pair of GPUs one series on the first, labelled peer_gpu (the
// second's index) and link_status, valued the status code.
func (e *Engine) renderP2P(w *snapshotWriter, now int64) {
	p := e.plan
	f := p.expP2P
	if f == nil {
		return
	}
	stale := now - int64(p.slots[p.slotOf[f.ID]].stale)
	appendFamily(w, e.healthOrder, f.Name, f.Help, f.Type.String(),
		func(w *snapshotWriter, es *entityState, labels string) {
			if es.p2pTS < stale {
				return
			}
			for _, l := range es.p2p {
				w.sample(f.Name, labels, `,`+labelPeerGPU+`="`+strconv.Itoa(l.Peer)+`",`+
					labelLinkStatus+`="`+source.P2PStatusName(l.Status)+`"} `, float64(l.Status))
			}
		})
}

func (e *Engine) renderEvents(w *snapshotWriter, now int64) {
	p := e.plan
	if p.xid {
		e.renderXIDs(w)
	}
	if f := p.expXID; f != nil {
		e.renderXIDCount(w, f, now)
	}
	if p.clock {
		e.renderClockEvents(w)
	}
	if f := p.expClock; f != nil {
		e.renderClockEventsCount(w, f, now)
	}
}

// renderXIDs writes gpuscope's XID families: the count and the last time
// seen of each XID per GPU.
func (e *Engine) renderXIDs(w *snapshotWriter) {
	appendFamily(w, e.order, "gpuscope_xid_errors_total", "XID errors seen on the GPU since gpuscope started, by XID; every event counts, repeats included.", "counter",
		func(w *snapshotWriter, es *entityState, labels string) {
			for _, x := range es.xids {
				w.sample("gpuscope_xid_errors_total", labels, x.label+"} ", float64(x.total))
			}
		})
	appendFamily(w, e.order, "gpuscope_xid_last_seen_timestamp_seconds", "Unix time the XID was last seen on the GPU.", "gauge",
		func(w *snapshotWriter, es *entityState, labels string) {
			for _, x := range es.xids {
				w.sample("gpuscope_xid_last_seen_timestamp_seconds", labels, x.label+"} ", float64(x.lastSeen)/1e9)
			}
		})
}

// renderXIDCount writes dcgm-exporter's DCGM_EXP_XID_ERRORS_COUNT.
func (e *Engine) renderXIDCount(w *snapshotWriter, f *counters.Field, now int64) {
	// dcgm-exporter (internal/pkg/collector/expcollector.go, getMetrics)
	// counts the values of the XID errors field within the window by XID and shows
	// one series per XID seen; a GPU with none gets one series of value
	// 0 without an xid label.
	since := now - int64(e.opts.XIDWindow)
	win := `,` + labelWindowSize + `="` + strconv.FormatInt(e.opts.XIDWindow.Milliseconds(), 10) + `"`
	appendFamily(w, e.order, f.Name, f.Help, f.Type.String(),
		func(w *snapshotWriter, es *entityState, labels string) {
			if es = expEntity(es); es == nil {
				return
			}
			seen := false
			for _, x := range es.xids {
				n := es.xidRecent.count(x.code, since)
				if n == 0 {
					continue
				}
				seen = true
				w.sample(f.Name, labels, win+`,`+labelXID+`="`+eventnames.XIDLabel(x.code)+`"} `, float64(n))
			}
			if !seen {
				w.sample(f.Name, labels, win+"} ", 0)
			}
		})
}

// renderClockEvents writes gpuscope's clock-event families: whether each
// reason is set, and how often it became set.
func (e *Engine) renderClockEvents(w *snapshotWriter) {
	appendFamily(w, e.order, "gpuscope_clock_event_active", "1 while the clock-event (throttle) reason is set on the GPU.", "gauge",
		func(w *snapshotWriter, es *entityState, labels string) {
			if !es.clockSeen {
				return
			}
			for i, ce := range eventnames.ClockEvents {
				v := 0.0
				if es.clockMask&ce.Bit != 0 {
					v = 1
				}
				w.sample("gpuscope_clock_event_active", labels, clockEventTails[i], v)
			}
		})
	appendFamily(w, e.order, "gpuscope_clock_events_total", "Times the clock-event (throttle) reason became set on the GPU since gpuscope started.", "counter",
		func(w *snapshotWriter, es *entityState, labels string) {
			if !es.clockSeen {
				return
			}
			for i := range eventnames.ClockEvents {
				w.sample("gpuscope_clock_events_total", labels, clockEventTails[i], float64(es.clockTot[i]))
			}
		})
}

// renderClockEventsCount writes dcgm-exporter's DCGM_EXP_CLOCK_EVENTS_COUNT.
func (e *Engine) renderClockEventsCount(w *snapshotWriter, f *counters.Field, now int64) {
	// dcgm-exporter (internal/pkg/collector/clock_events_collector.go and
	// expcollector.go): each sample within the window adds one to every
	// reason whose bit it has; only reasons counted appear, and a GPU
	// with no sample in the window gets one series of value 0 without a
	// clock_event label. A GPU whose samples all have no bit set gets no
	// series, as there.
	since := now - int64(e.opts.ClockEventsWindow)
	win := labelWindowSize + `="` + strconv.FormatInt(e.opts.ClockEventsWindow.Milliseconds(), 10) + `"`
	// The label tails are built once per render, not per GPU.
	var tails [len(clockEventTails)]string
	for i, ce := range eventnames.ClockEvents {
		tails[i] = `,` + labelClockEvent + `="` + ce.Name + `",` + win + `} `
	}
	zero := "," + win + "} "
	var counts [9]int
	appendFamily(w, e.order, f.Name, f.Help, f.Type.String(),
		func(w *snapshotWriter, es *entityState, labels string) {
			if es = expEntity(es); es == nil {
				return
			}
			if !es.clockRec.clockCounts(since, int64(e.opts.ClockEventsPeriod), &counts) {
				w.sample(f.Name, labels, zero, 0)
				return
			}
			for i, n := range counts {
				if n > 0 {
					w.sample(f.Name, labels, tails[i], float64(n))
				}
			}
		})
}

func (e *Engine) renderHealth(w *snapshotWriter) {
	gpus := 0
	for _, es := range e.order {
		if es.ent.Kind == source.GPU {
			gpus++
		}
	}
	w.family("gpuscope_gpus", "GPUs the source sees now.", "gauge")
	w.sample("gpuscope_gpus", "{", "} ", float64(gpus))
	appendFamily(w, e.order, "gpuscope_gpu_lost", "1 while the GPU stopped answering; gpuscope retries it with backoff.", "gauge",
		func(w *snapshotWriter, es *entityState, labels string) {
			if es.ent.Kind != source.GPU {
				return
			}
			v := 0.0
			if es.lost {
				v = 1
			}
			w.sample("gpuscope_gpu_lost", labels, "} ", v)
		})
	p := e.plan
	// Only fields a GPU cannot serve get a series: one per supported field
	// and GPU would say "yes" on every GPU of a fleet and double its series.
	appendFamily(w, e.order, "gpuscope_field_supported", "0 when the GPU cannot serve a field of the counters file, with the reason; the field is then absent, never 0. Supported fields have no series here.", "gauge",
		func(w *snapshotWriter, es *entityState, labels string) {
			// One series per GPU and field, however many copies of the
			// GPU's series the enrichers ask for.
			if es.ent.Kind != source.GPU || labels != es.labels[0] {
				return
			}
			for mi := range p.metrics {
				m := &p.metrics[mi]
				sv := &es.vals[m.slot]
				if sv.support != supportNo {
					continue
				}
				w.sample("gpuscope_field_supported", `{field="`+m.field.Name+`",gpu="`+strconv.Itoa(es.ent.GPU)+
					`",UUID="`+escapeLabel(es.ent.UUID)+`",reason="`+escapeLabel(sv.reason)+`"`, "} ", 0)
			}
			// A label-type field the GPU cannot serve is missing from its
			// series' labels, which says no more than an empty value would.
			for _, f := range p.labelFields {
				si, ok := p.slotOf[f.ID]
				if !ok || es.vals[si].support != supportNo {
					continue
				}
				w.sample("gpuscope_field_supported", `{field="`+f.Name+`",gpu="`+strconv.Itoa(es.ent.GPU)+
					`",UUID="`+escapeLabel(es.ent.UUID)+`",reason="`+escapeLabel(es.vals[si].reason)+`"`, "} ", 0)
			}
		})
}

// appendFamily writes a family's header and the samples each entity adds;
// a family to which no entity adds any is left out.
func appendFamily(w *snapshotWriter, order []*entityState, name, help, typ string, each func(*snapshotWriter, *entityState, string)) {
	w.family(name, help, typ)
	for _, es := range order {
		for _, l := range es.labels {
			each(w, es, l)
		}
	}
}

// appendXIDSample writes a DCGM_FI_DEV_XID_ERRORS sample with the err_code
// and err_msg labels that dcgm-exporter adds to it
// (internal/pkg/collector/gpu_collector.go, toMetric).
func appendXIDSample(w *snapshotWriter, name, labels string, v float64) {
	code := uint64(0)
	if v > 0 {
		code = uint64(v)
	}
	w.sample(name, labels, `,`+labelErrCode+`="`+strconv.FormatUint(code, 10)+`",`+
		labelErrMsg+`="`+escapeLabel(eventnames.XIDDescription(code))+`"} `, v)
}

func appendFloat(buf []byte, v float64) []byte {
	switch {
	case math.IsInf(v, 1):
		return append(buf, "+Inf"...)
	case math.IsInf(v, -1):
		return append(buf, "-Inf"...)
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.AppendInt(buf, int64(v), 10)
	}
	return strconv.AppendFloat(buf, v, 'g', -1, 64)
}
