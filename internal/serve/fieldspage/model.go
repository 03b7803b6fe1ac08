package fieldspage

import (
	"html/template"
	"time"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/cost"
)

// modelMaxAge is how long one parse of the exposition prices the pages
// asked for: a page shows costs and values a second old at most, and a
// burst of requests parses the exposition (several megabytes on a large
// node) once instead of once each.
const modelMaxAge = time.Second

// model is what a page shows besides the selection: the node's shape from
// the exposition, what it costs now, and what the node knows of each field.
// It is never changed once built, so requests share it.
type model struct {
	at      time.Time
	running *counters.Set
	fields  []counters.Field
	node    cost.Node
	gpus    int
	base    cost.Family
	now     cost.Family
	unsup   map[string][]string
	latest  map[string]string
	sparks  map[string]template.HTML
}

// model returns the model of the exposition now, built at most once per
// modelMaxAge and per running counters file; requests that ask while it is
// built wait for it rather than build their own.
func (h *Handler) model() *model {
	h.modelMu.Lock()
	defer h.modelMu.Unlock()
	set := h.runningSet()
	now := h.opts.Now()
	if m := h.cached; m != nil && m.running == set && now.Sub(m.at) < modelMaxAge && !now.Before(m.at) {
		return m
	}
	h.cached = h.buildModel(set, now)
	return h.cached
}

func (h *Handler) buildModel(set *counters.Set, now time.Time) *model {
	var running []counters.Field
	if set != nil {
		running = set.Fields
	}
	var body []byte
	if h.opts.Exposition != nil {
		body = h.opts.Exposition()
	}
	x, err := cost.Parse(body, nil)
	if err != nil {
		h.opts.Log.WithError(err).Warn("The exposition does not parse; the page prices the fields without it")
	}
	m := &model{at: now, running: set, fields: running, node: cost.NodeOf(x, h.opts.Window)}
	m.gpus = h.assumeEntities(&m.node)
	names := make([]string, len(running))
	for i, f := range running {
		names[i] = f.Name
	}
	m.base, m.now = x.Besides(names), x.Total()
	m.unsup, m.latest = unsupportedGPUs(x), latestValues(x)
	m.sparks = h.sparklines(running)
	return m
}

func (h *Handler) runningSet() *counters.Set {
	if h.opts.Running == nil {
		return nil
	}
	return h.opts.Running()
}
