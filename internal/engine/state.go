package engine

import (
	"sort"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/gpuscope/gpuscope/internal/engine/eventnames"
	"github.com/gpuscope/gpuscope/internal/engine/nativehist"
	"github.com/gpuscope/gpuscope/internal/engine/window"
	"github.com/gpuscope/gpuscope/source"
)

// Bounds on the event history of one entity. XIDs are rare; a GPU that
// storms faster than this keeps its totals exact and only the window counts
// of dcgm-exporter's family saturate.
const (
	maxXIDCodes     = 64
	maxRecentEvents = 512
)

type support int8

const (
	supportUnknown support = iota
	supportYes
	supportNo
)

// seriesVal is the latest sample of one slot on one entity, and its window.
type seriesVal struct {
	ts      int64
	v       float64
	has     bool
	failing bool
	support support
	reason  string // why the source cannot read the slot (support == supportNo)
	ring    *window.Ring
	// hist counts every sample since the first, for the native histogram.
	hist *nativehist.Histogram
}

type xidCount struct {
	code     uint64
	total    uint64
	lastSeen int64
	label    string // `,xid="79",xid_description="..."`
}

// event is one XID (code: the XID) or one clock-event reasons sample (code:
// the bitmask) kept for dcgm-exporter's window counts.
type event struct {
	ts   int64
	code uint64
}

// eventRing keeps the most recent events, oldest overwritten first.
type eventRing struct {
	buf  []event
	head int
	n    int
}

// push adds ev to a ring of capacity c; a ring whose capacity changed (a
// reload with another interval) starts over.
func (r *eventRing) push(ev event, c int) {
	if c <= 0 {
		return
	}
	if len(r.buf) != c {
		*r = eventRing{buf: make([]event, c)}
	}
	r.buf[r.head] = ev
	r.head = (r.head + 1) % len(r.buf)
	if r.n < len(r.buf) {
		r.n++
	}
}

// each calls f for the events newer than since, newest first.
func (r *eventRing) each(since int64, f func(event)) {
	for i := 0; i < r.n; i++ {
		ev := r.buf[(r.head-1-i+len(r.buf))%len(r.buf)]
		if ev.ts <= since {
			return
		}
		f(ev)
	}
}

// count returns the events with code newer than since.
func (r *eventRing) count(code uint64, since int64) int {
	c := 0
	r.each(since, func(ev event) {
		if ev.code == code {
			c++
		}
	})
	return c
}

// clockCounts counts, per reason of eventnames.ClockEvents, the samples newer
// than since that have the reason's bit set, and says whether any sample is
// that new: dcgm-exporter's counting
// (internal/pkg/collector/clock_events_collector.go and expcollector.go: every
// value of the field read with GetValuesSince over the window adds one to each
// reason whose bit it has). With a period, the samples are those
// dcgm-exporter would have taken at that period: the last one of each
// period-aligned slot.
func (r *eventRing) clockCounts(since, period int64, out *[9]int) (sampled bool) {
	*out = [9]int{}
	slot, first := int64(0), true
	r.each(since, func(ev event) {
		sampled = true
		if period > 0 {
			// Newest first: the first sample met in a slot is its last.
			s := ev.ts / period
			if !first && s == slot {
				return
			}
			slot, first = s, false
		}
		for i, ce := range eventnames.ClockEvents {
			if ev.code&ce.Bit != 0 {
				out[i]++
			}
		}
	})
	return sampled
}

// entityState is what the engine knows of one entity.
type entityState struct {
	ent source.Entity
	key string
	// labels are the entity's label sets without the closing brace,
	// `{gpu="0",...`, so that families with extra labels can append theirs.
	// There is one set per copy of the entity's series: one unless an
	// enricher gives the entity several rows (HPC jobs sharing a GPU).
	labels []string
	// labelMap is the first set's labels by name, values unescaped, for the
	// samples API; read-only once built.
	labelMap map[string]string
	// split holds the label sets of the fields an enricher shares out
	// among its rows; nil when it gives the entity none.
	split *splitLabels
	// droppedCopies counts the copies the enrichers' rows asked for past
	// maxLabelCopies when labels was built.
	droppedCopies int
	// enrichGen is the sum of the enrichers' generations labels was built
	// with.
	enrichGen uint64
	vals      []seriesVal
	text      []string
	xids      []xidCount
	xidRecent eventRing
	clockMask uint64
	clockSeen bool
	clockTot  [9]uint64
	// clockInit holds the reasons set in the first sample: gpuscope's own
	// totals count them, dcgm-exporter's DCGM_EXP_CLOCK_EVENTS_TOTAL does
	// not (a reason active at start only initialises its state).
	clockInit uint64
	clockRec  eventRing
	lost      bool
	// parent is the GPU of a MIG instance or a GPU's link, when exported.
	parent *entityState
	// migParent is set on a GPU whose MIG GPU instances are exported: as in
	// dcgm-exporter's default (-d f), the instances carry the GPU's series
	// and the GPU itself has none of dcgm-exporter's families.
	migParent bool
	// health is the latest health check, taken at healthTS.
	health   []source.HealthResult
	healthTS int64
	// p2p is the latest NVLink P2P status towards each peer, read at p2pTS.
	p2p   []source.P2PLink
	p2pTS int64
	ins   insightState
	// proc holds the per-process series of the processes on the entity.
	proc procEntity
}

