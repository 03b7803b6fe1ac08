// Package source defines what every GPU source (dcgm, nvml, sim) gives the
// engine. The engine, the enrichers and the renderer only see these types, so
// they never know which source is feeding them.
package source

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/gpuscope/gpuscope/counters"
)

// EntityKind says what a sampled entity is.
type EntityKind uint8

const (
	GPU EntityKind = iota
	// GPUInstance is a MIG GPU instance.
	GPUInstance
	// ComputeInstance is a MIG compute instance inside a GPU instance.
	ComputeInstance
	NVLink
	NvSwitch
	// CPU is a Grace CPU (DCGM's FE_CPU); CPUCore one of its cores.
	CPU
	CPUCore
)

func (k EntityKind) String() string {
	switch k {
	case GPU:
		return "gpu"
	case GPUInstance:
		return "gpu_instance"
	case ComputeInstance:
		return "compute_instance"
	case NVLink:
		return "nvlink"
	case NvSwitch:
		return "nvswitch"
	case CPU:
		return "cpu"
	case CPUCore:
		return "cpu_core"
	}
	return "unknown"
}

// Entity is one thing fields are sampled on. Its identity fields become the
// dcgm-exporter compatible labels.
type Entity struct {
	Kind EntityKind
	// GPU is the index of the GPU (the parent GPU for MIG instances and links).
	GPU int
	// UUID is the GPU's UUID (the parent GPU's for MIG instances and links).
	UUID      string
	PCIBusID  string
	Device    string // "nvidia0"
	ModelName string
	// MIGUUID is the MIG device's own UUID ("MIG-..."), empty for non-MIG.
	MIGUUID string
	// GPUInstanceID and GPUInstanceProfile are set for MIG entities;
	// GPUInstanceID is -1 otherwise.
	GPUInstanceID      int
	GPUInstanceProfile string // "1g.10gb"
	// ComputeInstanceID is set for compute instances, -1 otherwise.
	ComputeInstanceID int
	// Link is the NVLink index for NVLink entities, -1 otherwise.
	Link int
	// Switch is the NvSwitch ID for NvSwitch entities (and their links), -1 otherwise.
	Switch int
	// CPU is the CPU ID for CPU entities and the parent CPU's for cores;
	// CPUCore is the core ID for cores. Both are -1 otherwise.
	CPU, CPUCore int
}

// NewGPU returns a GPU entity with the non-applicable indexes set to -1.
func NewGPU(index int, uuid, pciBusID, model string) Entity {
	return Entity{
		Kind: GPU, GPU: index, UUID: uuid, PCIBusID: pciBusID, ModelName: model,
		Device: "nvidia" + strconv.Itoa(index), GPUInstanceID: -1, ComputeInstanceID: -1, Link: -1, Switch: -1,
		CPU: -1, CPUCore: -1,
	}
}

// NewCPU returns a CPU entity, or a core of CPU cpu when core >= 0.
func NewCPU(cpu, core int) Entity {
	e := Entity{Kind: CPU, GPU: -1, GPUInstanceID: -1, ComputeInstanceID: -1, Link: -1, Switch: -1, CPU: cpu, CPUCore: core}
	if core >= 0 {
		e.Kind = CPUCore
	}
	return e
}

// Key identifies the entity across sources and reconnects: the same GPU seen
// through DCGM and through NVML has the same key, so switching sources keeps
// its series.
func (e *Entity) Key() string {
	switch e.Kind {
	case GPU:
		return "gpu/" + e.UUID
	case GPUInstance:
		return "gi/" + e.UUID + "/" + strconv.Itoa(e.GPUInstanceID)
	case ComputeInstance:
		return "ci/" + e.UUID + "/" + strconv.Itoa(e.GPUInstanceID) + "/" + strconv.Itoa(e.ComputeInstanceID)
	case NVLink:
		if e.Switch >= 0 {
			return "swlink/" + strconv.Itoa(e.Switch) + "/" + strconv.Itoa(e.Link)
		}
		return "link/" + e.UUID + "/" + strconv.Itoa(e.Link)
	case NvSwitch:
		return "switch/" + strconv.Itoa(e.Switch)
	case CPU:
		return "cpu/" + strconv.Itoa(e.CPU)
	case CPUCore:
		return "cpucore/" + strconv.Itoa(e.CPU) + "/" + strconv.Itoa(e.CPUCore)
	}
	return "unknown"
}

