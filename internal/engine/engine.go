// Package engine samples a source in the background, each field group at its
// watch interval, into bounded per-series buffers, and renders snapshots of
// them as Prometheus exposition. A scrape never calls the source.
package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/clock"
	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/engine/insight"
	"github.com/gpuscope/gpuscope/internal/engine/nhist"
	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/source"
)

// Options configure an Engine.
type Options struct {
	Source   source.Source
	Counters *counters.Set
	// DefaultInterval is the watch interval of fields whose CSV line gives
	// none (dcgm-exporter's --collect-interval).
	DefaultInterval time.Duration
	// Window is the span of the window statistics.
	Window time.Duration
	// XIDWindow and ClockEventsWindow are the spans of dcgm-exporter's
	// DCGM_EXP_XID_ERRORS_COUNT and DCGM_EXP_CLOCK_EVENTS_COUNT.
	XIDWindow, ClockEventsWindow time.Duration
	// WindowOption and ClockEventsWindowOption are what the caller's
	// configuration calls Window and ClockEventsWindow, for messages;
	// "window" and "clock-events count window" when empty.
	WindowOption, ClockEventsWindowOption string
	// ClockEventsPeriod is the sampling period DCGM_EXP_CLOCK_EVENTS_COUNT
	// counts at: dcgm-exporter reads the field every --collect-interval
	// (30 s by default), so its count is in samples of that period. Each
	// period of the window with the bit set in its last sample counts one,
	// whatever the field's own interval; 0 counts every sample.
	ClockEventsPeriod time.Duration
	Hostname          string
	// HostnameLabel names the host label: "Hostname" (the default) as every
	// released dcgm-exporter, or "hostname" as its main branch since #655.
	HostnameLabel string
	Enrichers     []enrich.Enricher
	Log           *logrus.Entry
	// Now is the clock used for staleness and windows; time.Now when nil.
	Now func() time.Time

	// ComputeInstances exports MIG compute instances (GPU_CI_ID) as well;
	// dcgm-exporter never does, so they are left out unless asked for.
	ComputeInstances bool
	// Select keeps the entities the device options (-d, -s, -p) ask for;
	// nil keeps all. Samples of the others are dropped.
	Select func([]*source.Entity) []*source.Entity
	// LabelOptions names, by label name, the option that adds the label
	// (labelbudget.ExtraOption for the pod labels), so that a label-budget
	// error says what to drop.
	LabelOptions map[string]string
	// NoHostname leaves the Hostname label out, as dcgm-exporter's -n did
	// before 4.0.0; no flag sets it, since dcgm-exporter 4.x ignores -n.
	NoHostname bool
	// OldNamespace uses dcgm-exporter 1.x label names (its -o): uuid for
	// UUID, pod_name, pod_namespace and container_name for pod, namespace
	// and container.
	OldNamespace bool
	// ReplaceBlanksInModelName turns the spaces of modelName into dashes
	// (dcgm-exporter's --replace-blanks-in-model-name).
	ReplaceBlanksInModelName bool
	// Insight turns on the workload insight metrics (step period, stalls,
	// bound classes), computed in the background over InsightWindow
	// (DefaultInsightWindow when 0). It watches the profiling fields they
	// need at 100 ms, whether the counters file lists them or not.
	Insight       bool
	InsightWindow time.Duration
	// Clock times the sampling loops; the wall clock when nil.
	Clock clock.Clock
	// NoNativeHistograms leaves out the native histogram of every field
	// with window statistics (NativeHistograms returns none).
	NoNativeHistograms bool
	// Processes exports a series per GPU process (procs.go).
	Processes ProcessOptions
}

// oldNamespaceLabels are dcgm-exporter 1.x's names of the pod labels
// (internal/pkg/transformation/const.go: oldPodAttribute and siblings).
var oldNamespaceLabels = map[string]string{"pod": "pod_name", "namespace": "pod_namespace", "container": "container_name"}

