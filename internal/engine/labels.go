package engine

import (
	"strconv"
	"strings"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/source"
)

// maxLabelCopies bounds the copies of one entity's series that enricher rows
// may ask for (jobs x pods); rows past it are left out.
const maxLabelCopies = 64

// DefaultHostnameLabel is the name of the host label: every released
// dcgm-exporter (up to 4.8.2) calls it Hostname.
const DefaultHostnameLabel = "Hostname"

// labelPair is one label of a series, its value not yet escaped.
type labelPair struct{ name, value string }

// buildLabels renders the label sets of an entity: its identity labels in
// dcgm-exporter's layout for its kind, the label-type fields (taken from the
// parent GPU for MIG instances and GPU links), and the enrichers' labels, one
// set per combination of the enrichers' rows. It also returns the first
// set's labels by name, which the samples API shows.
func buildLabels(es *entityState, parent *entityState, p *plan, opts *Options, enr []enricherLabels) ([]string, map[string]string) {
	sets := [][]labelPair{baseLabels(es, parent, p, opts)}
	// asked counts the copies the rows ask for, so that those past
	// maxLabelCopies are counted and not only left out.
	asked := 1
	for _, el := range enr {
		var rows int
		sets, rows = enrichedSets(sets, el, &es.ent, p, enr)
		asked = min(asked*rows, 1<<40)
	}
	es.droppedCopies = asked - len(sets)
	out := make([]string, len(sets))
	for i, set := range sets {
		out[i] = renderLabels(set)
	}
	first := make(map[string]string, len(sets[0]))
	for _, l := range sets[0] {
		first[l.name] = l.value
	}
	return out, first
}

// baseLabels are the labels of an entity before the enrichers': identity,
// host and label-type fields.
func baseLabels(es *entityState, parent *entityState, p *plan, opts *Options) []labelPair {
	e := &es.ent
	ids := identityOf(e, opts.OldNamespace, p.layout)
	out := make([]labelPair, 0, len(ids)+1+len(p.labelFields))
	for _, l := range ids {
		out = append(out, labelPair{l.name, l.value(e, opts)})
	}
	if writesHostname(opts, p.layout) {
		out = append(out, labelPair{opts.HostnameLabel, opts.Hostname})
	}
	if !writesLabelFields(e, p.layout) {
		return out
	}
	text := es.text
	if parent != nil {
		text = parent.text
	}
	for i, f := range p.labelFields {
		if i < len(text) && text[i] != "" {
			out = append(out, labelPair{f.Name, text[i]})
		}
	}
	return out
}

// shareHostText gives the entities outside any GPU (CPUs, CPU cores,
// NvSwitches and their links) the host-wide label-type fields (DCGM's
// global fields, such as the driver version) that the GPUs carry:
// dcgm-exporter reads every label field on every entity it exports
// (internal/pkg/collector/gpu_collector.go: toCPUMetric, toSwitchMetric),
// and DCGM answers a global field on any entity with the host's value.
func shareHostText(order []*entityState, gpus map[int]*entityState, p *plan) {
	if len(gpus) == 0 || len(p.labelFields) == 0 {
		return
	}
	for i, f := range p.labelFields {
		if fieldid.Of(f.ID).Level != fieldid.LevelNone {
			continue
		}
		// The lowest GPU that has the field: all carry the same value.
		host, from := "", -1
		for idx, g := range gpus {
			if i < len(g.text) && g.text[i] != "" && (from < 0 || idx < from) {
				host, from = g.text[i], idx
			}
		}
		if host == "" {
			continue
		}
		for _, es := range order {
			if es.ent.GPU < 0 && i < len(es.text) {
				es.text[i] = host
			}
		}
	}
}