// Group is the set of fields watched at one interval. The engine hands the
// source one Group per distinct interval; for DCGM each becomes a field group.
type Group struct {
	Interval time.Duration
	// Fields are the fields the source reads, each once: never a derived
	// exporter-side field nor the health pseudo-field (ReadFor).
	Fields []counters.Field
	// Health asks for the GPUs' health checks at Interval, handed over with
	// Sink.Health (DCGM_EXP_GPU_HEALTH_STATUS in the counters file).
	Health bool
}

// Sink receives what a source reads. A source calls it from inside Collect
// only; the engine's implementation does not allocate in the steady state.
type Sink interface {
	// Value records one numeric sample taken at ts (Unix nanoseconds).
	Value(e *Entity, field uint16, ts int64, v float64)
	// Text records the value of a text field (label-type fields).
	Text(e *Entity, field uint16, s string)
	// Unsupported says the field cannot be read on this entity. The engine
	// logs it once, drops the series and reports gpuscope_field_supported 0.
	Unsupported(e *Entity, field uint16, reason string)
	// Fail counts a failed read of a field that is otherwise supported.
	Fail(e *Entity, field uint16, err error)
	// XID records one XID error event on the entity, at ts (Unix nanoseconds).
	// Every event counts, repeats of the same code included.
	XID(e *Entity, xid uint64, ts int64)
	// Health records one health check of the entity taken at ts: a result
	// for every watch of HealthWatches, passing ones included. The sink may
	// keep the slice and never changes it; the source never changes it
	// after handing it over, so a source may share one slice between calls.
	Health(e *Entity, ts int64, results []HealthResult)
	// P2P records the NVLink peer-to-peer status of the GPU towards each
	// other GPU, read at ts. The same sharing rule as Health applies.
	P2P(e *Entity, ts int64, links []P2PLink)
}

// P2PLink is the NVLink peer-to-peer status of a GPU towards one peer.
type P2PLink struct {
	// Peer is the peer's GPU index (the gpu label of its series).
	Peer int
	// Status is the status code DCGM and NVML share (dcgmNvLinkP2PStatus_t,
	// nvmlGpuP2PStatus_t): 0 OK, 1 chipset not supported, 2 GPU not
	// supported, 3 topology not supported, 4 disabled by registry key,
	// 5 not supported, 6 unknown.
	Status int
}

// P2PStatusName is the link_status label of a status code, as dcgm-exporter
// writes it (internal/pkg/collector/p2p_status_collector.go,
// p2pStatusToString); codes it does not know are "Unknown".
func P2PStatusName(status int) string {
	switch status {
	case 0:
		return "OK"
	case 1:
		return "ChipsetNotSupported"
	case 2:
		return "GPUNotSupported"
	case 3:
		return "TopologyNotSupported"
	case 4:
		return "DisabledByRegKey"
	case 5:
		return "NotSupported"
	}
	return "Unknown"
}

// P2P status codes the sources use by name.
const (
	P2POK           = 0
	P2PNotSupported = 5
)

// HealthResult is what one health watch found on an entity.
type HealthResult struct {
	// Watch names the watched subsystem, one of HealthWatches.
	Watch string
	// ErrorCode names DCGM's error (dcgmError_t), "DCGM_FR_OK" when the
	// watch passes.
	ErrorCode string
	// Result is DCGM's health result: 0 pass, 10 warn, 20 fail.
	Result int
}

// HealthWatches are the health watches reported for each GPU, in the order
// dcgm-exporter exports them (internal/pkg/collector/gpu_health_collector.go,
// gpuHealthChecks). "ALL" holds what DCGM reports under every watch at once,
// such as XID 79.
var HealthWatches = []string{"PCIE", "NVLINK", "PMU", "MCU", "MEM", "SM", "INFOROM", "THERMAL", "POWER", "DRIVER", "ALL"}