// Engine owns the sampling loops and the series store.
type Engine struct {
	opts Options
	log  *logrus.Entry
	src  source.Source
	enr  []enricherLabels
	// copiesDropped counts the series copies left out at the last relabel
	// (maxLabelCopies); copiesLogged says it was logged once.
	copiesDropped atomic.Int64
	copiesLogged  bool

	// collectMu serialises Collect calls and Watch, as the source contract
	// promises.
	collectMu sync.Mutex

	// protoLabels keeps the protobuf encoding of the label strings the
	// render writes, between renders; writers read it without a lock.
	protoLabels protoLabelCache

	// runMu guards the running loops and the reload sequence.
	runMu   sync.Mutex
	cancel  context.CancelFunc
	loops   sync.WaitGroup
	baseCtx context.Context

	mu    sync.RWMutex // guards everything below
	plan  *plan
	byPtr map[*source.Entity]*entityState
	// byPtrCache answers byPtr for every sample of a batch.
	byPtrCache entityCache
	byKey      map[string]*entityState
	order      []*entityState
	status     source.Status
	sampled    bool
	statusAt   time.Time
	raw        rawState

	m selfMetrics
	// col is the outcome of each field group's latest collection.
	col collectStats
	// splitter, when an enricher shares out fields among its rows.
	splitter *splitter
	// healthOnly are the GPUs -d leaves out, kept for the health family
	// only (healthPtr finds them by the source's pointer); healthOrder is
	// order and them, sorted.
	healthOnly  []*entityState
	healthPtr   map[*source.Entity]*entityState
	healthOrder []*entityState

	// proc is the state of the process list (procs.go).
	proc procState

	// insMu serialises insight computations; the scratch below is theirs.
	insMu       sync.Mutex
	insWork     []*insightWork
	insAnalyzer insight.Analyzer
}

type enricherLabels struct {
	e     enrich.Enricher
	names []string
}

// Defaults of the windows: the window statistics' span, and dcgm-exporter's
// span of the XID and clock-event counts.
const (
	DefaultWindow      = 15 * time.Second
	DefaultEventWindow = 5 * time.Minute
)

