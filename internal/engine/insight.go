package engine

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/engine/insight"
	"github.com/gpuscope/gpuscope/internal/engine/window"
	"github.com/gpuscope/gpuscope/source"
)

// The fields the insight metrics read, by their generated ID constants: a
// field renamed or dropped from the table fails to compile here.
var (
	insSM     = insightField(fieldid.ProfSMActive)
	insTensor = insightField(fieldid.ProfPipeTensorActive)
	insDRAM   = insightField(fieldid.ProfDRAMActive)
	insFP64   = insightField(fieldid.ProfPipeFP64Active)
	insFP32   = insightField(fieldid.ProfPipeFP32Active)
	insFP16   = insightField(fieldid.ProfPipeFP16Active)
	insPCIeTX = insightField(fieldid.ProfPCIeTXBytes)
	insPCIeRX = insightField(fieldid.ProfPCIeRXBytes)
	insNVLTX  = insightField(fieldid.ProfNVLinkTXBytes)
	insNVLRX  = insightField(fieldid.ProfNVLinkRXBytes)
)

var insightRequired = []counters.FieldInfo{insSM, insTensor, insDRAM, insPCIeTX, insPCIeRX}

// insightRequiredMIG is what a MIG instance needs: its own activity. Its
// PCIe counters are the GPU's (DCGM reads them at the GPU level) and are not
// read (insight.Window.Instance).
var insightRequiredMIG = insightRequired[:3]

var insightFields = []counters.FieldInfo{insSM, insTensor, insDRAM, insFP64, insFP32, insFP16, insPCIeTX, insPCIeRX, insNVLTX, insNVLRX}

// firstBusField is the index in insightFields of the first bus rate (PCIe,
// then NVLink).
const firstBusField = 6

// insightField returns the catalog entry of a generated ID. The catalog is
// built from the same generated table, so a miss is a broken build of the
// table, caught by every engine test at package initialisation.
func insightField(id uint16) counters.FieldInfo {
	f, ok := counters.ByID(id)
	if !ok {
		panic("engine: field " + strconv.Itoa(int(id)) + " is not in the catalog")
	}
	return f
}

// DefaultInsightWindow is the span the insight metrics are computed over: 30 s
// at 100 ms holds 300 samples, a dozen steps of a typical training loop.
const DefaultInsightWindow = 30 * time.Second

// MaxInsightWindow is the longest insight window the rings of the insight
// fields, sampled every insightInterval, can hold (ringCapFor's sizing).
const MaxInsightWindow = time.Duration(window.MaxCapacity-2) * insightInterval

// insightInterval is the watch interval the insight fields need: a 2-second
// stall between steps must span many samples.
const insightInterval = counters.MinInterval

// MinInsightWindow is the shortest insight window: 20 samples.
const MinInsightWindow = 20 * insightInterval

// InsightOptions configure the workload insight metrics (step period,
// stalls, bound classes), computed in the background over Window. When
// Enabled, the engine watches the profiling fields they need at 100 ms,
// whether the counters file lists them or not.
type InsightOptions struct {
	Enabled bool
	// Window is the span they are computed over; DefaultInsightWindow when 0.
	Window time.Duration
}

// Check says why the options cannot be used: an enabled window too short
// for 20 samples, or longer than the rings hold, when no insight series
// would ever appear. The error starts with the window.
func (o InsightOptions) Check() error {
	_, err := o.checked()
	return err
}

// checked is o with its default window, or why it cannot be used.
func (o InsightOptions) checked() (InsightOptions, error) {
	if o.Window <= 0 {
		o.Window = DefaultInsightWindow
	}
	if !o.Enabled {
		return o, nil
	}
	d := o.Window
	if d > MaxInsightWindow {
		return o, fmt.Errorf("%s: longer than the rings hold; the largest that fits is %s (%d samples at %s)", d, MaxInsightWindow,
			int(MaxInsightWindow/insightInterval), insightInterval)
	}
	if d < MinInsightWindow {
		return o, fmt.Errorf("%s: the insight window must be at least %s (%d samples at %s)", d, MinInsightWindow,
			int(MinInsightWindow/insightInterval), insightInterval)
	}
	return o, nil
}