// PassingHealth returns a result per watch of HealthWatches, all passing;
// a source overwrites the watches that found something.
func PassingHealth() []HealthResult {
	out := make([]HealthResult, len(HealthWatches))
	for i, w := range HealthWatches {
		out[i] = HealthResult{Watch: w, ErrorCode: "DCGM_FR_OK"}
	}
	return out
}

// SetHealth records r in results over the entry of the same watch, keeping
// the worse result when the watch already has one.
func SetHealth(results []HealthResult, r HealthResult) {
	for i := range results {
		if results[i].Watch == r.Watch {
			if r.Result >= results[i].Result {
				results[i] = r
			}
			return
		}
	}
}

// Source is a GPU backend.
type Source interface {
	// Name is "dcgm", "nvml" or "sim"; it is the source label of
	// gpuscope_source_up.
	Name() string
	// Watch tells the source which fields to read, grouped by interval. It is
	// called once after the source opens, and again when the counters file is
	// reloaded or the source reconnects.
	Watch(groups []Group) error
	// Entities returns the entities the source currently sees. The engine
	// calls it after Watch and after each Collect that returns
	// ErrEntitiesChanged. The pointers identify the entities in Sink calls
	// and must stay valid (and unchanged) until the next call of Entities;
	// the source hands the sink only pointers from that list.
	Entities() []*Entity
	// Collect reads one group (an index into the last Watch's groups) and
	// hands every sample to sink. Pull sources (nvml, sim) sample now; DCGM
	// hands over every sample since the previous Collect of the group, so
	// that window statistics see all of them. The engine never runs two
	// Collect calls at once, but Status may be called while one runs.
	Collect(ctx context.Context, group int, sink Sink) error
	// Status reports the source's health for /ready and the self metrics.
	Status() Status
	// Close releases the backend. It is safe to call once, after which the
	// source is not used again.
	Close() error
}

// Status is a source's health.
type Status struct {
	// Up is false while the backend is unreachable (host engine down,
	// driver gone).
	Up bool
	// Err says why the source is down, when it is.
	Err error
	// Lost holds the keys of entities that stopped answering (a GPU that
	// fell off the bus). They are retried with backoff.
	Lost []string
	// ProfilingPaused is true while profiling fields are released (DCGM).
	ProfilingPaused bool
	// Active names the backend feeding an auto source ("dcgm" or "nvml").
	Active string
}

// ErrEntitiesChanged is returned (possibly wrapped) by Collect when the
// entity list changed, for example after a reconnect or a MIG reconfiguration.
// The samples already handed to the sink in that call are kept.
var ErrEntitiesChanged = errors.New("entities changed")

// Process is one compute process on a GPU, as the driver lists it (every
// source reads it through NVML's process list, or simulates it). Pod
// attribution of shared GPUs uses it.
type Process struct {
	PID uint32
	// UUID is the GPU's UUID; GPUInstanceID is -1 outside MIG.
	UUID          string
	GPUInstanceID int
	// UsedMemoryBytes is the framebuffer memory the process holds.
	UsedMemoryBytes uint64
	// SMUtil is the process's SM utilisation in percent over the last
	// sampling period, or -1 when the driver gives none (always inside a
	// MIG instance).
	SMUtil float64
	// Name is the process's name as the driver gives it
	// (nvmlSystemGetProcessName: its executable, at most 255 bytes), or,
	// when the driver cannot read it, nvidia-smi's token for why
	// ("[Insufficient Permissions]", "[N/A]", "[Unknown Error]"). It
	// comes from the process itself: any bytes, any length.
	Name string
}

// ProcessLister is implemented by sources that can list GPU processes.
// Processes returns nil when the source cannot list them now (DCGM while
// NVML cannot be opened beside it, or while its host engine is down), and
// an empty slice when no process runs. The caller must not change it.
type ProcessLister interface {
	Processes() []Process
}

// ProfilingController is implemented by sources that hold a profiling lock
// (DCGM), so an engineer can run Nsight beside gpuscope.
type ProfilingController interface {
	PauseProfiling() error
	ResumeProfiling() error
}
