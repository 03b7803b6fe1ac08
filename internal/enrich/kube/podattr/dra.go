package podattr

import (
	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/internal/enrich/kube/draslices"
	"github.com/gpuscope/gpuscope/internal/enrich/kube/podresources"
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
func (e *Enricher) draHolders(pod *podresources.Pod, held *map[string][]draHolder, overflow *int) bool {
	holds := false
	for _, c := range pod.Containers {
		if c.Name == "" {
			continue
		}
		for _, dr := range c.DynamicResources {
			for _, cr := range dr.ClaimResources {
				if cr.DriverName != draslices.Driver {
					continue
				}
				dev, ok := e.cfg.DRA.Lookup(cr.PoolName, cr.DeviceName)
				if !ok {
					e.logOnce("dra/"+cr.PoolName+"/"+cr.DeviceName, func() {
						e.log.WithFields(logrus.Fields{"pool": cr.PoolName, "device": cr.DeviceName,
							"pod": pod.Namespace + "/" + pod.Name}).
							Warn("DRA device not found in the gpu.nvidia.com ResourceSlices; its pod gets no labels on it (logged once per device)")
					})
					continue
				}
				if *held == nil {
					*held = map[string][]draHolder{}
				}
				key := keyUUID + normUUID(dev.UUID)
				o := owner{Namespace: pod.Namespace, Pod: pod.Name, Container: c.Name}
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
				(*held)[key] = append(cur, draHolder{owner: o, claim: dr.ClaimName, claimNamespace: dr.ClaimNamespace,
					pool: cr.PoolName, device: cr.DeviceName, dev: dev})
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
