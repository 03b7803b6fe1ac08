// Package engine samples a source in the background, each field group at its
// watch interval, into bounded per-series buffers, and renders snapshots of
// them as Prometheus exposition. A scrape never calls the source.
package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/clock"
	"github.com/gpuscope/gpuscope/internal/engine/insight"
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
	// OldNamespace uses dcgm-exporter 1.x label names (its -o): uuid for
	// UUID, pod_name, pod_namespace and container_name for pod, namespace
	// and container.
	OldNamespace bool
	// ReplaceBlanksInModelName turns the spaces of modelName into dashes
	// (dcgm-exporter's --replace-blanks-in-model-name).
	ReplaceBlanksInModelName bool
	// Insight is the workload insight metrics (insight.go).
	Insight InsightOptions
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
	if opts.Now == nil {
		opts.Now = time.Now
	}
	ins, err := opts.Insight.checked()
	if err != nil {
		return nil, fmt.Errorf("engine: insight window %w", err)
	}
	opts.Insight = ins
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
	e.plan = newPlan(opts.Counters, opts.DefaultInterval, opts.Window, opts.ClockEventsWindow, newInsightPlan(opts.Insight))
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
