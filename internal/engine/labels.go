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
	switch {
	case e.Kind == source.NvSwitch:
		b.WriteString(`nvswitch="nvswitch`)
		b.WriteString(strconv.Itoa(e.Switch))
		b.WriteByte('"')
	case e.Kind == source.NVLink && e.Switch >= 0:
		b.WriteString(`nvlink="`)
		b.WriteString(strconv.Itoa(e.Link))
		b.WriteString(`",nvswitch="nvswitch`)
		b.WriteString(strconv.Itoa(e.Switch))
		b.WriteByte('"')
	case e.Kind == source.NVLink:
		b.WriteString(`nvlink="`)
		b.WriteString(strconv.Itoa(e.Link))
		b.WriteString(`",gpu="`)
		b.WriteString(strconv.Itoa(e.GPU))
		b.WriteByte('"')
		writeLabel(b, "gpu_uuid", e.UUID)
		writeLabel(b, "pci_bus_id", e.PCIBusID)
		writeLabel(b, "device", e.Device)
		// toGPUNvLinkMetric never replaces blanks in the model name.
		writeLabel(b, "model_name", e.ModelName)
	case e.Kind == source.CPU:
		b.WriteString(`cpu="`)
		b.WriteString(strconv.Itoa(e.CPU))
		b.WriteByte('"')
	case e.Kind == source.CPUCore:
		b.WriteString(`cpucore="`)
		b.WriteString(strconv.Itoa(e.CPUCore))
		b.WriteString(`",cpu="`)
		b.WriteString(strconv.Itoa(e.CPU))
		b.WriteByte('"')
	default:
		b.WriteString(`gpu="`)
		b.WriteString(strconv.Itoa(e.GPU))
		b.WriteByte('"')
		if opts.OldNamespace {
			writeLabel(b, "uuid", e.UUID)
		} else {
			writeLabel(b, "UUID", e.UUID)
		}
		writeLabel(b, "pci_bus_id", e.PCIBusID)
		writeLabel(b, "device", e.Device)
		writeLabel(b, "modelName", modelName(e.ModelName, opts.ReplaceBlanksInModelName))
		if e.GPUInstanceID >= 0 {
			writeLabel(b, "GPU_I_PROFILE", e.GPUInstanceProfile)
			b.WriteString(`,GPU_I_ID="`)
			b.WriteString(strconv.Itoa(e.GPUInstanceID))
			b.WriteByte('"')
		}
		if e.ComputeInstanceID >= 0 {
			b.WriteString(`,GPU_CI_ID="`)
			b.WriteString(strconv.Itoa(e.ComputeInstanceID))
			b.WriteByte('"')
		}
	}
	if !opts.NoHostname && opts.Hostname != "" {
		writeLabel(b, opts.HostnameLabel, opts.Hostname)
	}
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
	"health_watch", "health_error_code", "field",
}

// identityNames are the identity labels of every entity kind.
var identityNames = []string{
	"gpu", "UUID", "pci_bus_id", "device", "modelName", "GPU_I_PROFILE", "GPU_I_ID", "GPU_CI_ID",
	"nvlink", "nvswitch", "gpu_uuid", "model_name", "cpu", "cpucore", "Hostname", "hostname", "uuid",
}

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
