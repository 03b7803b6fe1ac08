package engine

import (
	"strconv"
	"strings"

	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/source"
)

// maxLabelCopies bounds the copies of one entity's series that enricher rows
// may ask for (jobs x pods); rows past it are left out.
const maxLabelCopies = 64

// DefaultHostnameLabel is the name of the host label: every released
// dcgm-exporter (up to 4.8.2) calls it Hostname.
const DefaultHostnameLabel = "Hostname"

// buildLabels renders the label sets of an entity: its identity labels in
// dcgm-exporter's layout for its kind, the label-type fields (taken from the
// parent GPU for MIG instances and GPU links), and the enrichers' labels, one
// set per combination of the enrichers' rows.
func buildLabels(es *entityState, parent *entityState, p *plan, opts *Options, enr []enricherLabels) []string {
	var b strings.Builder
	e := &es.ent
	identityLabels(&b, e, opts)
	if e.Kind != source.CPU && e.Kind != source.CPUCore {
		text := es.text
		if parent != nil {
			text = parent.text
		}
		for i, f := range p.labelFields {
			if i < len(text) && text[i] != "" {
				writeLabel(&b, f.Name, text[i])
			}
		}
	}
	sets := []string{b.String()}
	for _, el := range enr {
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
		next := make([]string, 0, len(sets)*len(rows))
		for _, set := range sets {
			for _, vals := range rows {
				if len(next) == maxLabelCopies {
					break
				}
				b.Reset()
				b.WriteString(set)
				for i, name := range el.names {
					if i < len(vals) && vals[i] != "" {
						writeLabel(&b, name, vals[i])
					}
				}
				for _, l := range extra {
					if l.Value != "" {
						writeLabel(&b, l.Name, l.Value)
					}
				}
				next = append(next, b.String())
			}
		}
		sets = next
	}
	return sets
}

// identityLabels writes the identity labels of an entity as dcgm-exporter's
// render templates lay them out per entity kind
// (internal/pkg/rendermetrics/render_metrics.go: gpuMetricsFormat,
// linkMetricsFormat, switchMetricsFormat, cpuMetricsFormat,
// cpuCoreMetricsFormat), and the values its collectors put in them
// (internal/pkg/collector/gpu_collector.go: toMetric, toGPUNvLinkMetric,
// toSwitchMetric, toCPUMetric).
//
// Under -o (OldNamespace) the GPU's UUID label is uuid; with
// ReplaceBlanksInModelName the model name's blanks become dashes (toMetric,
// getGPUModel); NoHostname (-n) or an empty host name leaves the host label
// out, as every template writes it only when set.
func identityLabels(b *strings.Builder, e *source.Entity, opts *Options) {
	b.WriteByte('{')
	for i, l := range identityOf(e, opts.OldNamespace) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l.name)
		b.WriteString(`="`)
		b.WriteString(escapeLabel(l.value(e, opts)))
		b.WriteByte('"')
	}
	if writesHostname(opts) {
		writeLabel(b, opts.HostnameLabel, opts.Hostname)
	}
}

// writesHostname says whether the host label is written.
func writesHostname(opts *Options) bool { return !opts.NoHostname && opts.Hostname != "" }

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
// they are written, the host label aside: identityLabels writes them and
// SeriesShape counts them.
func identityOf(e *source.Entity, oldNamespace bool) []identityLabel {
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

func writeLabel(b *strings.Builder, name, value string) {
	b.WriteByte(',')
	b.WriteString(name)
	b.WriteString(`="`)
	b.WriteString(escapeLabel(value))
	b.WriteByte('"')
}

// familyLabels are the labels that families add after an entity's label set.
var familyLabels = []string{
	"stat", "xid", "xid_description", "err_code", "err_msg", "clock_event", "window_size_in_ms",
	"health_watch", "health_error_code", "field", "bound",
}

// identityNames are the identity labels of every entity kind, and both
// spellings of the host label.
var identityNames = func() []string {
	names := []string{"Hostname", "hostname"}
	for _, l := range []identityLabel{gpuLabel, uuidLabel, oldUUIDLabel, linkUUIDLabel, pciLabel, deviceLabel, modelLabel,
		linkModelLabel, giProfileLabel, giLabel, ciLabel, nvlinkLabel, switchLabel, cpuLabel, coreLabel} {
		names = append(names, l.name)
	}
	return names
}()

// withoutTakenNames leaves out the extra labels (pod labels) whose name
// gpuscope already sets: an identity label of any entity kind, a label-type
// field, an enricher's label (pod, namespace, container, ...) or a label a
// family adds. dcgm-exporter skips a pod label named like one of its
// attributes (internal/pkg/transformation/kubernetes.go); the others it would
// write twice or let replace a field's value, so here they are left out too.
func withoutTakenNames(extra []enrich.Label, p *plan, enr []enricherLabels) []enrich.Label {
	taken := func(name string) bool {
		for _, n := range identityNames {
			if n == name {
				return true
			}
		}
		for _, n := range familyLabels {
			if n == name {
				return true
			}
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