// LookBack is the longest span the engine's series look back over: the
// window statistics' window, or the insight window when it is longer.
// A manual clock samples that much at each move.
func (o Options) LookBack() time.Duration {
	ins, _ := o.Insight.checked()
	if !ins.Enabled {
		return o.Window
	}
	return max(o.Window, ins.Window)
}

// insightPlan is the plan's part for the insight metrics.
type insightPlan struct {
	on     bool
	window time.Duration
	// every is how often the background computation runs.
	every time.Duration
}

func newInsightPlan(o InsightOptions) insightPlan {
	if !o.Enabled {
		return insightPlan{}
	}
	win := o.Window
	every := win / 10
	if every < time.Second {
		every = time.Second
	}
	return insightPlan{on: true, window: win, every: every}
}

// insightState is the latest insight result of one GPU.
type insightState struct {
	has bool
	at  int64
	res insight.Result
	// stallsTotal counts the stall episodes; lastStall is the end of the
	// latest one counted, so overlapping windows count each once.
	stallsTotal uint64
	lastStall   int64
	// missing names the required fields the GPU does not support, once
	// known; supported is set once every required field answered.
	missing   string
	supported bool
}

// insightWork is the scratch memory of one GPU's computation, reused.
type insightWork struct {
	es  *entityState
	win insight.Window
	ok  bool
	// fresh is false when the GPU has no recent samples.
	fresh   bool
	missing []string
	known   bool
	ts      [10][]int64
	vals    [10][]float64
	tmp     []float64
	nvl     []float64
	// The result of the analysis, before it is stored.
	res  insight.Result
	ends []int64
}

// hasInsight says whether an entity gets insight series: a GPU, or a MIG GPU
// instance from its own profiling fields. A MIG GPU that its instances stand
// in for gets none of its own, as it gets no other series.
func hasInsight(es *entityState) bool {
	switch es.ent.Kind {
	case source.GPU:
		return !es.migParent
	case source.GPUInstance:
		return true
	}
	return false
}