// newRing makes the window ring of slot s, keeping the window statistics up
// to date when the slot's metrics ask for any.
func newRing(s *slot) *window.Ring {
	r := window.NewRing(s.ringCap)
	r.Track(s.span)
	return r
}

func newEntityState(e *source.Entity, p *plan) *entityState {
	es := &entityState{ent: *e, key: e.Key()}
	es.resize(p, nil)
	return es
}

// resize lays out the per-slot values for plan p, carrying the samples of
// the fields that old also had.
func (es *entityState) resize(p *plan, old *plan) {
	vals := make([]seriesVal, len(p.slots))
	for i, s := range p.slots {
		if old != nil {
			if oi, ok := old.slotOf[s.id]; ok && oi < len(es.vals) {
				vals[i] = es.vals[oi]
			}
		}
		// A ring is made by the first sample (Engine.apply); one that the
		// window no longer needs is dropped, one that changes size keeps
		// its samples.
		switch {
		case s.ringCap == 0:
			vals[i].ring = nil
		case vals[i].ring == nil:
		case vals[i].ring.Cap() != s.ringCap:
			r := window.NewRing(s.ringCap)
			r.CopyFrom(vals[i].ring)
			vals[i].ring = r
		}
		if vals[i].ring != nil {
			vals[i].ring.Track(s.span)
		}
		if s.hist == nil {
			vals[i].hist = nil
		}
	}
	es.vals = vals
	text := make([]string, len(p.labelFields))
	if old != nil {
		for id, ni := range p.textOf {
			if oi, ok := old.textOf[id]; ok && oi < len(es.text) {
				text[ni] = es.text[oi]
			}
		}
	}
	es.text = text
}

func (es *entityState) addXID(code uint64, ts int64) {
	es.xidRecent.push(event{ts: ts, code: code}, maxRecentEvents)
	for i := range es.xids {
		if es.xids[i].code == code {
			es.xids[i].total++
			if ts > es.xids[i].lastSeen {
				es.xids[i].lastSeen = ts
			}
			return
		}
	}
	if len(es.xids) >= maxXIDCodes {
		return
	}
	es.xids = append(es.xids, xidCount{
		code: code, total: 1, lastSeen: ts,
		label: `,` + labelXID + `="` + eventnames.XIDLabel(code) + `",` + labelXIDDescription + `="` + escapeLabel(eventnames.XIDDescription(code)) + `"`,
	})
	sort.Slice(es.xids, func(i, j int) bool { return es.xids[i].code < es.xids[j].code })
}

// addClockMask decodes a clock-event reasons sample. For gpuscope's own
// totals a reason that becomes set counts as one event; dcgm-exporter's
// window count keeps every sample (ringCap of them at most).
func (es *entityState) addClockMask(mask uint64, ts int64, ringCap int) {
	for i, ce := range eventnames.ClockEvents {
		if mask&ce.Bit != 0 && (!es.clockSeen || es.clockMask&ce.Bit == 0) {
			es.clockTot[i]++
		}
	}
	es.clockRec.push(event{ts: ts, code: mask}, ringCap)
	if !es.clockSeen {
		es.clockInit = mask
	}
	es.clockMask, es.clockSeen = mask, true
}

// modelName follows dcgm-exporter's getGPUModel
// (internal/pkg/collector/gpu_collector.go): with replace set, runs of
// white space become one dash.
func modelName(m string, replace bool) string {
	if !replace {
		return m
	}
	return strings.Join(strings.Fields(m), "-")
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
var helpEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`)

// invalidUTF8Labels counts label values written with their invalid UTF-8
// bytes replaced. Host names, label-type fields, pod labels and HPC job IDs
// come from outside, and one invalid byte makes Prometheus refuse the whole
// scrape.
var invalidUTF8Labels atomic.Uint64

// escapeLabel is the one place a label value enters the exposition: it
// replaces invalid UTF-8 with U+FFFD and escapes what the text format needs.
func escapeLabel(s string) string {
	if !utf8.ValidString(s) {
		invalidUTF8Labels.Add(1)
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return labelEscaper.Replace(s)
}

func escapeHelp(s string) string { return helpEscaper.Replace(strings.ToValidUTF8(s, "\uFFFD")) }
