package podattr

import (
	"github.com/sirupsen/logrus"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/gpuscope/gpuscope/internal/enrich/kube/draslices"
)

// draHolder is one container holding a GPU through a DRA claim.
type draHolder struct {
	owner
	claim, claimNamespace, pool, device string
	dev                                 draslices.Device
}

// draHolders records the GPUs pod's containers hold through DRA claims of
// the NVIDIA driver, keyed by the GPU's UUID key, once per container and
// GPU, as dcgm-exporter's toDeviceToPodsDRA does
// (internal/pkg/transformation/kubernetes.go): a MIG device counts for its
// parent GPU. It says whether the pod holds one.
func (e *Enricher) draHolders(pod *podresourcesv1.PodResources, held *map[string][]draHolder, overflow *int) bool {
	holds := false
	for _, c := range pod.GetContainers() {
		if c == nil || c.GetName() == "" {
			continue
		}
		for _, dr := range c.GetDynamicResources() {
			for _, cr := range dr.GetClaimResources() {
				if cr.GetDriverName() != draslices.Driver {
					continue
				}
				dev, ok := e.cfg.DRA.Lookup(cr.GetPoolName(), cr.GetDeviceName())
				if !ok {
					e.logOnce("dra/"+cr.GetPoolName()+"/"+cr.GetDeviceName(), func() {
						e.log.WithFields(logrus.Fields{"pool": cr.GetPoolName(), "device": cr.GetDeviceName(),
							"pod": pod.GetNamespace() + "/" + pod.GetName()}).
							Warn("DRA device not found in the gpu.nvidia.com ResourceSlices; its pod gets no labels on it (logged once per device)")
					})
					continue
				}
				if *held == nil {
					*held = map[string][]draHolder{}
				}
				key := keyUUID + normUUID(dev.UUID)
				o := owner{Namespace: pod.GetNamespace(), Pod: pod.GetName(), Container: c.GetName()}
				cur, exists := (*held)[key]
				if !exists && len(*held) >= e.cfg.MaxDevices {
					*overflow++
					continue
				}
				holds = true
				dup := false
				for _, h := range cur {
					dup = dup || h.owner == o
				}
				if dup || len(cur) >= maxOwnersPerDevice {
					continue
				}
				(*held)[key] = append(cur, draHolder{owner: o, claim: dr.GetClaimName(), claimNamespace: dr.GetClaimNamespace(),
					pool: cr.GetPoolName(), device: cr.GetDeviceName(), dev: dev})
			}
		}
	}
	return holds
}

// draRows turns the holders into label rows: the pod labels, then the
// DRALabels (dcgm-exporter's transformation/kubernetes.go, Process).
func (e *Enricher) draRows(held map[string][]draHolder, logs *logIndex) map[string][][]string {
	if len(held) == 0 {
		return nil
	}
	out := make(map[string][][]string, len(held))
	for key, hs := range held {
		for _, h := range hs {
			row := []string{h.Pod, h.Namespace, h.Container}
			if e.cfg.PodUIDLabel || e.cfg.VirtualGPUs {
				row = append(row, e.uidLabel(logs, h.Namespace, h.Pod))
			}
			if e.cfg.VirtualGPUs {
				row = append(row, "")
			}
			row = append(row, h.claim, h.claimNamespace, draslices.Driver, h.pool, h.device, h.dev.Profile, h.dev.MIGUUID)
			out[key] = append(out[key], row)
		}
	}
	return out
}

// padDRA gives a row of the device-plugin labels empty DRA labels, so that
// every row has one value per label name.
func (e *Enricher) padDRA(v []string) []string {
	if e.cfg.DRA == nil {
		return v
	}
	return append(v, make([]string, len(DRALabels))...)
}
