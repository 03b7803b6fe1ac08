package podattr

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/source"
)

// usageKey groups the processes of one container on one GPU or MIG instance.
type usageKey struct {
	ref  podRef
	uuid string
	gi   int
}

// attributeProcesses maps each GPU process to its container through its
// cgroup, and sums memory and SM utilisation per container and device. The
// SM share is the sum of the processes' SM utilisation (percent of the GPU's
// SM time in the driver's last sampling period) divided by 100, so the
// shares of the pods on one GPU add up to at most 1.
func (e *Enricher) attributeProcesses(s *snapshot, owners map[string][]owner, logs *logIndex) {
	procs := e.cfg.Processes()
	if len(procs) == 0 {
		return
	}
	gpuIndex, migUUID := e.entityIndex()
	agg := map[usageKey]*podUsage{}
	for _, p := range procs {
		uuid := normUUID(p.UUID)
		idx, hasIdx := gpuIndex[uuid]
		ref, err := e.ownerOfProcess(p, uuid, idx, hasIdx, migUUID, owners, logs)
		if err != nil {
			s.unattributed++
			e.logOnce("pid-unmapped/"+uuid, func() {
				e.log.WithError(err).WithFields(logrus.Fields{"pid": p.PID, "UUID": p.UUID}).
					Debug("GPU process not mapped to a pod (logged once per GPU)")
			})
			continue
		}
		if _, known := s.procPods[p.PID]; known || len(s.procPods) < maxPodUsage {
			if s.procPods == nil {
				s.procPods = map[uint32]podRef{}
			}
			s.procPods[p.PID] = ref
		}
		k := usageKey{ref: ref, uuid: uuid, gi: p.GPUInstanceID}
		u, ok := agg[k]
		if !ok {
			if len(agg) >= maxPodUsage {
				s.unattributed++
				continue
			}
			u = &podUsage{ref: ref, uuid: p.UUID}
			if hasIdx {
				u.gpu = strconv.Itoa(idx)
			}
			if p.GPUInstanceID >= 0 {
				u.gi = strconv.Itoa(p.GPUInstanceID)
			}
			agg[k] = u
		}
		u.processes++
		u.memBytes += float64(p.UsedMemoryBytes)
		if p.SMUtil >= 0 {
			u.hasSMUtil = true
			u.smUtil += p.SMUtil / 100
		}
	}
	s.usage = make([]podUsage, 0, len(agg))
	for _, u := range agg {
		if u.smUtil > 1 {
			u.smUtil = 1
		}
		s.usage = append(s.usage, *u)
	}
	sort.Slice(s.usage, func(i, j int) bool {
		a, b := s.usage[i], s.usage[j]
		if a.uuid != b.uuid {
			return a.uuid < b.uuid
		}
		if a.gi != b.gi {
			return a.gi < b.gi
		}
		return a.ref.Namespace+"/"+a.ref.Pod+"/"+a.ref.Container < b.ref.Namespace+"/"+b.ref.Pod+"/"+b.ref.Container
	})
}

var _ enrich.ProcessOwner = (*Enricher)(nil)

// ProcessPod implements enrich.ProcessOwner: the pod and container of a GPU
// process as its cgroup names them (--kubernetes-shared-gpu-attribution),
// from the last refresh. A process is its pod's wherever it runs, so the
// entity does not matter.
func (e *Enricher) ProcessPod(_ *source.Entity, pid uint32) (pod, namespace, container string, ok bool) {
	ref, ok := e.snap.Load().procPods[pid]
	if !ok {
		return "", "", "", false
	}
	return ref.Pod, ref.Namespace, ref.Container, true
}

// entityIndex maps the source's GPU UUIDs to their index, and parent
// UUID/GI to the MIG instance's UUID, for ownerOfProcess.
func (e *Enricher) entityIndex() (gpuIndex map[string]int, migUUID map[string]string) {
	gpuIndex, migUUID = map[string]int{}, map[string]string{}
	if e.cfg.Entities == nil {
		return gpuIndex, migUUID
	}
	for _, ent := range e.cfg.Entities() {
		if ent == nil {
			continue
		}
		switch ent.Kind {
		case source.GPU:
			gpuIndex[normUUID(ent.UUID)] = ent.GPU
		case source.GPUInstance:
			if ent.MIGUUID != "" {
				migUUID[normUUID(ent.UUID)+"/"+strconv.Itoa(ent.GPUInstanceID)] = normUUID(ent.MIGUUID)
			}
		}
	}
	return gpuIndex, migUUID
}

// ownerOfProcess finds the container of a GPU process: the container ID of
// its cgroup names it directly through the container log names; failing
// that, the pod UID names the pod, and the container is the pod's only
// container holding this device in the kubelet's answer.
func (e *Enricher) ownerOfProcess(p source.Process, uuid string, idx int, hasIdx bool,
	migUUID map[string]string, owners map[string][]owner, logs *logIndex) (podRef, error) {
	cg, err := cgroupOfPID(e.cfg.ProcRoot, p.PID)
	if err != nil {
		return podRef{}, err
	}
	if logs == nil {
		return podRef{}, fmt.Errorf("PID %d: pod %s: container log directories unreadable", p.PID, cg.PodUID)
	}
	if cg.ContainerID != "" {
		if ref, ok := logs.byContainerID[cg.ContainerID]; ok {
			return ref, nil
		}
	}
	ref, ok := logs.byPodUID[cg.PodUID]
	if !ok {
		return podRef{}, fmt.Errorf("PID %d: pod UID %s not found under %s/pods", p.PID, cg.PodUID, e.cfg.LogRoot)
	}
	keys := []string{keyUUID + uuid}
	if hasIdx {
		keys = append(keys, keyIndex+strconv.Itoa(idx))
	}
	if p.GPUInstanceID >= 0 {
		gi := strconv.Itoa(p.GPUInstanceID)
		keys = append(keys, keyGI+uuid+"/"+gi)
		if m, ok := migUUID[uuid+"/"+gi]; ok {
			keys = append(keys, keyMIG+m)
		}
		if hasIdx {
			keys = append(keys, keyIdxGI+strconv.Itoa(idx)+"/"+gi)
		}
	}
	container := ""
	for _, k := range keys {
		for _, o := range owners[k] {
			if o.Namespace != ref.Namespace || o.Pod != ref.Pod {
				continue
			}
			if container != "" && container != o.Container {
				return ref, nil // several containers of the pod: leave it empty
			}
			container = o.Container
		}
	}
	ref.Container = container
	return ref, nil
}
