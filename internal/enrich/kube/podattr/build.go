package podattr

import (
	"slices"
	"strconv"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/internal/enrich/kube/podresources"
	"github.com/gpuscope/gpuscope/source"
)

func (e *Enricher) wanted(resource string) bool {
	for _, r := range e.resources {
		if p, ok := strings.CutSuffix(r, "*"); ok {
			if strings.HasPrefix(resource, p) {
				return true
			}
		} else if r == resource {
			return true
		}
	}
	return false
}

// build turns a kubelet answer into a snapshot.
func (e *Enricher) build(resp *podresources.ListResponse) *snapshot {
	s := &snapshot{values: map[string][]string{}}
	sc := &ownerScan{owners: map[string][]owner{}}
	for i := range resp.Pods {
		e.scanPod(&resp.Pods[i], s, sc)
	}
	if sc.overflow > 0 {
		e.logOnce("overflow", func() {
			e.log.WithField("max_devices", e.cfg.MaxDevices).
				Warn("kubelet answer names more GPU devices than the cap; the rest get no labels (logged once)")
		})
	}
	logs := e.readLogs()
	if e.cfg.VirtualGPUs {
		s.rows = e.replicaRows(sc.owners, logs)
	}
	e.podValues(s, sc.owners, logs)
	if e.cfg.DRA != nil {
		s.draRows = e.draRows(sc.draHeld, logs)
	}
	if e.cfg.SharedGPUAttribution && e.cfg.Processes != nil {
		e.attributeProcesses(s, sc.owners, logs)
	}
	if e.cfg.VirtualGPUs && e.cfg.Processes != nil {
		s.split = e.splitByPod(s.rows, sc.owners, logs)
	}
	s.alloc = e.allocations(sc.owners)
	return s
}

// ownerScan is what build gathers from the pods of a kubelet answer: the
// containers holding each device, the DRA claims' holders, and how many
// devices the cap left out.
type ownerScan struct {
	owners   map[string][]owner
	draHeld  map[string][]draHolder
	overflow int
}

// scanPod adds the devices a pod's containers hold to sc, and counts the
// pod when it holds a GPU; a pod or container without a name is counted as
// malformed and skipped.
func (e *Enricher) scanPod(pod *podresources.Pod, s *snapshot, sc *ownerScan) {
	if pod.Name == "" || pod.Namespace == "" {
		s.malformed++
		e.logOnce("malformed-pod", func() {
			e.log.WithField("pod", pod.Name).WithField("namespace", pod.Namespace).
				Warn("kubelet answer holds a pod without name or namespace; skipped (logged once)")
		})
		return
	}
	holdsGPU := false
	for i := range pod.Containers {
		c := &pod.Containers[i]
		if c.Name == "" {
			s.malformed++
			e.logOnce("malformed-container", func() {
				e.log.WithField("pod", pod.Namespace+"/"+pod.Name).
					Warn("kubelet answer holds a container without a name; skipped (logged once)")
			})
			continue
		}
		for j := range c.Devices {
			if d := &c.Devices[j]; e.wanted(d.ResourceName) && e.scanDevices(pod, c, d, s, sc) {
				holdsGPU = true
			}
		}
	}
	if e.cfg.DRA != nil && e.draHolders(pod, &sc.draHeld, &sc.overflow) {
		holdsGPU = true
	}
	if holdsGPU {
		s.pods++
	}
}

// scanDevices records container c as an owner of each GPU device d names,
// up to the caps; it says whether any ID named a GPU.
func (e *Enricher) scanDevices(pod *podresources.Pod, c *podresources.Container,
	d *podresources.Devices, s *snapshot, sc *ownerScan) bool {
	holdsGPU := false
	for _, id := range d.DeviceIDs {
		o := owner{Namespace: pod.Namespace, Pod: pod.Name, Container: c.Name}
		if e.cfg.VirtualGPUs {
			o.VGPU = sharedReplica(id)
		}
		key, err := deviceKey(id)
		if err != nil {
			s.unknownIDs++
			e.logOnce("id/"+id, func() {
				e.log.WithError(err).WithFields(logrus.Fields{
					"resource": d.ResourceName, "pod": o.Namespace + "/" + o.Pod,
				}).Warn("cannot map device ID to a GPU; its pod gets no labels (logged once per ID)")
			})
			continue
		}
		holdsGPU = true
		cur, exists := sc.owners[key]
		if !exists && len(sc.owners) >= e.cfg.MaxDevices {
			sc.overflow++
			continue
		}
		if !containsOwner(cur, o) && len(cur) < maxOwnersPerDevice {
			sc.owners[key] = append(cur, o)
		}
	}
	return holdsGPU
}