// ComputeInsight computes the insight metrics of every GPU and MIG GPU
// instance from the rings.
// The background loop calls it every insight interval; tests and benchmarks
// that drive the engine with CollectAll call it themselves. It holds the
// store's read lock only while it copies the samples out.
func (e *Engine) ComputeInsight() {
	e.insMu.Lock()
	defer e.insMu.Unlock()
	e.mu.RLock()
	p := e.plan
	if !p.insight.on {
		e.mu.RUnlock()
		return
	}
	now := e.opts.Now().UnixNano()
	n := 0
	for _, es := range e.order {
		if !hasInsight(es) {
			continue
		}
		if n == len(e.insWork) {
			e.insWork = append(e.insWork, &insightWork{})
		}
		e.copyInsight(e.insWork[n], es, p, now)
		n++
	}
	e.mu.RUnlock()

	for i := 0; i < n; i++ {
		w := e.insWork[i]
		if w.ok {
			w.res = e.insAnalyzer.Analyze(&w.win)
			w.ends = append(w.ends[:0], w.res.StallEnds...)
			w.res.StallEnds = nil
		}
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	for _, w := range e.insWork[:n] {
		st := &w.es.ins
		st.missing, st.supported = strings.Join(w.missing, ","), w.known && len(w.missing) == 0
		if !w.ok {
			if !w.fresh {
				st.has = false
			}
			continue
		}
		for _, ts := range w.ends {
			if ts > st.lastStall {
				st.stallsTotal++
				st.lastStall = ts
			}
		}
		st.res, st.has, st.at = w.res, true, now
	}
	// The work items hold entity states only until the next computation.
	for _, w := range e.insWork[:n] {
		w.es = nil
	}
}

// copyInsight copies one GPU's insight samples into w, aligned on the SM
// signal's timestamps.
func (e *Engine) copyInsight(w *insightWork, es *entityState, p *plan, now int64) {
	w.es, w.ok, w.fresh, w.known = es, false, false, true
	w.missing = w.missing[:0]
	instance := es.ent.Kind == source.GPUInstance
	required := insightRequired
	if instance {
		required = insightRequiredMIG
	}
	for _, f := range required {
		si, ok := p.slotOf[f.ID]
		if !ok {
			w.missing = append(w.missing, f.Name)
			continue
		}
		switch es.vals[si].support {
		case supportNo:
			w.missing = append(w.missing, f.Name)
		case supportUnknown:
			w.known = false
		}
	}
	if len(w.missing) > 0 {
		return
	}
	smSlot := p.slotOf[insSM.ID]
	sm := es.vals[smSlot].ring
	if sm == nil {
		return
	}
	newest, ok := sm.Newest()
	if !ok || newest < now-int64(p.slots[smSlot].stale) {
		return
	}
	w.fresh = true
	since := newest - int64(p.insight.window)
	for i, f := range insightFields {
		w.ts[i], w.vals[i] = w.ts[i][:0], w.vals[i][:0]
		si, ok := p.slotOf[f.ID]
		if !ok || es.vals[si].ring == nil || (instance && i >= firstBusField) {
			// An instance's bus rates are not its own.
			continue
		}
		// One interval of slack: a source may stamp the fields of one read
		// a little apart.
		w.ts[i], w.vals[i] = es.vals[si].ring.AppendSince(since-int64(p.slots[si].interval), w.ts[i], w.vals[i])
	}
	ref := w.ts[0]
	interval := p.slots[smSlot].interval
	if min := int(p.insight.window/interval) / 2; len(ref) < min {
		return
	}
	win := &w.win
	win.Instance = instance
	win.Interval = interval.Seconds()
	win.TS = append(win.TS[:0], ref...)
	win.SM = append(win.SM[:0], w.vals[0]...)
	win.Pipe = align(win.Pipe[:0], ref, w.ts[1], w.vals[1])
	win.DRAM = align(win.DRAM[:0], ref, w.ts[2], w.vals[2])
	for k := 3; k <= 5; k++ {
		if len(w.ts[k]) == 0 {
			continue
		}
		// Pipe is the busiest of the tensor and FP pipes.
		w.tmp = align(w.tmp[:0], ref, w.ts[k], w.vals[k])
		for i := range win.Pipe {
			win.Pipe[i] = math.Max(win.Pipe[i], w.tmp[i])
		}
	}
	win.PCIeTX, win.PCIeRX, win.NVLink = win.PCIeTX[:0], win.PCIeRX[:0], nil
	if !instance {
		w.alignBuses(ref)
	}
	w.ok = true
}

// alignBuses fills the window's PCIe and NVLink rates, a whole GPU's.
func (w *insightWork) alignBuses(ref []int64) {
	win := &w.win
	win.PCIeTX = align(win.PCIeTX, ref, w.ts[firstBusField], w.vals[firstBusField])
	win.PCIeRX = align(win.PCIeRX, ref, w.ts[firstBusField+1], w.vals[firstBusField+1])
	if len(w.ts[firstBusField+2]) > 0 || len(w.ts[firstBusField+3]) > 0 {
		// NVLink is the busier of the two directions.
		w.nvl = align(w.nvl[:0], ref, w.ts[firstBusField+2], w.vals[firstBusField+2])
		w.tmp = align(w.tmp[:0], ref, w.ts[firstBusField+3], w.vals[firstBusField+3])
		for i := range w.nvl {
			w.nvl[i] = math.Max(w.nvl[i], w.tmp[i])
		}
		win.NVLink = w.nvl
	}
}

// align resamples a signal on the reference timestamps: each reference
// sample takes the signal's sample nearest in time (a source may stamp the
// fields of one read a little apart), or 0 when the signal has none.
func align(dst []float64, ref, ts []int64, vals []float64) []float64 {
	j := 0
	for _, t := range ref {
		for j+1 < len(ts) && ts[j+1] <= t {
			j++
		}
		k := j
		if k+1 < len(ts) && absDiff(ts[k+1], t) < absDiff(ts[k], t) {
			k++
		}
		v := 0.0
		if k < len(ts) {
			v = vals[k]
		}
		if math.IsNaN(v) {
			v = 0
		}
		dst = append(dst, v)
	}
	return dst
}

func absDiff(a, b int64) int64 {
	if a > b {
		return a - b
	}
	return b - a
}

// runInsight computes the insight metrics in the background until ctx ends,
// on the engine's clock, so that tests can move it.
func (e *Engine) runInsight(ctx context.Context, every time.Duration) {
	defer e.loops.Done()
	clk := e.opts.Clock
	for {
		t := clk.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
			e.ComputeInsight()
		}
	}
}

