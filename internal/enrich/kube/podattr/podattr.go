// Package podattr attributes GPUs to Kubernetes pods. It asks the kubelet's
// PodResources API which pod holds which device, in the background, and
// answers the scrape path from an in-memory map. On shared GPUs
// (time-slicing, MPS) it maps each GPU process to its pod through
// /proc/<pid>/cgroup and exports per-pod usage instead of guessing an owner.
package podattr

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/internal/enrich/kube/draslices"
	"github.com/gpuscope/gpuscope/internal/enrich/kube/podresources"
	"github.com/gpuscope/gpuscope/internal/enrich/logonce"
	"github.com/gpuscope/gpuscope/source"
)

// Defaults of Config.
const (
	DefaultSocket          = "/var/lib/kubelet/pod-resources/kubelet.sock"
	DefaultRefreshInterval = 5 * time.Second
	DefaultProcRoot        = "/proc"
	DefaultLogRoot         = "/var/log"
	// DefaultMaxRecvMsgSize allows kubelet answers far above gRPC's 4 MB
	// default: a node with thousands of pods answers with tens of MB.
	DefaultMaxRecvMsgSize = 64 << 20
	// DefaultMaxDevices bounds the device map. A node has at most a few
	// hundred GPU, MIG and time-slice IDs; the cap only guards against a
	// broken kubelet.
	DefaultMaxDevices = 65536
	// maxOwnersPerDevice bounds the owners kept for one device: beyond two
	// it is shared anyway, the rest only feeds the count.
	maxOwnersPerDevice = 64
	// maxPodUsage bounds the per-pod usage series.
	maxPodUsage = 4096
	// maxLogged bounds the set of messages logged only once.
	maxLogged = 1024
)

// DefaultResourceNames are the extended resources whose devices are GPUs.
// A trailing '*' matches any suffix.
var DefaultResourceNames = []string{"nvidia.com/gpu", "nvidia.com/mig-*"}

// Label names added to GPU series.
const (
	LabelPod       = "pod"
	LabelNamespace = "namespace"
	LabelContainer = "container"
	LabelPodUID    = "pod_uid"
	// LabelVGPU names the replica of a shared GPU (--kubernetes-virtual-gpus).
	LabelVGPU = "vgpu"
)

// DRALabels are added with Config.DRA, in this order: the claim and the
// device a GPU series' pod holds it through, as dcgm-exporter names them
// (internal/pkg/transformation/const.go).
var DRALabels = []string{"dra_claim_name", "dra_claim_namespace", "dra_driver_name", "dra_pool_name",
	"dra_device_name", "dra_mig_profile", "dra_mig_device_uuid"}

// LabelNames are the labels an enricher configured with PodUIDLabel,
// VirtualGPUs and DRA writes, in order; startup counts them in the label
// budget before the enricher exists.
func LabelNames(podUID, virtualGPUs, dra bool) []string {
	labels := []string{LabelPod, LabelNamespace, LabelContainer}
	// With virtual GPUs the per-pod values of the per-process fields always
	// carry pod_uid (SplitRows); other series carry it only when asked for.
	if podUID || virtualGPUs {
		labels = append(labels, LabelPodUID)
	}
	if virtualGPUs {
		labels = append(labels, LabelVGPU)
	}
	if dra {
		labels = append(labels, DRALabels...)
	}
	return labels
}

// DRADevices maps a DRA claim's device, named by pool and device, to a GPU
// (draslices.Watcher).
type DRADevices interface {
	Lookup(pool, device string) (draslices.Device, bool)
}