// enrichedSets extends each label set with one enricher's labels: one copy
// per row the enricher gives the entity, up to maxLabelCopies in all, each
// with the enricher's run-time labels whose names are not taken. It also
// returns the number of rows asked for.
func enrichedSets(sets [][]labelPair, el enricherLabels, e *source.Entity, p *plan, enr []enricherLabels) ([][]labelPair, int) {
	rows := [][]string{el.e.Values(e)}
	if rv, ok := el.e.(enrich.RowValuer); ok {
		if r := rv.ValueRows(e); len(r) > 0 {
			rows = r
		}
	}
	var extra []enrich.Label
	if xl, ok := el.e.(enrich.ExtraLabeler); ok {
		extra = xl.ExtraLabels(e)
	}
	if len(extra) > 0 {
		extra = withoutTakenNames(extra, p, enr)
	}
	next := make([][]labelPair, 0, min(len(sets)*len(rows), maxLabelCopies))
	for _, set := range sets {
		for _, vals := range rows {
			if len(next) == maxLabelCopies {
				return next, len(rows)
			}
			out := append(make([]labelPair, 0, len(set)+len(el.names)+len(extra)), set...)
			for i, name := range el.names {
				if i < len(vals) && vals[i] != "" {
					out = append(out, labelPair{name, vals[i]})
				}
			}
			for _, l := range extra {
				if l.Value != "" {
					out = append(out, labelPair{l.Name, l.Value})
				}
			}
			next = append(next, out)
		}
	}
	return next, len(rows)
}

// renderLabels writes a label set as the exposition does, without its
// closing brace: `{gpu="0",UUID="..."`.
func renderLabels(set []labelPair) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, l := range set {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l.name)
		b.WriteString(`="`)
		b.WriteString(escapeLabel(l.value))
		b.WriteByte('"')
	}
	return b.String()
}

// writesHostname says whether the host label is written: nvidia_gpu_exporter's
// layout has none.
func writesHostname(opts *Options, layout counters.Layout) bool {
	return opts.Hostname != "" && layout != counters.LayoutNvidiaGPUExporter
}

// identityLabel is one identity label: its name and the entity's value.
type identityLabel struct {
	name  string
	value func(e *source.Entity, opts *Options) string
}

var (
	gpuLabel      = identityLabel{"gpu", func(e *source.Entity, _ *Options) string { return strconv.Itoa(e.GPU) }}
	uuidLabel     = identityLabel{"UUID", func(e *source.Entity, _ *Options) string { return e.UUID }}
	oldUUIDLabel  = identityLabel{"uuid", uuidLabel.value}
	linkUUIDLabel = identityLabel{"gpu_uuid", uuidLabel.value}
	pciLabel      = identityLabel{"pci_bus_id", func(e *source.Entity, _ *Options) string { return e.PCIBusID }}
	deviceLabel   = identityLabel{"device", func(e *source.Entity, _ *Options) string { return e.Device }}
	modelLabel    = identityLabel{"modelName", func(e *source.Entity, o *Options) string {
		return modelName(e.ModelName, o.ReplaceBlanksInModelName)
	}}
	// toGPUNvLinkMetric never replaces blanks in the model name.
	linkModelLabel = identityLabel{"model_name", func(e *source.Entity, _ *Options) string { return e.ModelName }}
	giProfileLabel = identityLabel{"GPU_I_PROFILE", func(e *source.Entity, _ *Options) string { return e.GPUInstanceProfile }}
	giLabel        = identityLabel{"GPU_I_ID", func(e *source.Entity, _ *Options) string { return strconv.Itoa(e.GPUInstanceID) }}
	ciLabel        = identityLabel{"GPU_CI_ID", func(e *source.Entity, _ *Options) string { return strconv.Itoa(e.ComputeInstanceID) }}
	nvlinkLabel    = identityLabel{"nvlink", func(e *source.Entity, _ *Options) string { return strconv.Itoa(e.Link) }}
	switchLabel    = identityLabel{"nvswitch", func(e *source.Entity, _ *Options) string { return "nvswitch" + strconv.Itoa(e.Switch) }}
	cpuLabel       = identityLabel{"cpu", func(e *source.Entity, _ *Options) string { return strconv.Itoa(e.CPU) }}
	coreLabel      = identityLabel{"cpucore", func(e *source.Entity, _ *Options) string { return strconv.Itoa(e.CPUCore) }}
)

