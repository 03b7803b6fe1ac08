package engine

import (
	"sort"
	"time"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/engine/nativehist"
	"github.com/gpuscope/gpuscope/internal/engine/window"
	"github.com/gpuscope/gpuscope/source"
)

// slot is one distinct field the source is asked to read. Several CSV lines
// can share a slot (a legacy name and its current name both resolve to one
// DCGM field ID).
type slot struct {
	id       uint16
	interval time.Duration
	// ringCap is the number of samples the window needs; 0 when no metric of
	// this slot asks for statistics.
	ringCap int
	// stale is how old the latest sample may be before the series is left
	// out of the exposition; 0 for event fields, which hold their last value.
	stale time.Duration
	// span is the window (ns) whose statistics the slot's rings keep up to
	// date as samples arrive; 0 when no metric of the slot asks for any.
	span int64
	// hist is the bucket layout of the slot's native histograms; nil when
	// none of its metrics has one (planHistograms).
	hist *nativehist.Layout
}

// metric is one exported family that is read straight from a slot.
type metric struct {
	field  counters.Field
	slot   int
	header string // "# HELP ...\n# TYPE ...\n"
	// windowHeader and samplesHeader head the window statistics families;
	// empty when the field asks for none.
	windowHeader, samplesHeader string
	// windowName and samplesName are the families' names, built once so
	// that a render does not concatenate them per series.
	windowName, samplesName string
	// windowHelp and samplesHelp are their HELP texts, unescaped.
	windowHelp, samplesHelp string
	// histName and histHelp name the field's native histogram family;
	// empty when it has none.
	histName, histHelp string
	// gpuLevel fields are read on the GPU (DCGM's field level): a MIG
	// instance without a value of its own shows its GPU's, as DCGM answers
	// a GPU-level field asked on a GPU instance with the parent GPU's value.
	gpuLevel bool
}

// plan is everything the engine derives from one counters file. A reload
// builds a new plan and swaps it in whole.
type plan struct {
	set    *counters.Set
	groups []source.Group
	slots  []slot
	slotOf map[uint16]int
	// slotByID is slotOf as a slice indexed by field ID, -1 where none.
	slotByID []int32
	metrics  []metric
	// labelFields are the label-type fields; textOf maps their field ID to
	// their index in entityState.text.
	labelFields []counters.Field
	textOf      map[uint16]int
	// xid and clock say whether the XID and clock-event families of
	// gpuscope's own are exported; expXID and expClock hold dcgm-exporter's
	// window-count lines when the CSV enables them.
	xid, clock                  bool
	expXID, expClock, expHealth *counters.Field
	expP2P                      *counters.Field
	// clockRingCap is the number of clock-event reason samples that
	// DCGM_EXP_CLOCK_EVENTS_COUNT's window needs.
	clockRingCap int
	insight      insightPlan
	// layout is the counters file's label layout; roles are its
	// nvidia_gpu_exporter lines that export no field value of their own
	// (nvidia_smi_gpu_info, the XID and collection families).
	layout counters.Layout
	roles  []counters.Field
}

// maxClockSamples bounds the clock-event reason samples kept per GPU for
// DCGM_EXP_CLOCK_EVENTS_COUNT. The default window (5 min) at a 100 ms watch
// interval needs 3002; a window that needs more is refused (checkWindow).
const maxClockSamples = 4096

// neverStale says whether a field is an event field: DCGM writes it only when
// an event arrives (the XID errors field on an XID), so its latest value is the current
// state however old it is, as dcgm-exporter shows it.
func neverStale(id uint16) bool { return id == fieldid.XIDErrors }

// newPlan groups the fields of set by watch interval. XID and clock-event
// reasons are watched implicitly when an exporter-side field needs them.
func newPlan(set *counters.Set, defaultInterval, win, clockWin time.Duration, ins insightPlan) *plan {
	p := &plan{set: set, slotOf: map[uint16]int{}, textOf: map[uint16]int{}, insight: ins, layout: set.Layout}
	intervals := intervalWants{of: map[uint16]time.Duration{}, def: defaultInterval}
	sourceFields := p.resolveFields(&intervals)
	if ins.on {
		for _, f := range insightFields {
			intervals.want(f.ID, insightInterval)
		}
	}
	p.addSlots(intervals.of, clockWin)
	p.labelFields = labelFieldsOf(set)
	for i, f := range p.labelFields {
		p.textOf[f.ID] = i
	}
	for _, f := range sourceFields {
		if f.Type != counters.Label {
			p.metrics = append(p.metrics, p.newMetric(f, win))
		}
	}
	if ins.on {
		for _, f := range insightFields {
			s := &p.slots[p.slotOf[f.ID]]
			s.ringCap = max(s.ringCap, window.CapacityFor(ins.window, s.interval))
		}
	}
	p.groupSlots()
	return p
}

// intervalWants collects the shortest watch interval any line asks of each
// field the source reads.
type intervalWants struct {
	of  map[uint16]time.Duration
	def time.Duration
}

func (w *intervalWants) want(id uint16, iv time.Duration) {
	if iv <= 0 {
		iv = w.def
	}
	if cur, ok := w.of[id]; !ok || iv < cur {
		w.of[id] = iv
	}
}

