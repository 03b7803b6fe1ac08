package engine

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/engine/eventnames"
	"github.com/gpuscope/gpuscope/source"
)

// This file renders the series of a counters file in nvidia_gpu_exporter's
// layout (counters.LayoutNvidiaGPUExporter): which entities carry which lines, the
// uuid identity, and the families that read no field of their own.

// nvidiaGPUExporterUUID is a GPU UUID as that exporter writes it in every label:
// lower case, without the "GPU-" prefix (internal/nvidiasmi, NormalizeUUID).
func nvidiaGPUExporterUUID(u string) string {
	return strings.TrimPrefix(strings.ToLower(strings.TrimSpace(u)), "gpu-")
}

var (
	// nvidiaGPUExporterUUIDLabel is uuid as that exporter writes it.
	nvidiaGPUExporterUUIDLabel = identityLabel{"uuid", func(e *source.Entity, _ *Options) string { return nvidiaGPUExporterUUID(e.UUID) }}
	nvidiaGPUExporterGILabel   = identityLabel{"gpu_instance_id", giLabel.value}
	nvidiaGPUExporterCILabel   = identityLabel{"compute_instance_id", ciLabel.value}
)

// nvidiaGPUExporterIdentity is the identity of a GPU or MIG entity in that
// exporter's layout; nil for other kinds, which keep dcgm-exporter's.
func nvidiaGPUExporterIdentity(e *source.Entity) []identityLabel {
	switch e.Kind {
	case source.GPU:
		return []identityLabel{nvidiaGPUExporterUUIDLabel}
	case source.GPUInstance:
		return []identityLabel{nvidiaGPUExporterUUIDLabel, nvidiaGPUExporterGILabel}
	case source.ComputeInstance:
		return []identityLabel{nvidiaGPUExporterUUIDLabel, nvidiaGPUExporterGILabel, nvidiaGPUExporterCILabel}
	}
	return nil
}

// shows says whether m has a series on es. In dcgm-exporter's layout the MIG
// instances of a MIG GPU carry its series in place of the GPU; in
// nvidia_gpu_exporter's, every GPU carries the per-GPU lines (MIG or not)
// and the GPU instances carry the nvidia_smi_mig_* lines.
func (m *metric) shows(es *entityState, layout counters.Layout) bool {
	if layout != counters.LayoutNvidiaGPUExporter {
		return !es.migParent
	}
	if m.field.Export.MIG {
		return es.ent.Kind == source.GPUInstance
	}
	return es.ent.Kind == source.GPU
}

// renderNvidiaGPUExporter writes the lines of the file's roles: the info and index
// series, the MIG inventory, the XID families and the collection status of
// nvidia_gpu_exporter's names, and dcgm-exporter's cumulative totals.
func (e *Engine) renderNvidiaGPUExporter(w *snapshotWriter) {
	p := e.plan
	for i := range p.roles {
		f := &p.roles[i]
		typ := f.Type.String()
		switch f.Export.Role {
		case counters.RoleInfo:
			appendFamily(w, e.order, f.Name, f.Help, typ, func(w *snapshotWriter, es *entityState, labels string) {
				// One series per GPU, whatever copies the enrichers ask
				// for: dashboards join on(uuid) group_left against it.
				if es.ent.Kind != source.GPU || labels != es.labels[0] {
					return
				}
				w.sample(f.Name, gpuInfoLabels(es, p), "} ", 1)
			})
		case counters.RoleIndex:
			appendFamily(w, e.order, f.Name, f.Help, typ, func(w *snapshotWriter, es *entityState, labels string) {
				if es.ent.Kind != source.GPU {
					return
				}
				w.sample(f.Name, labels, "} ", float64(es.ent.GPU))
			})
		case counters.RoleMIGInfo:
			appendFamily(w, e.order, f.Name, f.Help, typ, func(w *snapshotWriter, es *entityState, labels string) {
				if es.ent.Kind != source.GPUInstance || labels != es.labels[0] {
					return
				}
				w.sample(f.Name, migInfoLabels(&es.ent), "} ", 1)
			})
		case counters.RoleXIDTotal, counters.RoleXIDLast:
			last := f.Export.Role == counters.RoleXIDLast
			appendFamily(w, e.order, f.Name, f.Help, typ, func(w *snapshotWriter, es *entityState, labels string) {
				if es.ent.Kind != source.GPU {
					return
				}
				for _, x := range es.xids {
					v := float64(x.total)
					if last {
						v = float64(x.lastSeen) / 1e9
					}
					w.sample(f.Name, labels, `,`+labelXID+`="`+eventnames.XIDLabel(x.code)+`"} `, v)
				}
			})
		case counters.RoleExpXIDTotal:
			e.renderXIDTotal(w, f)
		case counters.RoleExpClockEventsTotal:
			e.renderClockEventsTotal(w, f)
		case counters.RoleComputeAppInfo, counters.RoleComputeAppMemory, counters.RoleComputeApps, counters.RoleComputeAppsSuccess:
			e.renderComputeApps(w, f)
		default:
			if v, ok := e.col.value(f.Export.Role, len(p.groups)); ok {
				// Exporter-wide: no labels, as there.
				w.family(f.Name, f.Help, typ)
				w.sample(f.Name, "", " ", v)
			}
		}
	}
}