// New checks the options and builds an engine; Start begins sampling.
func New(opts Options) (*Engine, error) {
	if opts.Source == nil {
		return nil, errors.New("engine: no source")
	}
	if opts.Counters == nil || len(opts.Counters.Fields) == 0 {
		return nil, errors.New("engine: no enabled field in the counters file")
	}
	if opts.DefaultInterval < counters.MinInterval {
		return nil, fmt.Errorf("engine: collect interval %s is below the minimum %s", opts.DefaultInterval, counters.MinInterval)
	}
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	if opts.XIDWindow <= 0 {
		opts.XIDWindow = DefaultEventWindow
	}
	if opts.ClockEventsWindow <= 0 {
		opts.ClockEventsWindow = DefaultEventWindow
	}
	if opts.WindowOption == "" {
		opts.WindowOption = "window"
	}
	if opts.ClockEventsWindowOption == "" {
		opts.ClockEventsWindowOption = "clock-events count window"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.InsightWindow <= 0 {
		opts.InsightWindow = DefaultInsightWindow
	}
	if opts.Insight {
		if err := CheckInsightWindow(opts.InsightWindow); err != nil {
			return nil, fmt.Errorf("engine: insight window %w", err)
		}
	}
	if opts.HostnameLabel == "" {
		opts.HostnameLabel = DefaultHostnameLabel
	}
	if err := opts.Processes.check(); err != nil {
		return nil, err
	}
	opts.Clock = clock.Or(opts.Clock)
	if opts.Log == nil {
		opts.Log = logrus.NewEntry(logrus.StandardLogger())
	}
	e := &Engine{
		opts:  opts,
		log:   opts.Log,
		src:   opts.Source,
		byPtr: map[*source.Entity]*entityState{},
		byKey: map[string]*entityState{},
		m:     newSelfMetrics(),
	}
	for _, en := range opts.Enrichers {
		names := en.LabelNames()
		if opts.OldNamespace {
			names = append([]string(nil), names...)
			for i, n := range names {
				if old, ok := oldNamespaceLabels[n]; ok {
					names[i] = old
				}
			}
		}
		e.enr = append(e.enr, enricherLabels{e: en, names: names})
	}
	e.splitter = newSplitter(e.enr)
	e.plan = newPlan(opts.Counters, opts.DefaultInterval, opts.Window, opts.ClockEventsWindow, newInsightPlan(opts.Insight, opts.InsightWindow))
	planHistograms(e.plan, !opts.NoNativeHistograms)
	if err := e.checkLabelBudget(e.plan); err != nil {
		return nil, err
	}
	if err := checkWindow(e.plan, &opts); err != nil {
		return nil, err
	}
	return e, nil
}

// checkLabelBudget refuses a plan whose widest series could carry more
// labels than a remote store accepts, naming the counters file.
func (e *Engine) checkLabelBudget(p *plan) error {
	return shapeOf(&e.opts, p.set, e.enr).Check()
}

// Start watches the fields and starts one sampling loop per interval. A
// source that refuses the watch is an error; later failures are not.
func (e *Engine) Start(ctx context.Context) error {
	e.runMu.Lock()
	defer e.runMu.Unlock()
	e.baseCtx = ctx
	if err := e.open(); err != nil {
		return err
	}
	e.startLoops()
	go e.housekeeping(ctx)
	return nil
}

// Stop ends the sampling loops and waits for them.
func (e *Engine) Stop() {
	e.runMu.Lock()
	defer e.runMu.Unlock()
	e.stopLoops()
}

// Reload swaps in a new counters file. The series of fields that stay keep
// their values and windows, so /metrics shows no gap. When the source refuses
// the new watch, the old set is watched again and keeps running.
func (e *Engine) Reload(set *counters.Set) error {
	if set == nil || len(set.Fields) == 0 {
		return errors.New("reload: no enabled field")
	}
	e.runMu.Lock()
	defer e.runMu.Unlock()
	np := newPlan(set, e.opts.DefaultInterval, e.opts.Window, e.opts.ClockEventsWindow, newInsightPlan(e.opts.Insight, e.opts.InsightWindow))
	planHistograms(np, !e.opts.NoNativeHistograms)
	if err := e.checkLabelBudget(np); err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	if err := checkWindow(np, &e.opts); err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	e.stopLoops()
	e.collectMu.Lock()
	err := e.src.Watch(np.groups)
	if err != nil {
		if rerr := e.src.Watch(e.plan.groups); rerr != nil {
			e.log.WithError(rerr).Error("Re-watching the previous counters after a refused reload failed")
		}
	}
	e.collectMu.Unlock()
	if err != nil {
		e.startLoops()
		return fmt.Errorf("reload: source %s refused the new fields: %w", e.src.Name(), err)
	}
	e.mu.Lock()
	old := e.plan
	e.applyDemandLocked(np)
	e.plan = np
	for _, es := range e.byKey {
		es.resize(np, old)
		es.enrichGen = ^uint64(0)
	}
	for _, es := range e.healthOnly {
		es.resize(np, old)
	}
	e.mu.Unlock()
	e.refreshEntities()
	e.startLoops()
	return nil
}

// Loops is how many background loops wait on Options.Clock between their
// runs once Start has returned: one per field group, the insight loop when
// insight is on, the process loop when per-process series are. Each arms
// one timer while it waits, so a driver of a fake clock that finds this many
// armed knows that every loop has finished what its last move started.
func (e *Engine) Loops() int {
	e.mu.RLock()
	defer e.mu.RUnlock()
	n := len(e.plan.groups)
	if e.plan.insight.on {
		n++
	}
	if e.opts.Processes.Enabled {
		n++
	}
	return n
}

func (e *Engine) startLoops() {
	ctx, cancel := context.WithCancel(e.baseCtx)
	e.cancel = cancel
	e.mu.RLock()
	groups := e.plan.groups
	e.mu.RUnlock()
	for gi, g := range groups {
		e.loops.Add(1)
		go e.runGroup(ctx, gi, g.Interval)
	}
	if ins := e.plan.insight; ins.on {
		e.loops.Add(1)
		go e.runInsight(ctx, ins.every)
	}
	e.startProcesses(ctx)
}

func (e *Engine) stopLoops() {
	if e.cancel != nil {
		e.cancel()
		e.loops.Wait()
		e.cancel = nil
	}
}

func (e *Engine) runGroup(ctx context.Context, gi int, interval time.Duration) {
	defer e.loops.Done()
	b := &batch{}
	obs := e.m.collectDuration.WithLabelValues(interval.String())
	clk := e.opts.Clock
	next := clk.Now()
	failing := false
	for {
		start := time.Now()
		err := e.collectOnce(ctx, gi, b)
		obs.Observe(time.Since(start).Seconds())
		if ctx.Err() == nil {
			e.col.note(gi, start, time.Since(start), err)
		}
		switch {
		case err != nil && ctx.Err() == nil:
			if !failing {
				e.log.WithError(err).WithFields(logrus.Fields{"source": e.src.Name(), "interval": interval}).Warn("Collecting a field group failed; retrying at each interval")
			}
			failing = true
		case err == nil && failing:
			e.log.WithFields(logrus.Fields{"source": e.src.Name(), "interval": interval}).Info("Collecting the field group works again")
			failing = false
		}
		// The next read is due an interval after the previous one was;
		// reads missed while a slow one ran are dropped, as by a ticker.
		now := clk.Now()
		for !next.After(now) {
			next = next.Add(interval)
		}
		t := clk.NewTimer(next.Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// collectOnce reads one group into b and applies it. A change of the
// source's entities is handled here and is not an error.
func (e *Engine) collectOnce(ctx context.Context, gi int, b *batch) error {
	err := e.collectBatch(ctx, gi, b)
	if errors.Is(err, source.ErrEntitiesChanged) {
		e.log.WithField("source", e.src.Name()).Info("Source entities changed; refreshing")
		e.refreshEntities()
		// A reconnected source has samples waiting: read them now rather
		// than an interval later, so series come back as soon as they can.
		if err = e.collectBatch(ctx, gi, b); errors.Is(err, source.ErrEntitiesChanged) {
			e.refreshEntities()
			return nil
		}
	}
	return err
}

func (e *Engine) collectBatch(ctx context.Context, gi int, b *batch) error {
	e.collectMu.Lock()
	err := e.src.Collect(ctx, gi, b)
	e.collectMu.Unlock()
	e.apply(b)
	b.reset()
	return err
}

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
				sv.hist = nhist.New(*h)
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

// refreshEntities re-reads the source's entity list. States are kept by
// entity key, so a reconnect or a switch between DCGM and NVML keeps the
// series of the entities both see.
func (e *Engine) refreshEntities() {
	list := e.src.Entities()
	if !e.opts.ComputeInstances {
		kept := list[:0:0]
		for _, ent := range list {
			if ent.Kind != source.ComputeInstance {
				kept = append(kept, ent)
			}
		}
		list = kept
	}
	all := list
	if e.opts.Select != nil {
		list = e.opts.Select(list)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.keepHealthOnly(all, list)
	byPtr := make(map[*source.Entity]*entityState, len(list))
	byKey := make(map[string]*entityState, len(list))
	for _, ent := range list {
		k := ent.Key()
		es := e.byKey[k]
		if es == nil {
			es = newEntityState(ent, e.plan)
		} else {
			es.ent = *ent
		}
		es.enrichGen = ^uint64(0)
		byPtr[ent] = es
		byKey[k] = es
	}
	e.byPtr, e.byKey = byPtr, byKey
	e.byPtrCache.reset()
	e.order = e.order[:0]
	for _, es := range byKey {
		e.order = append(e.order, es)
	}
	sort.Slice(e.order, func(i, j int) bool { return entityLess(&e.order[i].ent, &e.order[j].ent) })
	e.healthOrder = append(append(e.healthOrder[:0], e.order...), e.healthOnly...)
	sort.Slice(e.healthOrder, func(i, j int) bool { return entityLess(&e.healthOrder[i].ent, &e.healthOrder[j].ent) })
	e.relabelLocked()
}

// keepHealthOnly keeps a state for each GPU the device options (-d) leave
// out, for DCGM_EXP_GPU_HEALTH_STATUS and DCGM_EXP_P2P_STATUS alone:
// dcgm-exporter's health and P2P collectors list every GPU whatever -d says
// (internal/pkg/collector/gpu_health_collector.go,
// NewGPUHealthStatusCollector, and p2p_status_collector.go,
// NewP2PStatusCollector: deviceinfo with MajorRange -1). Called with mu
// held.
func (e *Engine) keepHealthOnly(all, selected []*source.Entity) {
	old := make(map[string]*entityState, len(e.healthOnly))
	for _, es := range e.healthOnly {
		old[es.key] = es
	}
	e.healthOnly = e.healthOnly[:0]
	clear(e.healthPtr)
	if (e.plan.expHealth == nil && e.plan.expP2P == nil) || len(all) == len(selected) {
		return
	}
	kept := make(map[*source.Entity]bool, len(selected))
	for _, ent := range selected {
		kept[ent] = true
	}
	for _, ent := range all {
		if ent.Kind != source.GPU || kept[ent] {
			continue
		}
		es := old[ent.Key()]
		if es == nil {
			es = newEntityState(ent, e.plan)
		} else {
			es.ent = *ent
		}
		if e.healthPtr == nil {
			e.healthPtr = map[*source.Entity]*entityState{}
		}
		e.healthPtr[ent] = es
		e.healthOnly = append(e.healthOnly, es)
	}
}

func entityLess(a, b *source.Entity) bool {
	if a.GPU != b.GPU {
		return a.GPU < b.GPU
	}
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	if a.Switch != b.Switch {
		return a.Switch < b.Switch
	}
	if a.GPUInstanceID != b.GPUInstanceID {
		return a.GPUInstanceID < b.GPUInstanceID
	}
	if a.ComputeInstanceID != b.ComputeInstanceID {
		return a.ComputeInstanceID < b.ComputeInstanceID
	}
	if a.CPU != b.CPU {
		return a.CPU < b.CPU
	}
	if a.CPUCore != b.CPUCore {
		return a.CPUCore < b.CPUCore
	}
	return a.Link < b.Link
}

// relabelLocked rebuilds the label strings whose inputs changed.
func (e *Engine) relabelLocked() {
	var gen uint64
	for _, el := range e.enr {
		gen += el.e.Generation()
	}
	gpus := map[int]*entityState{}
	for _, es := range e.order {
		if es.ent.Kind == source.GPU {
			gpus[es.ent.GPU] = es
		}
	}
	for _, es := range e.order {
		es.migParent = false
	}
	for _, es := range e.order {
		es.parent = nil
		if es.ent.Kind != source.GPU {
			es.parent = gpus[es.ent.GPU]
		}
		if es.ent.Kind == source.GPUInstance && es.parent != nil {
			es.parent.migParent = true
		}
	}
	shareHostText(e.order, gpus, e.plan)
	for _, es := range e.healthOnly {
		es.parent = nil
		es.labels, es.labelMap = buildLabels(es, nil, e.plan, &e.opts, e.enr)
	}
	dropped := 0
	for _, es := range e.order {
		es.labels, es.labelMap = buildLabels(es, es.parent, e.plan, &e.opts, e.enr)
		es.split = buildSplitLabels(es, es.parent, e.plan, &e.opts, e.enr, e.splitter)
		es.enrichGen = gen
		if es.droppedCopies > 0 && !e.copiesLogged {
			e.copiesLogged = true
			e.log.WithFields(logrus.Fields{"entity": es.key, "copies": len(es.labels), "dropped": es.droppedCopies}).
				Warn(copiesDroppedLog)
		}
		dropped += es.droppedCopies
	}
	e.copiesDropped.Store(int64(dropped))
}

// copiesDroppedLog is said once per process: which entities lose copies
// changes with every pod, and gpuscope_label_copies_dropped follows it.
const copiesDroppedLog = "More pods or HPC jobs share a GPU than it gets copies of its series; the others are left out " +
	"(logged once; gpuscope_label_copies_dropped counts them)"

// housekeeping polls the source's status and the enrichers' generations, so
// that the scrape path reads both from memory.
func (e *Engine) housekeeping(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.pollStatus()
			e.mu.Lock()
			var gen uint64
			for _, el := range e.enr {
				gen += el.e.Generation()
			}
			if len(e.order) > 0 && e.order[0].enrichGen != gen {
				e.relabelLocked()
			}
			e.mu.Unlock()
		}
	}
}

func (e *Engine) pollStatus() {
	st := e.src.Status()
	e.mu.Lock()
	defer e.mu.Unlock()
	lost := make(map[string]bool, len(st.Lost))
	for _, k := range st.Lost {
		lost[k] = true
	}
	for _, es := range e.order {
		es.lost = lost[es.key]
	}
	e.status = st
	e.statusAt = e.opts.Now()
}

// Ready says whether the source is up and the first sample is in, and why
// not when it is not.
func (e *Engine) Ready() (bool, string) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	switch {
	case !e.status.Up && e.status.Err != nil:
		return false, fmt.Sprintf("source %s is down: %v", e.sourceName(), e.status.Err)
	case !e.status.Up:
		return false, fmt.Sprintf("source %s is down", e.sourceName())
	case !e.sampled:
		return false, "waiting for the first sample"
	}
	return true, fmt.Sprintf("source %s is up", e.sourceName())
}

func (e *Engine) sourceName() string {
	if e.status.Active != "" {
		return e.status.Active
	}
	return e.src.Name()
}

// Entities returns copies of the entities the engine currently knows, for
// enrichers that map them (pod attribution) without calling the source.
func (e *Engine) Entities() []*source.Entity {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]*source.Entity, len(e.order))
	for i, es := range e.order {
		ent := es.ent
		out[i] = &ent
	}
	return out
}

// Status returns the source status as last polled.
func (e *Engine) Status() source.Status {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.status
}