// resolveFields reads the lines of the counters file as source.ReadFor
// decides, after setting aside the nvidia_gpu_exporter lines that export no
// field value of their own (roles): a derived field asks its base field of the source and enables
// the family the engine derives; the health pseudo-field asks for health
// checks; every other field is read and exported as it is, and returned.
func (p *plan) resolveFields(w *intervalWants) []counters.Field {
	var sourceFields []counters.Field
	for i := range p.set.Fields {
		f := p.set.Fields[i]
		if f.Export.Role != counters.RoleValue {
			p.roles = append(p.roles, f)
			switch f.Export.Role {
			case counters.RoleXIDTotal, counters.RoleXIDLast:
				w.want(fieldid.XIDErrors, 0)
			case counters.RoleExpXIDTotal:
				p.xid = true
				w.want(fieldid.XIDErrors, f.Interval)
			case counters.RoleExpClockEventsTotal:
				// Counted from the reasons field, as gpuscope's own totals are.
				p.clock = true
				w.want(fieldid.ClocksEventReasons, f.Interval)
			}
			continue
		}
		read, health := source.ReadFor(f.ID)
		switch {
		case health:
			// The family is rendered from the checks, one series per watch;
			// its slot keeps the interval and the staleness.
			p.expHealth = &p.set.Fields[i]
			w.want(fieldid.ExpGPUHealthStatus, f.Interval)
			continue
		case read != f.ID:
			switch f.ID {
			case fieldid.ExpXIDErrorsCount:
				p.expXID = &p.set.Fields[i]
			case fieldid.ExpClockEventsCount:
				p.expClock = &p.set.Fields[i]
			}
		case f.ID == fieldid.ExpP2PStatus:
			// One series per GPU and peer, from the source's reads.
			p.expP2P = &p.set.Fields[i]
			w.want(f.ID, f.Interval)
			continue
		default:
			sourceFields = append(sourceFields, f)
		}
		switch read {
		case fieldid.XIDErrors:
			p.xid = true
		case fieldid.ClocksEventReasons:
			// One reason's bit under an nvidia_gpu_exporter name is not
			// gpuscope's own clock-event family.
			p.clock = p.clock || f.Export.Bit == 0
		}
		w.want(read, f.Interval)
	}
	return sourceFields
}

// addSlots gives every field read a slot, in field ID order, with its
// interval and how long its latest sample stays current.
func (p *plan) addSlots(intervalOf map[uint16]time.Duration, clockWin time.Duration) {
	ids := make([]uint16, 0, len(intervalOf))
	for id := range intervalOf {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		iv := intervalOf[id]
		stale := 10 * iv
		if stale < 30*time.Second {
			stale = 30 * time.Second
		}
		if neverStale(id) {
			stale = 0
		}
		if id == fieldid.ClocksEventReasons && p.expClock != nil {
			p.clockRingCap = min(window.SamplesFor(clockWin, iv), maxClockSamples)
		}
		p.slotOf[id] = len(p.slots)
		p.slots = append(p.slots, slot{id: id, interval: iv, stale: stale})
	}
	// ids is sorted: the last is the largest.
	if len(ids) > 0 {
		p.slotByID = make([]int32, int(ids[len(ids)-1])+1)
		for i := range p.slotByID {
			p.slotByID[i] = -1
		}
		for id, si := range p.slotOf {
			p.slotByID[id] = int32(si)
		}
	}
}

// slotFor is the slot of a field ID, as slotOf says, without a map lookup:
// it runs once per sample.
func (p *plan) slotFor(id uint16) (int, bool) {
	if int(id) >= len(p.slotByID) || p.slotByID[id] < 0 {
		return 0, false
	}
	return int(p.slotByID[id]), true
}

// newMetric is the family of one exported field, with its window
// statistics' families when the line asks for them; it sizes the slot's
// ring to hold the window.
func (p *plan) newMetric(f counters.Field, win time.Duration) metric {
	si := p.slotOf[f.ID]
	lv := fieldid.Of(f.ID).Level
	m := metric{field: f, slot: si, header: familyHeader(f.Name, f.Help, f.Type.String()),
		gpuLevel: lv == fieldid.LevelGPU || lv == fieldid.LevelNone}
	if len(f.Stats) == 0 {
		return m
	}
	s := &p.slots[si]
	s.span = int64(win)
	s.ringCap = max(s.ringCap, window.CapacityFor(win, s.interval))
	m.windowName, m.samplesName = f.Name+"_window", f.Name+"_window_samples"
	m.windowHelp = "Window statistics of " + f.Name + " over the last " + win.String() + ", by stat."
	m.samplesHelp = "Samples of " + f.Name + " in the last " + win.String() + " window."
	m.windowHeader = familyHeader(m.windowName, m.windowHelp, "gauge")
	m.samplesHeader = familyHeader(m.samplesName, m.samplesHelp, "gauge")
	return m
}

// groupSlots makes one source group per distinct interval, shortest first,
// each field once; the health slot asks for health checks instead of a
// field.
func (p *plan) groupSlots() {
	byInterval := map[time.Duration]int{}
	for _, s := range p.slots {
		gi, ok := byInterval[s.interval]
		if !ok {
			gi = len(p.groups)
			byInterval[s.interval] = gi
			p.groups = append(p.groups, source.Group{Interval: s.interval})
		}
		if s.id == fieldid.ExpGPUHealthStatus {
			p.groups[gi].Health = true
			continue
		}
		p.groups[gi].Fields = append(p.groups[gi].Fields, source.FieldFor(p.set.Fields, s.id))
	}
	sort.SliceStable(p.groups, func(i, j int) bool { return p.groups[i].Interval < p.groups[j].Interval })
}

func familyHeader(name, help, typ string) string {
	return "# HELP " + name + " " + escapeHelp(help) + "\n# TYPE " + name + " " + typ + "\n"
}
