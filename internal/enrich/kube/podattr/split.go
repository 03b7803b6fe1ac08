package podattr

import (
	"math"
	"slices"
	"strconv"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
)

// splitFields are the fields whose value dcgm-exporter divides among the
// pods of a device under --kubernetes-virtual-gpus
// (internal/pkg/transformation/process_metrics.go, isPerProcessMetric).
var splitFields = []uint16{fieldid.GPUUtil, fieldid.FBUsed}

// uidColumn is the index of pod_uid in a row: pod, namespace, container,
// pod_uid.
const uidColumn = 3

// splitEntity is one held entity's per-pod series of the split fields: one
// label row per holder (pod_uid always set) and, per field, one value per
// row.
type splitEntity struct {
	rows   [][]string
	values map[uint16][]float64
}

// uidLabel is the pod_uid label value of a row: the pod's UID when
// --kubernetes-pod-uid-label asks for it, else empty (left out).
func (e *Enricher) uidLabel(logs *logIndex, ns, pod string) string {
	if !e.cfg.PodUIDLabel {
		return ""
	}
	return uidOf(logs, ns, pod)
}

func uidOf(logs *logIndex, ns, pod string) string {
	if logs == nil {
		return ""
	}
	return logs.uidByPod[ns+"/"+pod]
}

// splitByPod gives each entity that pods hold (rows, as ValueRows) its
// pods' own values of the split fields, as dcgm-exporter does
// (process_metrics.go, kubernetes.go createPerProcessMetrics): a pod's value
// is the sum over its processes on the device of the SM utilisation in
// percent (none on a MIG instance, where NVML gives no per-process
// utilisation) and of the memory in whole MiB; a pod with no process on
// the device gets 0; every row carries pod_uid.
func (e *Enricher) splitByPod(rows map[string][][]string, owners map[string][]owner, logs *logIndex) map[string]*splitEntity {
	if e.cfg.Entities == nil || len(rows) == 0 {
		return nil
	}
	procs := e.cfg.Processes()
	if procs == nil {
		// The source cannot list processes now: every field is copied.
		return nil
	}
	type podKey struct{ entity, ns, pod string }
	util, mem := map[podKey]float64{}, map[podKey]float64{}
	gpuIndex, migUUID := e.entityIndex()
	for _, p := range procs {
		uuid := normUUID(p.UUID)
		idx, hasIdx := gpuIndex[uuid]
		ref, err := e.ownerOfProcess(p, uuid, idx, hasIdx, migUUID, owners, logs)
		if err != nil {
			continue
		}
		gi := max(p.GPUInstanceID, -1)
		k := podKey{splitKey(p.UUID, gi), ref.Namespace, ref.Pod}
		mem[k] += math.Floor(float64(p.UsedMemoryBytes) / (1 << 20))
		if p.SMUtil >= 0 && p.GPUInstanceID < 0 {
			util[k] += math.Floor(p.SMUtil)
		}
	}
	out := map[string]*splitEntity{}
	for _, ent := range e.cfg.Entities() {
		if ent == nil || (ent.Kind != source.GPU && ent.Kind != source.GPUInstance) {
			continue
		}
		held := lookupKeys(ent, func(k string) [][]string { return rows[k] })
		if len(held) == 0 {
			continue
		}
		key := entitySplitKey(ent)
		se := &splitEntity{values: map[uint16][]float64{fieldid.GPUUtil: nil, fieldid.FBUsed: nil}}
		for _, r := range held {
			row := slices.Clone(r)
			row[uidColumn] = uidOf(logs, row[1], row[0])
			se.rows = append(se.rows, row)
			k := podKey{key, row[1], row[0]}
			se.values[fieldid.GPUUtil] = append(se.values[fieldid.GPUUtil], util[k])
			se.values[fieldid.FBUsed] = append(se.values[fieldid.FBUsed], mem[k])
		}
		out[key] = se
	}
	return out
}

// SplitFields implements enrich.RowSplitter.
func (e *Enricher) SplitFields() []uint16 {
	if !e.cfg.VirtualGPUs || e.cfg.Processes == nil {
		return nil
	}
	return splitFields
}

// SplitRows implements enrich.RowSplitter: with VirtualGPUs, the label rows
// of the per-pod series of an entity pods hold, one per holder.
func (e *Enricher) SplitRows(ent *source.Entity) [][]string {
	s := e.snap.Load()
	if ent == nil || len(s.split) == 0 {
		return nil
	}
	if se := s.split[entitySplitKey(ent)]; se != nil {
		return se.rows
	}
	return nil
}

// SplitValues implements enrich.RowSplitter: the field's value for each row
// of SplitRows, from the last refresh.
func (e *Enricher) SplitValues(ent *source.Entity, field uint16) []float64 {
	s := e.snap.Load()
	if ent == nil || len(s.split) == 0 {
		return nil
	}
	if se := s.split[entitySplitKey(ent)]; se != nil {
		return se.values[field]
	}
	return nil
}

// splitKey names a GPU (gi -1) or MIG instance by its GPU's UUID, as the
// process list does.
func splitKey(uuid string, gi int) string { return normUUID(uuid) + "/" + strconv.Itoa(gi) }

func entitySplitKey(ent *source.Entity) string {
	if ent.Kind == source.GPUInstance {
		return splitKey(ent.UUID, ent.GPUInstanceID)
	}
	return splitKey(ent.UUID, -1)
}

func sameSplitRows(a, b map[string]*splitEntity) bool {
	if len(a) != len(b) {
		return false
	}
	for k, sa := range a {
		sb, ok := b[k]
		if !ok || !sameRows(map[string][][]string{"": sa.rows}, map[string][][]string{"": sb.rows}) {
			return false
		}
	}
	return true
}