// identityOf is the one list of an entity's identity labels, in the order
// they are written, the host label aside: baseLabels writes them and
// SeriesShape counts them. They follow dcgm-exporter's render templates per
// entity kind (internal/pkg/rendermetrics/render_metrics.go:
// gpuMetricsFormat, linkMetricsFormat, switchMetricsFormat,
// cpuMetricsFormat, cpuCoreMetricsFormat), and the values its collectors
// put in them (internal/pkg/collector/gpu_collector.go: toMetric,
// toGPUNvLinkMetric, toSwitchMetric, toCPUMetric).
//
// Under -o (OldNamespace) the GPU's UUID label is uuid; with
// ReplaceBlanksInModelName the model name's blanks become dashes (toMetric,
// getGPUModel); an empty host name leaves the host label
// out (writesHostname), as every template writes it only when set.
//
// In nvidia_gpu_exporter's layout GPUs and MIG instances carry uuid (and
// gpu_instance_id, compute_instance_id) alone (nvidiaGPUExporterIdentity).
func identityOf(e *source.Entity, oldNamespace bool, layout counters.Layout) []identityLabel {
	if layout == counters.LayoutNvidiaGPUExporter {
		if ids := nvidiaGPUExporterIdentity(e); ids != nil {
			return ids
		}
	}
	switch {
	case e.Kind == source.NvSwitch:
		return []identityLabel{switchLabel}
	case e.Kind == source.NVLink && e.Switch >= 0:
		return []identityLabel{nvlinkLabel, switchLabel}
	case e.Kind == source.NVLink:
		return []identityLabel{nvlinkLabel, gpuLabel, linkUUIDLabel, pciLabel, deviceLabel, linkModelLabel}
	case e.Kind == source.CPU:
		return []identityLabel{cpuLabel}
	case e.Kind == source.CPUCore:
		return []identityLabel{coreLabel, cpuLabel}
	}
	uuid := uuidLabel
	if oldNamespace {
		uuid = oldUUIDLabel
	}
	out := []identityLabel{gpuLabel, uuid, pciLabel, deviceLabel, modelLabel}
	if e.GPUInstanceID >= 0 {
		out = append(out, giProfileLabel, giLabel)
	}
	if e.ComputeInstanceID >= 0 {
		out = append(out, ciLabel)
	}
	return out
}

// identityNames are the identity labels of every entity kind, and both
// spellings of the host label.
var identityNames = func() []string {
	names := []string{"Hostname", "hostname"}
	for _, l := range []identityLabel{gpuLabel, uuidLabel, oldUUIDLabel, linkUUIDLabel, pciLabel, deviceLabel, modelLabel,
		linkModelLabel, giProfileLabel, giLabel, ciLabel, nvlinkLabel, switchLabel, cpuLabel, coreLabel,
		nvidiaGPUExporterGILabel, nvidiaGPUExporterCILabel} {
		names = append(names, l.name)
	}
	return names
}()

// withoutTakenNames leaves out the extra labels (pod labels) whose name
// gpuscope already sets: an identity label of any entity kind, a label-type
// field, an enricher's label (pod, namespace, container, ...) or a label a
// family adds (familyLabelNames, filled as the families declare them). dcgm-exporter skips a pod label named like one of its
// attributes (internal/pkg/transformation/kubernetes.go); the others it would
// write twice or let replace a field's value, so here they are left out too.
func withoutTakenNames(extra []enrich.Label, p *plan, enr []enricherLabels) []enrich.Label {
	taken := func(name string) bool {
		for _, n := range identityNames {
			if n == name {
				return true
			}
		}
		if familyLabelNames[name] {
			return true
		}
		for _, f := range p.labelFields {
			if f.Name == name {
				return true
			}
		}
		for _, el := range enr {
			for _, n := range el.names {
				if n == name {
					return true
				}
			}
		}
		return false
	}
	out := extra[:0:0]
	for _, l := range extra {
		if !taken(l.Name) {
			out = append(out, l)
		}
	}
	return out
}
