// Package podattr attributes GPUs to Kubernetes pods. It asks the kubelet's
// PodResources API which pod holds which device, in the background, and
// answers the scrape path from an in-memory map. On shared GPUs
// (time-slicing, MPS) it maps each GPU process to its pod through
// /proc/<pid>/cgroup and exports per-pod usage instead of guessing an owner.
package podattr

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/internal/enrich/kube/podresources"
	"github.com/gpuscope/gpuscope/internal/logonce"
	"github.com/gpuscope/gpuscope/source"
)

// owner is one container holding a device; VGPU is the replica it holds
// of a shared GPU, when the device ID names one.
type owner struct {
	Namespace, Pod, Container string
	VGPU                      string
}

// podUsage is one pod's use of one GPU or MIG instance.
type podUsage struct {
	ref       podRef
	uuid      string
	gpu       string
	gi        string
	memBytes  float64
	smUtil    float64 // ratio 0..1
	hasSMUtil bool
	processes int
}

// snapshot is what the scrape path reads. It is never modified after it
// is published.
type snapshot struct {
	values map[string][]string
	// rows holds, with VirtualGPUs, one row of values per container
	// holding the device, shared devices included.
	rows map[string][][]string
	// draRows holds, with DRA, one row per container whose claim holds
	// the GPU; keyed by the GPU's UUID key.
	draRows map[string][][]string
	// split holds, with VirtualGPUs, each held entity's per-pod values of
	// the per-process fields; keyed by the entity's Key.
	split        map[string]*splitEntity
	pods         int
	shared       int
	unknownIDs   int
	malformed    int
	unattributed int
	usage        []podUsage
	// procPods are the pods of the GPU processes mapped through their
	// cgroup, by PID, for the per-process series (ProcessPod); at most
	// maxPodUsage of them.
	procPods map[uint32]podRef
	// alloc holds every holder of every GPU and MIG instance, shared ones
	// included, for gpuscope_pod_gpu_allocation.
	alloc []allocation
}

// allocation is one container holding one GPU or MIG instance.
type allocation struct {
	owner
	gpu, uuid, gi string
}

// Enricher adds pod, namespace and container labels to GPU series. It
// implements enrich.Enricher.
type Enricher struct {
	cfg       Config
	log       logrus.FieldLogger
	labels    []string
	resources []string

	snap atomic.Pointer[snapshot]
	gen  atomic.Uint64
	up   atomic.Bool

	mu       sync.Mutex // guards client, downLog
	client   *podresources.Client
	downLogd bool
	lastGood time.Time // the last answer of the kubelet, by cfg.Now
	logged   *logonce.Set

	trigger chan struct{}

	refreshErrors prometheus.Counter
	connDrops     prometheus.Counter
	lastSuccess   atomic.Int64 // Unix seconds

	upDesc, lastSuccessDesc, podsDesc, sharedDesc, unknownDesc, malformedDesc, unattributedDesc *prometheus.Desc
	memDesc, smDesc, allocDesc                                                                  *prometheus.Desc
}

// New returns an enricher; Run starts its refresh loop.
func New(cfg Config) (*Enricher, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	labels := LabelNames(cfg.PodUIDLabel, cfg.VirtualGPUs, cfg.DRA != nil)
	e := &Enricher{
		cfg:       cfg,
		log:       cfg.Logger.WithField("component", "podattr"),
		labels:    labels,
		resources: append(append([]string{}, DefaultResourceNames...), cfg.ResourceNames...),
		logged:    logonce.New(maxLogged),
		trigger:   make(chan struct{}, 1),
		refreshErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gpuscope_kubernetes_refresh_errors_total",
			Help: "Failed calls to the kubelet PodResources API, refused answers included.",
		}),
		connDrops: newConnDropsCounter(),
		upDesc: prometheus.NewDesc("gpuscope_kubernetes_up",
			"1 while the kubelet PodResources API answers; while 0, the last pod labels stay for the grace period (--kubernetes-label-grace), then GPU series are served without them.", nil, nil),
		lastSuccessDesc: prometheus.NewDesc("gpuscope_kubernetes_last_refresh_success_timestamp_seconds",
			"When the kubelet PodResources API last answered.", nil, nil),
		podsDesc: prometheus.NewDesc("gpuscope_kubernetes_gpu_pods",
			"Pods on this node holding a GPU resource, in the last kubelet answer.", nil, nil),
		sharedDesc: prometheus.NewDesc("gpuscope_kubernetes_shared_devices",
			"GPUs or MIG instances held by more than one pod (time-slicing, MPS); their series carry no pod labels.", nil, nil),
		unknownDesc: prometheus.NewDesc("gpuscope_kubernetes_unknown_device_ids",
			"Device IDs of GPU resources in the last kubelet answer that could not be mapped to a GPU.", nil, nil),
		malformedDesc: prometheus.NewDesc("gpuscope_kubernetes_malformed_entries",
			"Entries of the last kubelet answer skipped as malformed (no pod name, namespace or container name).", nil, nil),
		unattributedDesc: prometheus.NewDesc("gpuscope_kubernetes_unattributed_processes",
			"GPU processes that could not be mapped to a pod through their cgroup.", nil, nil),
		memDesc: prometheus.NewDesc("gpuscope_pod_gpu_memory_used_bytes",
			"GPU memory held by the processes of a container, from the GPU's process list.",
			[]string{LabelPod, LabelNamespace, LabelContainer, "gpu", "UUID", "GPU_I_ID"}, nil),
		allocDesc: prometheus.NewDesc("gpuscope_pod_gpu_allocation",
			"1 for each container the kubelet says holds the GPU or MIG instance; a shared GPU has one series per holder. Join on UUID and GPU_I_ID.",
			[]string{LabelPod, LabelNamespace, LabelContainer, "gpu", "UUID", "GPU_I_ID"}, nil),
		smDesc: prometheus.NewDesc("gpuscope_pod_gpu_sm_utilization",
			"Share (0..1) of the GPU's SM time used by the processes of a container over the driver's last sampling period.",
			[]string{LabelPod, LabelNamespace, LabelContainer, "gpu", "UUID", "GPU_I_ID"}, nil),
	}
	e.snap.Store(&snapshot{})
	return e, nil
}

