package engine

import (
	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/engine/labelbudget"
	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/source"
)

// SeriesShape is what decides the labels the engine writes on a series. It
// is known before the engine and its enrichers exist, so that startup can
// size the pod-label allowlist with the same count the engine checks.
type SeriesShape struct {
	// Counters is the counters file; its label-type fields are labels.
	Counters *counters.Set
	// EnricherLabels are the label names the enrichers write
	// (enrich.Enricher.LabelNames), dcgm-exporter 1.x names under OldNamespace.
	EnricherLabels []string
	// ExtraLabels is the most labels enrichers add under names learnt at run
	// time (enrich.ExtraLabeler.MaxExtraLabels: the pod labels).
	ExtraLabels int
	// ComputeInstances, OldNamespace and Insight are the Options of the
	// same names; Processes is Options.Processes.Enabled.
	ComputeInstances, OldNamespace, Insight, Processes bool
	// HostnameLabel names the host label; "" when none is written.
	HostnameLabel string
	// Options names, by label name, the option that adds it
	// (labelbudget.ExtraOption for the pod labels), for the error's advice.
	Options map[string]string
}

// shapeOf is the shape of an engine's series under opts and enrichers.
func shapeOf(opts *Options, set *counters.Set, enr []enricherLabels) SeriesShape {
	s := SeriesShape{Counters: set, ComputeInstances: opts.ComputeInstances, OldNamespace: opts.OldNamespace,
		Insight: opts.Insight.Enabled, Processes: opts.Processes.Enabled, Options: opts.LabelOptions}
	if writesHostname(opts, layoutOf(set)) {
		s.HostnameLabel = opts.HostnameLabel
	}
	for _, el := range enr {
		s.EnricherLabels = append(s.EnricherLabels, el.names...)
		if xl, ok := el.e.(enrich.ExtraLabeler); ok {
			s.ExtraLabels += xl.MaxExtraLabels()
		}
	}
	return s
}

// Count is the one count of the labels on the widest series of entity e's
// kind: the names the engine writes (identity, label-type fields,
// enricher labels), the run-time labels, the most a family of that kind
// adds, and those the store adds.
func (s SeriesShape) Count(e *source.Entity) labelbudget.Count {
	c := labelbudget.Count{Kind: kindName(e), Extra: s.ExtraLabels, Family: s.familyLabels(e), Options: s.Options}
	for _, l := range identityOf(e, s.OldNamespace, layoutOf(s.Counters)) {
		c.Identity = append(c.Identity, l.name)
	}
	if s.HostnameLabel != "" {
		c.Identity = append(c.Identity, s.HostnameLabel)
	}
	if s.Counters != nil {
		c.File = s.Counters.File
		if writesLabelFields(e, s.Counters.Layout) {
			for _, f := range labelFieldsOf(s.Counters) {
				c.LabelFields = append(c.LabelFields, f.Name)
			}
		}
	}
	c.Enricher = s.EnricherLabels
	return c
}

// Widest is the Count of the widest series any entity kind this shape
// exports can carry.
func (s SeriesShape) Widest() labelbudget.Count {
	var w labelbudget.Count
	for _, e := range s.Kinds() {
		if c := s.Count(&e); w.Kind == "" || c.Stored() > w.Stored() {
			w = c
		}
	}
	return w
}

// Check fails when a series could carry more labels than a remote store
// accepts by default, naming its kind, its labels and what to drop.
func (s SeriesShape) Check() error { return s.Widest().Check() }

// Kinds lists one entity of every kind the engine exports under this
// shape: compute instances only with ComputeInstances.
func (s SeriesShape) Kinds() []source.Entity {
	gpu := source.NewGPU(0, "", "", "")
	gi := gpu
	gi.Kind, gi.GPUInstanceID = source.GPUInstance, 0
	ci := gi
	ci.Kind, ci.ComputeInstanceID = source.ComputeInstance, 0
	link := gpu
	link.Kind, link.Link = source.NVLink, 0
	sw := source.Entity{Kind: source.NvSwitch, GPU: -1, GPUInstanceID: -1, ComputeInstanceID: -1, Link: -1, Switch: 0, CPU: -1, CPUCore: -1}
	swLink := sw
	swLink.Kind, swLink.Link = source.NVLink, 0
	out := []source.Entity{gpu, gi}
	if s.ComputeInstances {
		out = append(out, ci)
	}
	return append(out, link, swLink, sw, source.NewCPU(0, -1), source.NewCPU(0, 0))
}

// kindName names an entity's kind in a budget error.
func kindName(e *source.Entity) string {
	switch e.Kind {
	case source.GPUInstance:
		return "MIG GPU instance"
	case source.ComputeInstance:
		return "MIG compute instance"
	case source.NVLink:
		if e.Switch >= 0 {
			return "NvSwitch link"
		}
		return "GPU NVLink"
	case source.NvSwitch:
		return "NvSwitch"
	case source.CPU:
		return "CPU"
	case source.CPUCore:
		return "CPU core"
	}
	return "GPU"
}

// writesLabelFields says whether label-type fields go on an entity's
// series: on every kind, as dcgm-exporter writes them (toCPUMetric and
// toSwitchMetric read them like toMetric; CPUs carry the host-wide ones),
// except in nvidia_gpu_exporter's layout, where they label
// nvidia_smi_gpu_info alone.
func writesLabelFields(_ *source.Entity, layout counters.Layout) bool {
	return layout != counters.LayoutNvidiaGPUExporter
}

// layoutOf is the label layout of a counters set; dcgm-exporter's without one.
func layoutOf(set *counters.Set) counters.Layout {
	if set == nil {
		return counters.LayoutDCGMExporter
	}
	return set.Layout
}

// familyLabels is the most labels a family of the counters file adds to a
// series of e's kind: stat on window statistics (any kind); on GPUs and
// their MIG instances two (err_code and err_msg on the XID field, xid and
// xid_description on gpuscope's XID counts, clock_event or xid with
// window_size_in_ms on dcgm-exporter's window counts, health_watch and
// health_error_code, peer_gpu and link_status, pid and process_name on the
// per-process families) or one (clock_event, bound). A process's series
// carry its pod's labels, which are among the enricher labels counted,
// and none of the device's other enricher labels.
func (s SeriesShape) familyLabels(e *source.Entity) int {
	n := 0
	if s.Counters == nil {
		return n
	}
	has := map[uint16]bool{}
	for _, f := range s.Counters.Fields {
		has[f.ID] = true
		if len(f.Stats) > 0 {
			n = 1
		}
	}
	if e.Kind != source.GPU && e.Kind != source.GPUInstance && e.Kind != source.ComputeInstance {
		return n
	}
	if has[fieldid.XIDErrors] || has[fieldid.ExpXIDErrorsCount] || has[fieldid.ExpClockEventsCount] ||
		has[fieldid.ExpGPUHealthStatus] || has[fieldid.ExpP2PStatus] {
		return 2
	}
	if s.Processes && e.Kind != source.ComputeInstance {
		return 2
	}
	if has[fieldid.ClocksEventReasons] || s.Insight {
		return 1
	}
	return n
}

// labelFieldsOf are the label-type fields of set, each field once under the
// first name it is listed by (a legacy and a current name read one field).
func labelFieldsOf(set *counters.Set) []counters.Field {
	var out []counters.Field
	seen := map[uint16]bool{}
	for _, f := range set.Fields {
		if f.Type != counters.Label || seen[f.ID] {
			continue
		}
		if read, _ := source.ReadFor(f.ID); read != f.ID {
			continue
		}
		seen[f.ID] = true
		out = append(out, f)
	}
	return out
}
