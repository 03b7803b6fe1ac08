package podattr

import (
	"fmt"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/internal/enrich/kube/draslices"
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
	// (--kubernetes-pod-labels); they go on the series of the devices a
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