// readLogs reads the kubelet's log directories when pod_uid, virtual GPUs
// or per-pod process attribution need them; nil when none does or they
// cannot be read.
func (e *Enricher) readLogs() *logIndex {
	if !e.cfg.PodUIDLabel && !e.cfg.VirtualGPUs && (!e.cfg.SharedGPUAttribution || e.cfg.Processes == nil) {
		return nil
	}
	logs, err := readLogIndex(e.cfg.LogRoot)
	if err != nil {
		e.logOnce("logindex", func() {
			e.log.WithError(err).Warn("cannot read the kubelet log directories; pod_uid and per-pod process attribution are incomplete (logged once)")
		})
	}
	return logs
}

// replicaRows gives each device one row per container holding it, with
// the vgpu label (--kubernetes-virtual-gpus).
func (e *Enricher) replicaRows(owners map[string][]owner, logs *logIndex) map[string][][]string {
	rows := map[string][][]string{}
	for key, ows := range owners {
		for _, o := range ows {
			row := []string{o.Pod, o.Namespace, o.Container, e.uidLabel(logs, o.Namespace, o.Pod)}
			rows[key] = append(rows[key], e.padDRA(append(row, o.VGPU)))
		}
	}
	return rows
}

// podValues gives each device that one pod holds that pod's labels, and
// counts the devices that several pods share.
func (e *Enricher) podValues(s *snapshot, owners map[string][]owner, logs *logIndex) {
	for key, ows := range owners {
		if !samePod(ows) {
			s.shared++
			continue
		}
		v := []string{ows[0].Pod, ows[0].Namespace, ows[0].Container}
		if len(ows) > 1 {
			// Several containers of one pod share the device: the pod is
			// certain, the container is not.
			v[2] = ""
		}
		if e.cfg.PodUIDLabel || e.cfg.VirtualGPUs {
			v = append(v, e.uidLabel(logs, ows[0].Namespace, ows[0].Pod))
		}
		if e.cfg.VirtualGPUs {
			v = append(v, ows[0].VGPU)
		}
		s.values[key] = e.padDRA(v)
	}
}

// allocations lists the holders of each GPU and MIG instance the engine
// knows, found by the keys Values looks its labels up by.
func (e *Enricher) allocations(owners map[string][]owner) []allocation {
	if e.cfg.Entities == nil || len(owners) == 0 {
		return nil
	}
	var out []allocation
	for _, ent := range e.cfg.Entities() {
		if ent == nil || (ent.Kind != source.GPU && ent.Kind != source.GPUInstance) {
			continue
		}
		gi := ""
		if ent.Kind == source.GPUInstance {
			gi = strconv.Itoa(ent.GPUInstanceID)
		}
		seen := map[owner]bool{}
		for _, o := range lookupKeys(ent, func(k string) []owner { return owners[k] }) {
			// Replicas of one container (--kubernetes-virtual-gpus) are one
			// holder here.
			o.VGPU = ""
			if !seen[o] {
				seen[o] = true
				out = append(out, allocation{owner: o, gpu: strconv.Itoa(ent.GPU), uuid: ent.UUID, gi: gi})
			}
		}
	}
	return out
}

func containsOwner(ows []owner, o owner) bool {
	for _, x := range ows {
		if x == o {
			return true
		}
	}
	return false
}

func samePod(ows []owner) bool {
	for _, o := range ows[1:] {
		if o.Namespace != ows[0].Namespace || o.Pod != ows[0].Pod {
			return false
		}
	}
	return true
}

// publish swaps in s, bumping the generation when the labels changed.
func (e *Enricher) publish(s *snapshot) {
	old := e.snap.Swap(s)
	if !sameValues(old.values, s.values) || !sameRows(old.rows, s.rows) || !sameRows(old.draRows, s.draRows) || !sameSplitRows(old.split, s.split) {
		e.gen.Add(1)
	}
}

func sameRows(a, b map[string][][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, ra := range a {
		rb, ok := b[k]
		if !ok || len(ra) != len(rb) {
			return false
		}
		for i := range ra {
			if !slices.Equal(ra[i], rb[i]) {
				return false
			}
		}
	}
	return true
}

// sharedReplica is the replica a device ID names of a shared GPU: N of
// <uuid>::N (NVIDIA's device plugin) or of nvidiaX/vgpuN (GKE), as
// dcgm-exporter's getSharedGPU reads it; empty otherwise.
func sharedReplica(id string) string {
	if _, after, ok := strings.Cut(id, "/vgpu"); ok {
		return after
	}
	if _, after, ok := strings.Cut(id, "::"); ok {
		return after
	}
	return ""
}

func sameValues(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, va := range a {
		vb, ok := b[k]
		if !ok || len(va) != len(vb) {
			return false
		}
		for i := range va {
			if va[i] != vb[i] {
				return false
			}
		}
	}
	return true
}
