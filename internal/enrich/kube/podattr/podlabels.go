package podattr

import (
	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/source"
)

// PodLabelSource gives the selected labels of a pod. It is kept in memory
// and refreshed in the background (internal/enrich/kube/podlabels), so lookups never
// block the scrape.
type PodLabelSource interface {
	// Labels returns the pod's selected labels, nil when none; read-only.
	Labels(namespace, pod string) []enrich.Label
	// Generation changes whenever some pod's labels change.
	Generation() uint64
	// MaxLabels bounds the labels Labels returns for one pod.
	MaxLabels() int
}

// ExtraLabels implements enrich.ExtraLabeler: the selected labels of the
// pod that alone holds the entity's device. Shared and unattributed devices
// get none, as they get no pod label.
func (e *Enricher) ExtraLabels(ent *source.Entity) []enrich.Label {
	if e.cfg.PodLabels == nil {
		return nil
	}
	v := e.Values(ent)
	if len(v) < 2 || v[0] == "" || v[1] == "" {
		return nil
	}
	return e.cfg.PodLabels.Labels(v[1], v[0])
}

// MaxExtraLabels implements enrich.ExtraLabeler.
func (e *Enricher) MaxExtraLabels() int {
	if e.cfg.PodLabels == nil {
		return 0
	}
	return e.cfg.PodLabels.MaxLabels()
}

var _ enrich.ExtraLabeler = (*Enricher)(nil)