// Config configures the enricher. Zero values take the defaults.
type Config struct {
	// Socket is the kubelet PodResources socket.
	Socket string
	// ResourceNames are extra resource names (beyond DefaultResourceNames)
	// whose device IDs name GPUs; a trailing '*' matches any suffix.
	ResourceNames []string
	// RefreshInterval is the period of the background refresh.
	RefreshInterval time.Duration
	// PodUIDLabel adds the pod_uid label. The UID is read from the names
	// under <LogRoot>/pods, so that directory must be visible.
	PodUIDLabel bool
	// SharedGPUAttribution maps GPU processes to pods through
	// <ProcRoot>/<pid>/cgroup (needs the host PID namespace) and exports
	// per-pod memory and SM utilisation.
	SharedGPUAttribution bool
	// ProcRoot is where /proc is read (a fixture tree in tests).
	ProcRoot string
	// LogRoot holds the kubelet's containers/ and pods/ log directories,
	// whose names map container IDs and pod UIDs to pod names.
	LogRoot string
	// Processes lists GPU processes; nil when the source cannot.
	Processes func() []source.Process
	// Entities lists the source's entities; it gives the per-pod series
	// their gpu label and maps MIG processes to MIG devices. May be nil.
	Entities func() []*source.Entity
	// MaxRecvMsgSize is the largest kubelet answer accepted, in bytes.
	MaxRecvMsgSize int
	// MaxDevices bounds the number of distinct devices tracked.
	MaxDevices int
	// PodLabels, when set, gives the selected Kubernetes labels of pods
	// (--kubernetes.pod-labels); they go on the series of the devices a
	// single pod holds.
	PodLabels PodLabelSource
	// LabelGrace is how long the last good pod map stays on the series
	// while the kubelet does not answer, so that one failed call does not
	// churn every series; 3 refresh intervals when 0.
	LabelGrace time.Duration
	// VirtualGPUs exports one copy of a device's series per container
	// holding it, shared devices included, each with the vgpu label (the
	// replica of a time-sliced GPU), as dcgm-exporter's
	// --kubernetes-virtual-gpus does.
	VirtualGPUs bool
	// DRA, when set, attributes GPUs allocated through DRA ResourceClaims
	// (the kubelet's dynamic resources of driver gpu.nvidia.com): each GPU
	// series is copied once per container whose claim holds the GPU, with
	// the DRALabels, as dcgm-exporter's --kubernetes-enable-dra does.
	DRA DRADevices
	// Now is the clock of the grace period; time.Now when nil.
	Now func() time.Time
	// Logger receives the enricher's logs.
	Logger logrus.FieldLogger
}

func (c *Config) setDefaults() {
	if c.Socket == "" {
		c.Socket = DefaultSocket
	}
	if c.RefreshInterval <= 0 {
		c.RefreshInterval = DefaultRefreshInterval
	}
	if c.ProcRoot == "" {
		c.ProcRoot = DefaultProcRoot
	}
	if c.LogRoot == "" {
		c.LogRoot = DefaultLogRoot
	}
	if c.MaxRecvMsgSize <= 0 {
		c.MaxRecvMsgSize = DefaultMaxRecvMsgSize
	}
	if c.MaxDevices <= 0 {
		c.MaxDevices = DefaultMaxDevices
	}
	if c.Logger == nil {
		c.Logger = logrus.StandardLogger()
	}
	if c.LabelGrace == 0 {
		c.LabelGrace = 3 * c.RefreshInterval
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// MinRefreshInterval is the shortest refresh interval: each refresh is a
// kubelet call.
const MinRefreshInterval = 100 * time.Millisecond

func (c *Config) validate() error {
	for _, n := range c.ResourceNames {
		if err := CheckResourceName(n); err != nil {
			return fmt.Errorf("resource names: %w", err)
		}
	}
	if c.LabelGrace < 0 {
		return fmt.Errorf("label grace %s is negative", c.LabelGrace)
	}
	if c.RefreshInterval < MinRefreshInterval {
		return fmt.Errorf("refresh interval %s is below the minimum of %s", c.RefreshInterval, MinRefreshInterval)
	}
	return nil
}

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
			"1 while the kubelet PodResources API answers; while 0, the last pod labels stay for the grace period (--kubernetes.label-grace), then GPU series are served without them.", nil, nil),
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

// RequestRefresh asks the loop for a refresh now, without waiting for it.
func (e *Enricher) RequestRefresh() {
	select {
	case e.trigger <- struct{}{}:
	default:
	}
}

// Run refreshes until ctx ends. It never returns an error for a kubelet
// that is away: that is reported in the metrics and logs and retried.
func (e *Enricher) Run(ctx context.Context) error {
	defer e.closeConn()
	t := time.NewTicker(e.cfg.RefreshInterval)
	defer t.Stop()
	for {
		_ = e.Refresh(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-e.trigger:
		}
	}
}

// Refresh asks the kubelet once and publishes the result.
func (e *Enricher) Refresh(ctx context.Context) error {
	resp, err := e.list(ctx)
	if err != nil {
		e.refreshErrors.Inc()
		e.markDown(err)
		return err
	}
	s := e.build(resp)
	e.markUp()
	e.publish(s)
	return nil
}

// markDown reports the kubelet away. The last good pod map stays for
// LabelGrace after the last answer: dropping it at the first failed call
// would end every labelled series and start new ones a refresh later.
func (e *Enricher) markDown(err error) {
	e.up.Store(false)
	e.mu.Lock()
	first := !e.downLogd
	e.downLogd = true
	expired := e.lastGood.IsZero() || e.cfg.Now().Sub(e.lastGood) >= e.cfg.LabelGrace
	e.mu.Unlock()
	if expired {
		if old := e.snap.Load(); len(old.values) > 0 {
			e.log.WithField("grace", e.cfg.LabelGrace).Warn("kubelet pod-resources API still away after the grace period; serving GPU series without pod labels until it answers")
		}
		e.publish(&snapshot{})
	}
	if first {
		e.log.WithError(err).WithField("grace", e.cfg.LabelGrace).Warn("kubelet pod-resources API unavailable; keeping the last pod labels for the grace period")
	}
}

func (e *Enricher) markUp() {
	e.up.Store(true)
	e.lastSuccess.Store(time.Now().Unix())
	e.mu.Lock()
	e.lastGood = e.cfg.Now()
	wasDown := e.downLogd
	e.downLogd = false
	e.mu.Unlock()
	if wasDown {
		e.log.Info("kubelet pod-resources API answers again; pod labels restored")
	}
}

// logOnce logs the first time key is seen; past the set's bound, new keys
// are counted but not logged.
func (e *Enricher) logOnce(key string, f func()) { e.logged.Do(key, f) }

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

// Describe implements prometheus.Collector.
func (e *Enricher) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{e.upDesc, e.lastSuccessDesc, e.podsDesc, e.sharedDesc,
		e.unknownDesc, e.malformedDesc, e.unattributedDesc, e.memDesc, e.smDesc, e.allocDesc} {
		ch <- d
	}
	e.refreshErrors.Describe(ch)
	e.connDrops.Describe(ch)
}