// gpuInfoLabels is the label set of a GPU's nvidia_smi_gpu_info: uuid,
// index and pci_bus_id from its identity, then the label-type fields in the
// form that exporter writes them.
func gpuInfoLabels(es *entityState, p *plan) string {
	set := make([]labelPair, 0, 3+len(p.labelFields))
	set = append(set, labelPair{"uuid", nvidiaGPUExporterUUID(es.ent.UUID)}, labelPair{"index", strconv.Itoa(es.ent.GPU)},
		labelPair{"pci_bus_id", es.ent.PCIBusID})
	for i, f := range p.labelFields {
		if i < len(es.text) && es.text[i] != "" {
			set = append(set, labelPair{f.Name, f.Export.Format.Format(es.text[i])})
		}
	}
	return renderLabels(set)
}

// migInfoLabels is the label set of a GPU instance's nvidia_smi_mig_info.
// gpuscope exports GPU instances, so compute_instance_id is left out unless
// the entity is a compute instance.
func migInfoLabels(e *source.Entity) string {
	var set []labelPair
	for _, l := range nvidiaGPUExporterIdentity(e) {
		set = append(set, labelPair{l.name, l.value(e, nil)})
	}
	return renderLabels(append(set, labelPair{"mig_uuid", e.MIGUUID}, labelPair{"profile", e.GPUInstanceProfile}))
}

// collectStats is the outcome of the latest collection of each field group,
// for the collection roles. It holds one entry per group of the plan.
type collectStats struct {
	mu       sync.Mutex
	groups   []groupCollect
	failures uint64
}

type groupCollect struct {
	seen   bool
	ok     bool
	lastOK time.Time
	took   time.Duration
}

// maxGroups bounds collectStats.groups: a plan has one group per distinct
// watch interval, and no counters file has more intervals than fields.
const maxGroups = 4096

func (c *collectStats) note(gi int, at time.Time, took time.Duration, err error) {
	if gi < 0 || gi >= maxGroups {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if gi >= len(c.groups) {
		c.groups = append(c.groups, make([]groupCollect, gi+1-len(c.groups))...)
	}
	g := &c.groups[gi]
	g.seen, g.ok, g.took = true, err == nil, took
	if err == nil {
		g.lastOK = at
	} else {
		c.failures++
	}
}

// value is a collection role's value over the first n groups (those of the
// current plan); false when no group has been collected yet, or for the
// timestamp when a group never worked.
func (c *collectStats) value(r counters.Role, n int) (float64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r == counters.RoleCollectFailures {
		return float64(c.failures), true
	}
	ok, any, neverOK := true, false, false
	var oldest time.Time
	var slowest time.Duration
	for _, g := range c.groups[:min(n, len(c.groups))] {
		if !g.seen {
			continue
		}
		any = true
		ok = ok && g.ok
		switch {
		case g.lastOK.IsZero():
			neverOK = true
		case oldest.IsZero() || g.lastOK.Before(oldest):
			oldest = g.lastOK
		}
		slowest = max(slowest, g.took)
	}
	if !any {
		return 0, false
	}
	switch r {
	case counters.RoleCollectSuccess:
		if ok {
			return 1, true
		}
		return 0, true
	case counters.RoleCollectTimestamp:
		if neverOK {
			return 0, false
		}
		return float64(oldest.UnixNano()) / 1e9, true
	case counters.RoleCollectDuration:
		return slowest.Seconds(), true
	}
	return 0, false
}