var boundTails = func() [insight.NumClasses]string {
	var t [insight.NumClasses]string
	for c := insight.Class(0); c < insight.NumClasses; c++ {
		t[c] = `,` + labelBound + `="` + c.String() + `"} `
	}
	return t
}()

// renderInsight writes the insight families from the last computation.
func (e *Engine) renderInsight(w *snapshotWriter, now int64) {
	p := e.plan
	if !p.insight.on {
		return
	}
	// A result older than the window is from a GPU that stopped answering.
	oldest := now - int64(p.insight.window)
	live := func(es *entityState) bool {
		return hasInsight(es) && es.ins.has && es.ins.at >= oldest
	}
	// perGPU writes a family of one sample per live GPU; value says whether
	// the GPU has one.
	perGPU := func(name, help, typ string, value func(es *entityState) (float64, bool)) {
		appendFamily(w, e.order, name, help, typ,
			func(w *snapshotWriter, es *entityState, labels string) {
				if !live(es) {
					return
				}
				v, ok := value(es)
				if !ok {
					return
				}
				w.sample(name, labels, "} ", v)
			})
	}
	perGPU("gpuscope_gpu_step_period_seconds",
		"Dominant period of SM activity (the training step) over the insight window, by autocorrelation; absent when the window shows no clear periodicity.", "gauge",
		func(es *entityState) (float64, bool) { return es.ins.res.Period, es.ins.res.Period > 0 })
	perGPU("gpuscope_gpu_step_period_confidence",
		"Autocorrelation of SM activity at the step period (0..1); the period is reported from 0.5.", "gauge",
		func(es *entityState) (float64, bool) { return round4(es.ins.res.Confidence), true })
	perGPU("gpuscope_gpu_stall_ratio",
		"Share of the busy span of the insight window in which SM activity fell below 0.1 between busy phases (data-loader and synchronisation stalls).", "gauge",
		func(es *entityState) (float64, bool) { return round4(es.ins.res.StallRatio), true })
	perGPU("gpuscope_gpu_stalls_total",
		"Stall episodes (SM activity below 0.1 for at least 200 ms between busy phases) since gpuscope started.", "counter",
		func(es *entityState) (float64, bool) { return float64(es.ins.stallsTotal), true })
	appendFamily(w, e.order, "gpuscope_gpu_bound_ratio",
		"Share of the insight window's samples bound by each class (compute, memory, communication, input, idle), by the rules of docs/insight.md.", "gauge",
		func(w *snapshotWriter, es *entityState, labels string) {
			if !live(es) {
				return
			}
			for c := insight.Class(0); c < insight.NumClasses; c++ {
				w.sample("gpuscope_gpu_bound_ratio", labels, boundTails[c], round4(es.ins.res.Bound[c]))
			}
		})
	appendFamily(w, e.order, "gpuscope_insight_supported",
		"1 when the GPU or MIG instance serves every profiling field the insight metrics need, 0 when it cannot (missing names them); its insight series are then absent.", "gauge",
		func(w *snapshotWriter, es *entityState, labels string) {
			if !hasInsight(es) || labels != es.labels[0] {
				return
			}
			head := `{gpu="` + strconv.Itoa(es.ent.GPU) + `",UUID="` + escapeLabel(es.ent.UUID) + `"`
			if es.ent.Kind == source.GPUInstance {
				head += `,` + giLabel.name + `="` + strconv.Itoa(es.ent.GPUInstanceID) + `"`
			}
			switch {
			case es.ins.missing != "":
				w.sample("gpuscope_insight_supported", head, `,missing="`+es.ins.missing+`"} `, 0)
			case es.ins.supported:
				w.sample("gpuscope_insight_supported", head, "} ", 1)
			}
		})
}

// round4 keeps four decimals: the ratios are shares of a few hundred
// samples, and more digits would only churn the exposition.
func round4(v float64) float64 { return math.Round(v*1e4) / 1e4 }
