package engine

import (
	"sort"

	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/source"
)

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