// Collect implements prometheus.Collector; it reads the last snapshot only.
func (e *Enricher) Collect(ch chan<- prometheus.Metric) {
	s := e.snap.Load()
	up := 0.0
	if e.up.Load() {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(e.upDesc, prometheus.GaugeValue, up)
	if ts := e.lastSuccess.Load(); ts > 0 {
		ch <- prometheus.MustNewConstMetric(e.lastSuccessDesc, prometheus.GaugeValue, float64(ts))
	}
	e.refreshErrors.Collect(ch)
	e.connDrops.Collect(ch)
	ch <- prometheus.MustNewConstMetric(e.podsDesc, prometheus.GaugeValue, float64(s.pods))
	ch <- prometheus.MustNewConstMetric(e.sharedDesc, prometheus.GaugeValue, float64(s.shared))
	ch <- prometheus.MustNewConstMetric(e.unknownDesc, prometheus.GaugeValue, float64(s.unknownIDs))
	ch <- prometheus.MustNewConstMetric(e.malformedDesc, prometheus.GaugeValue, float64(s.malformed))
	if e.cfg.SharedGPUAttribution {
		ch <- prometheus.MustNewConstMetric(e.unattributedDesc, prometheus.GaugeValue, float64(s.unattributed))
	}
	for _, a := range s.alloc {
		ch <- prometheus.MustNewConstMetric(e.allocDesc, prometheus.GaugeValue, 1, a.Pod, a.Namespace, a.Container, a.gpu, a.uuid, a.gi)
	}
	for _, u := range s.usage {
		lv := []string{u.ref.Pod, u.ref.Namespace, u.ref.Container, u.gpu, u.uuid, u.gi}
		ch <- prometheus.MustNewConstMetric(e.memDesc, prometheus.GaugeValue, u.memBytes, lv...)
		if u.hasSMUtil {
			ch <- prometheus.MustNewConstMetric(e.smDesc, prometheus.GaugeValue, u.smUtil, lv...)
		}
	}
}
