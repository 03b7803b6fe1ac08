// Package simpods attaches simulated pod labels to simulated GPUs and MIG
// instances, so that a demo or a dashboard test shows what --kubernetes adds
// on a real cluster without one. It is used with --source=sim only.
package simpods

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuscope/gpuscope/source"
)

// Pod is one simulated pod.
type Pod struct {
	Namespace, Name, Container string
}

// Layout of a simulated node: the first half of the GPUs run a training job,
// the next quarter a notebook that holds its GPUs but leaves the last one
// idle (the waste the "idle but allocated" views look for), and the rest is
// unallocated.
var (
	Training = Pod{Namespace: "ml-training", Name: "llama-train-0", Container: "trainer"}
	Notebook = Pod{Namespace: "research", Name: "notebook-7f9c", Container: "jupyter"}
)

// Assign returns the pod of each GPU of an n-GPU node (nil: unallocated).
func Assign(n int) []*Pod {
	out := make([]*Pod, n)
	train := (n + 1) / 2
	note := n / 4
	for i := 0; i < n; i++ {
		switch {
		case i < train:
			out[i] = &Training
		case i < train+note:
			out[i] = &Notebook
		}
	}
	return out
}

// IdleGPUs are the allocated GPUs the simulated workload leaves idle.
func IdleGPUs(n int) []int {
	pods := Assign(n)
	for i := n - 1; i >= 0; i-- {
		if pods[i] == &Notebook {
			return []int{i}
		}
	}
	return nil
}

// FreeGPUs are the GPUs no simulated pod holds.
func FreeGPUs(n int) []int {
	var out []int
	for i, p := range Assign(n) {
		if p == nil {
			out = append(out, i)
		}
	}
	return out
}

// NotebookGPUs are the notebook's GPUs that hold its memory and run its
// little work: all of them but the one it leaves idle.
func NotebookGPUs(n int) []int {
	idle := IdleGPUs(n)
	var out []int
	for i, p := range Assign(n) {
		if p == &Notebook && (len(idle) == 0 || i != idle[0]) {
			out = append(out, i)
		}
	}
	return out
}

// Enricher labels GPU series with the simulated pods.
type Enricher struct {
	pods [][]string
	// instances are the pods of MIG instances, by GPU and instance ID.
	instances map[[2]int][]string
	up        prometheus.Gauge
}

// New returns the enricher for an n-GPU simulated node.
func New(n int) *Enricher {
	e := &Enricher{up: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "gpuscope_kubernetes_up",
		Help: "1 while the kubelet PodResources API answers; with --sim-pods the simulated allocations are always current.",
	})}
	e.up.Set(1)
	for _, p := range Assign(n) {
		if p == nil {
			e.pods = append(e.pods, nil)
			continue
		}
		e.pods = append(e.pods, []string{p.Name, p.Namespace, p.Container})
	}
	return e
}

// Holder is a pod that holds a GPU or one of its MIG instances.
type Holder struct {
	GPU int
	// GPUInstanceID is the MIG instance held; -1 for the whole GPU.
	GPUInstanceID int
	Pod           Pod
}

// NewLayout returns the enricher of a node whose pods hold the GPUs and MIG
// instances of holders; the rest have no pod.
func NewLayout(holders []Holder) *Enricher {
	e := New(0)
	for _, h := range holders {
		if h.GPUInstanceID < 0 {
			for len(e.pods) <= h.GPU {
				e.pods = append(e.pods, nil)
			}
			e.pods[h.GPU] = []string{h.Pod.Name, h.Pod.Namespace, h.Pod.Container}
			continue
		}
		if e.instances == nil {
			e.instances = map[[2]int][]string{}
		}
		e.instances[[2]int{h.GPU, h.GPUInstanceID}] = []string{h.Pod.Name, h.Pod.Namespace, h.Pod.Container}
	}
	return e
}

// LabelNames implements enrich.Enricher.
func (e *Enricher) LabelNames() []string { return LabelNames }

// LabelNames are the labels the enricher writes.
var LabelNames = []string{"pod", "namespace", "container"}

func (e *Enricher) Values(ent *source.Entity) []string {
	if ent.Kind == source.GPUInstance && e.instances != nil {
		return e.instances[[2]int{ent.GPU, ent.GPUInstanceID}]
	}
	if ent.GPU < 0 || ent.GPU >= len(e.pods) {
		return nil
	}
	return e.pods[ent.GPU]
}

func (e *Enricher) Generation() uint64 { return 1 }

// ProcessPod implements enrich.ProcessOwner: a process of the simulated
// node belongs to the pod that holds its GPU or MIG instance, and a
// process on a device no pod holds (a scenario's orphan) to none.
func (e *Enricher) ProcessPod(ent *source.Entity, _ uint32) (pod, namespace, container string, ok bool) {
	v := e.Values(ent)
	if len(v) < 3 {
		return "", "", "", false
	}
	return v[0], v[1], v[2], true
}

func (e *Enricher) Describe(ch chan<- *prometheus.Desc) { e.up.Describe(ch) }

func (e *Enricher) Collect(ch chan<- prometheus.Metric) { e.up.Collect(ch) }
