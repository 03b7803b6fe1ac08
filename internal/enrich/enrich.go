// Package enrich defines how label enrichers (Kubernetes pods, HPC jobs) add
// labels to the series of an entity. Enrichers refresh in the background; the
// scrape path only calls Values, which must not block on I/O.
package enrich

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuscope/gpuscope/source"
)

// Enricher adds a fixed set of labels to the series of the entities it knows.
type Enricher interface {
	// LabelNames are the labels this enricher adds, fixed for its lifetime.
	LabelNames() []string
	// Values returns the label values for the entity, one per LabelNames
	// entry, or nil when nothing applies. Empty strings mean "no value" and
	// are left out of the exposition. The returned slice is read-only and
	// must stay valid until the next Generation change.
	Values(e *source.Entity) []string
	// Generation changes whenever Values may return something new, so the
	// renderer can cache label strings between changes.
	Generation() uint64
	// Collector exports the enricher's own metrics (its health, per-pod
	// shares of shared GPUs, ...). It is registered once.
	prometheus.Collector
}

// Label is one label name and value.
type Label struct {
	Name, Value string
}

// ExtraLabeler is implemented by enrichers whose label names are not known
// up front, such as pod labels copied from the Kubernetes API behind an
// allowlist. The names must be valid Prometheus label names that collide
// neither with the identity labels nor with any enricher's LabelNames; like
// Values, the result is read-only and changes only with Generation.
type ExtraLabeler interface {
	ExtraLabels(e *source.Entity) []Label
	// MaxExtraLabels bounds len(ExtraLabels(e)) for every entity, so that
	// the label budget of a series can be checked up front.
	MaxExtraLabels() int
}

// RowValuer is implemented by enrichers that can give an entity several rows
// of values, one per LabelNames entry each: the entity's series are then
// exported once per row, as dcgm-exporter copies a GPU's series once per HPC
// job that holds it. Nil or empty means Values applies. Like Values, the
// result is read-only and changes only with Generation.
type RowValuer interface {
	ValueRows(e *source.Entity) [][]string
}

// RowSplitter is implemented by enrichers whose rows are the holders of a
// shared device, and that know each holder's own part of some fields (its
// processes' utilisation and memory), as dcgm-exporter writes them under
// --kubernetes-virtual-gpus: for those fields the entity's series without
// this enricher's labels keep the device's value, and one series per row of
// SplitRows carries that row's value. Other fields follow ValueRows.
type RowSplitter interface {
	// SplitFields are the field IDs split among the rows; fixed for the
	// enricher's lifetime.
	SplitFields() []uint16
	// SplitRows are the rows of an entity's split series, one value per
	// LabelNames entry each; nil when the entity's fields are not split.
	// Read-only, and changes only with Generation.
	SplitRows(e *source.Entity) [][]string
	// SplitValues is the field's value for each row of SplitRows, as of the
	// enricher's last refresh; nil when it has none.
	SplitValues(e *source.Entity, field uint16) []float64
}

// ProcessOwner is implemented by enrichers that know which pod a GPU process
// belongs to (podattr, through the process's cgroup; the simulated pods,
// from the simulated layout), for the per-process series. Like Values, it
// answers from memory.
type ProcessOwner interface {
	// ProcessPod returns the pod, namespace and container of process pid,
	// which runs on e (a GPU or a MIG GPU instance), as of the enricher's
	// last refresh; ok is false when the enricher does not know it. The
	// container is empty when the pod is certain and its container is not.
	ProcessPod(e *source.Entity, pid uint32) (pod, namespace, container string, ok bool)
}
