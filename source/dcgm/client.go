package dcgm

import (
	"errors"
	"time"
)

// Mode says how the client reaches a host engine.
type Mode string

const (
	// ModeEmbedded runs the host engine inside the gpuscope process.
	ModeEmbedded Mode = "embedded"
	// ModeRemote connects to a running nv-hostengine over TCP or a unix socket.
	ModeRemote Mode = "remote"
	// ModeStart starts an nv-hostengine child process and connects to it.
	ModeStart Mode = "start"
)

// Configuration errors, told apart so that a caller can name its own
// options in messages.
var (
	ErrUnknownMode        = errors.New("want one of embedded, remote, start")
	ErrAddressNeedsRemote = errors.New("a host engine address is only used in remote mode")
	ErrRemoteNeedsAddress = errors.New("remote mode needs a host engine address (host:port or a unix socket path)")
)

// ParseMode checks a mode name.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeEmbedded, ModeRemote, ModeStart:
		return m, nil
	}
	return "", ErrUnknownMode
}

// ConnectParams is what Client.Connect needs for one mode.
type ConnectParams struct {
	Mode Mode
	// Address is host:port or a unix socket path (remote mode only).
	Address string
	// UnixSocket is true when Address is a socket path.
	UnixSocket bool
}

// EntityGroup is DCGM's entity kind, as far as gpuscope samples it.
type EntityGroup uint8

const (
	EntityGPU EntityGroup = iota + 1
	EntityGPUInstance
	EntityComputeInstance
	// EntityLink is one NVLink (DCGM's FE_LINK): an NvSwitch port or a
	// GPU's link, told apart by the parent encoded in the link ID.
	EntityLink
	EntitySwitch
	// EntityCPU is a Grace CPU; EntityCPUCore one of its cores.
	EntityCPU
	EntityCPUCore
)

// CPUInfo is one CPU and the IDs of its cores, as the host engine's CPU
// hierarchy lists them.
type CPUInfo struct {
	ID    uint
	Cores []uint
}

// EntityRef names one DCGM entity.
type EntityRef struct {
	Group EntityGroup
	// ID is DCGM's entity ID; for links the raw, encoded link ID.
	ID uint
}

// GPUInfo is a GPU's identity, as the host engine reports it.
type GPUInfo struct {
	ID       uint
	UUID     string
	PCIBusID string
	Model    string
}

// MIGInfo is one entry of the MIG instance hierarchy: a GPU instance (parent
// a GPU) or a compute instance (parent a GPU instance).
type MIGInfo struct {
	Entity EntityRef
	Parent EntityRef
	// GPU is the DCGM ID of the physical GPU the instance lives on.
	GPU uint
	// MIGUUID is the MIG device UUID, when the host engine knows it.
	MIGUUID string
	// InstanceID and ComputeInstanceID are NVML's IDs (the GPU_I_ID label).
	InstanceID        uint
	ComputeInstanceID uint
	// Profile is the GPU instance profile name ("1g.10gb").
	Profile string
}

// LinkInfo is one NvSwitch port.
type LinkInfo struct {
	// ID is the raw DCGM link entity ID.
	ID     uint
	Switch uint
	Index  uint
	Up     bool
}

// GPULinkInfo is one NVLink of a GPU (DCGM's FE_LINK with a GPU parent).
type GPULinkInfo struct {
	// ID is the raw DCGM link entity ID.
	ID uint
	// GPU is the DCGM ID of the parent GPU; Index the link's index on it.
	GPU   uint
	Index uint
	Up    bool
}

// ValueKind is the type of a sampled value.
type ValueKind uint8

const (
	KindInt64 ValueKind = iota + 1
	KindFloat64
	KindString
)

// Value is one sample read from the host engine. Blank values (DCGM's
// sentinels for "no data") are passed through unchanged; the source drops
// them, so that the rule lives in one tested place.
type Value struct {
	Entity  EntityRef
	FieldID uint16
	// TS is the sample time in Unix microseconds, as DCGM keeps it.
	TS   int64
	Kind ValueKind
	// Status is DCGM's per-value status; non-zero means there is no value.
	Status int
	Int    int64
	Float  float64
	Str    string
}

// HealthIncident is one finding of a health check.
type HealthIncident struct {
	Entity EntityRef
	// System is the watch that found it (DCGM's dcgmHealthSystems_t bit,
	// 0xFFFFFFFF for findings of every watch at once).
	System uint32
	// Result is DCGM's health result: 0 pass, 10 warn, 20 fail.
	Result int
	// Code is DCGM's error code (dcgmError_t).
	Code    int
	Message string
}

// MaxFieldsPerGroup is the most fields a DCGM field group holds
// (DCGM_MAX_FIELD_IDS_PER_FIELD_GROUP in dcgm_structs.h).
const MaxFieldsPerGroup = 128