// LabelNames implements enrich.Enricher.
func (e *Enricher) LabelNames() []string { return e.labels }

// Generation implements enrich.Enricher. Both counters only grow, so their
// sum changes whenever the pod map or a pod's selected labels change.
func (e *Enricher) Generation() uint64 {
	if e.cfg.PodLabels != nil {
		return e.gen.Load() + e.cfg.PodLabels.Generation()
	}
	return e.gen.Load()
}

// Values implements enrich.Enricher. A shared GPU (several pods) has no
// entry, so its series carry no pod labels.
func (e *Enricher) Values(ent *source.Entity) []string {
	s := e.snap.Load()
	if len(s.values) == 0 || ent == nil {
		return nil
	}
	return lookupKeys(ent, func(k string) []string { return s.values[k] })
}

// lookupKeys finds what lookup holds for an entity under the keys the
// kubelet's device IDs map to: its UUID or index for a GPU (and the GPU's
// links); its MIG UUID, parent UUID and instance, or parent index and
// instance for a MIG instance.
func lookupKeys[T any](ent *source.Entity, lookup func(string) []T) []T {
	switch ent.Kind {
	case source.GPU, source.NVLink:
		if ent.Kind == source.NVLink && ent.Switch >= 0 {
			return nil
		}
		if ent.UUID != "" {
			if v := lookup(keyUUID + normUUID(ent.UUID)); v != nil {
				return v
			}
		}
		if ent.GPU >= 0 {
			return lookup(keyIndex + strconv.Itoa(ent.GPU))
		}
	case source.GPUInstance, source.ComputeInstance:
		if ent.MIGUUID != "" {
			if v := lookup(keyMIG + normUUID(ent.MIGUUID)); v != nil {
				return v
			}
		}
		gi := strconv.Itoa(ent.GPUInstanceID)
		if ent.UUID != "" {
			if v := lookup(keyGI + normUUID(ent.UUID) + "/" + gi); v != nil {
				return v
			}
		}
		if ent.GPU >= 0 {
			return lookup(keyIdxGI + strconv.Itoa(ent.GPU) + "/" + gi)
		}
	}
	return nil
}

// logOnce logs the first time key is seen; past the set's bound, new keys
// are counted but not logged.
func (e *Enricher) logOnce(key string, f func()) { e.logged.Do(key, f) }

// ValueRows implements enrich.RowValuer: with DRA, one row per container
// whose ResourceClaim holds the GPU; with VirtualGPUs, one row per
// container holding the entity's device, shared devices included, as
// dcgm-exporter copies each metric per pod under --kubernetes-enable-dra and
// --kubernetes-virtual-gpus (internal/pkg/transformation/kubernetes.go,
// where the DRA copies replace the others). A device no pod holds keeps its
// one series.
func (e *Enricher) ValueRows(ent *source.Entity) [][]string {
	s := e.snap.Load()
	if ent == nil {
		return nil
	}
	if ent.Kind == source.GPU && len(s.draRows) > 0 && ent.UUID != "" {
		if rows := s.draRows[keyUUID+normUUID(ent.UUID)]; rows != nil {
			return rows
		}
	}
	if len(s.rows) == 0 {
		return nil
	}
	return lookupKeys(ent, func(k string) [][]string { return s.rows[k] })
}