// MaxLatestValues is the most (entity, field) pairs one LatestValues call
// asks for. go-dcgm allocates a dcgmFieldValue_v2 of about 4 KiB per pair,
// and copies it once, so one call holds at most 4 MiB however many MIG
// instances a node has.
const MaxLatestValues = 512

// MaxSinceValues bounds one since-read of the event fields (XID and clock
// events), which must not lose a sample between reads: their watches keep
// at most this many samples over all their entities and fields, so that a
// late read of a wide MIG node holds at most about 32 MiB of go-dcgm's
// values (go-dcgm itself refuses a read of more than 131,072).
const MaxSinceValues = 8192

// DCGM's per-value statuses (dcgmReturn_t, dcgm_structs.h) that mean no
// value now rather than a refusal.
const (
	StatusOK     = 0
	StatusNoData = -14
)

// Handle is an opaque group or field-group handle of the host engine.
type Handle uintptr

// Client is the part of DCGM that gpuscope uses. Implementations must be safe
// for use from one goroutine at a time; the source serialises its calls.
type Client interface {
	// Connect initialises DCGM in the given mode. Errors wrap ErrLibraryMissing,
	// ErrNotListening or ErrVersionMismatch when that is the cause.
	Connect(p ConnectParams) error
	// Disconnect releases the connection; it is safe after a failed Connect.
	Disconnect() error
	// HostEngineVersion is the connected host engine's release ("4.6.1"),
	// which decides the fields it knows (dcgmHostengineVersionInfo).
	HostEngineVersion() (string, error)

	GPUs() ([]GPUInfo, error)
	MIGHierarchy() ([]MIGInfo, error)
	SwitchLinks() ([]LinkInfo, error)
	// GPULinks lists the NVLinks of every GPU, up or not.
	GPULinks() ([]GPULinkInfo, error)
	Switches() ([]uint, error)
	// CPUs lists the CPUs DCGM monitors (Grace); none elsewhere.
	CPUs() ([]CPUInfo, error)

	CreateGroup(name string, entities []EntityRef) (Handle, error)
	DestroyGroup(h Handle) error
	CreateFieldGroup(name string, fields []uint16) (Handle, error)
	DestroyFieldGroup(h Handle) error
	// WatchFields starts sampling fieldGroup on group every updateFreq,
	// keeping samples for maxKeepAge or maxKeepSamples, whichever is fewer.
	WatchFields(group, fieldGroup Handle, updateFreq, maxKeepAge time.Duration, maxKeepSamples int) error
	// ValuesSince returns every kept sample newer than since (Unix
	// microseconds; 0 for all) and the timestamp to pass next time.
	ValuesSince(group, fieldGroup Handle, since int64) ([]Value, int64, error)
	// LatestValues returns the latest sample of every (entity, field) pair,
	// each with its own status (dcgmEntitiesGetLatestValues): a pair the
	// host engine refuses fails alone. At most MaxLatestValues pairs.
	LatestValues(entities []EntityRef, fields []uint16) ([]Value, error)

	HealthSet(group Handle) error
	HealthCheck(group Handle) ([]HealthIncident, error)
	// NvLinkP2PStatus returns the NVLink P2P status of every pair of GPUs:
	// row i, column j is GPU i's status towards GPU j (dcgmGetNvLinkP2PStatus;
	// source.P2PLink.Status codes). None when the host engine does not
	// support the query.
	NvLinkP2PStatus() ([][]int, error)

	// SupportedProfilingFields lists the profiling (DCP) field IDs the GPU
	// can sample. Errors wrap ErrModuleNotLoaded or ErrNotSupported.
	SupportedProfilingFields(gpu uint) ([]uint16, error)
	// PauseProfiling releases the profiling counters so another profiler
	// (Nsight) can take them; ResumeProfiling takes them back.
	PauseProfiling() error
	ResumeProfiling() error
}

// Errors a Client classifies its failures into, so that the source can react
// and say what to do.
var (
	ErrLibraryMissing  = errors.New("libdcgm.so.4 not found (install the datacenter-gpu-manager package, or use the NVML source)")
	ErrNotListening    = errors.New("host engine not listening")
	ErrVersionMismatch = errors.New("DCGM version mismatch between libdcgm and the host engine")
	// ErrConnectionLost means the host engine went away mid-run.
	ErrConnectionLost = errors.New("host engine connection lost")
	// ErrModuleNotLoaded means the host engine has no profiling module.
	ErrModuleNotLoaded = errors.New("DCGM profiling module not loaded")
	// ErrInUse means another profiler holds the profiling counters.
	ErrInUse = errors.New("profiling counters in use by another profiler")
	// ErrTooManyValues means a read of the samples since a position would
	// return more values than one read may (go-dcgm's limit).
	ErrTooManyValues = errors.New("more samples than one read returns")
	// ErrNotSupported means the GPU or host engine cannot do what was asked.
	ErrNotSupported = errors.New("not supported")
)
