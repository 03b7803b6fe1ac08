// Package nvmlfake is a scripted NVML for tests: go-nvml's DGX mock servers
// (which preset only identity and memory size) with every call the nvml
// source makes answered from per-GPU values that a test sets, plus injected
// errors, delays, lost GPUs, GPM, MIG instances and an XID event queue.
package nvmlfake

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	timesource "github.com/gpuscope/gpuscope/internal/clock"
)

// Model picks the DGX server the fake is built on.
type Model int

const (
	// DGXH100 has eight Hopper GPUs, with GPM.
	DGXH100 Model = iota
	// DGXA100 has eight Ampere GPUs, without GPM.
	DGXA100
)

// Readings are the values one GPU answers with, in NVML's units.
type Readings struct {
	SMClock, MemClock, VideoClock, MaxSMClock, AppSMClock uint32
	MaxMemClock, MaxVideoClock                            uint32
	Pstate                                                gonvml.Pstates
	FanPct                                                uint32
	ComputeMode                                           gonvml.ComputeMode
	Persistence                                           gonvml.EnableState
	PowerDefaultMW, PowerMinMW, PowerMaxMW                uint32
	// Fabric answers the fabric info calls; FabricVersion is the newest
	// struct version of nvmlDeviceGetGpuFabricInfoV the driver knows (0
	// is 3): a newer one is refused with ARGUMENT_VERSION_MISMATCH.
	Fabric                                 gonvml.GpuFabricInfoV
	FabricVersion                          uint32
	GPUTemp, SlowdownTemp, ShutdownTemp    uint32
	MemoryTemp                             uint32 // through field values
	PowerMW, PowerLimitMW, EnforcedLimitMW uint32
	EnergyMJ                               uint64
	PCIeTxKBs, PCIeRxKBs                   uint32
	PCIeReplay                             int
	// PCIeGen and PCIeWidth are the link's current and maximum
	// generation and width: {current, max}.
	PCIeGen, PCIeWidth [2]int
	Util               gonvml.Utilization
	EncUtil, DecUtil   uint32
	ClockEventReasons  uint64
	// ViolationNs is indexed by gonvml.PerfPolicyType.
	ViolationNs map[gonvml.PerfPolicyType]uint64
	Memory      gonvml.Memory_v2
	// ECC is indexed by [MemoryErrorType][EccCounterType].
	ECC                    [2][2]uint64
	RetiredSBE, RetiredDBE int
	RetiredPending         bool
	RemapCorr, RemapUnc    int
	RemapPending, RemapBad bool
	// FieldValues answers GetFieldValues by NVML field ID (scope ignored).
	FieldValues map[uint32]uint64
	// NVLinkRawKiB answers the per-link raw throughput fields: [link]{tx, rx}.
	NVLinkRawKiB [][2]uint64
	// NVLinkDataKiB answers the per-link data throughput fields (the
	// payload, without the protocol overhead the raw ones count):
	// [link]{tx, rx}. Scope 0xFFFFFFFF answers the sum over the links, the
	// scope DCGM reads the total with (DcgmCacheManager.cpp,
	// DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL).
	NVLinkDataKiB [][2]uint64
	// VGPULicensed nil means "not a vGPU guest".
	VGPULicensed  *bool
	Serial, VBIOS string
	// GPM holds the metric values GpmMetricsGet returns for this GPU.
	GPM map[gonvml.GpmMetricId]float64
	// P2P answers GetP2PStatus towards the GPU of that index; a peer
	// missing from the map is P2P_STATUS_OK.
	P2P       map[int]gonvml.GpuP2PStatus
	Processes []gonvml.ProcessInfo
	ProcUtil  []gonvml.ProcessUtilizationSample
}

// GPU is one fake GPU.
type GPU struct {
	*server.Device
	f *Fake
	// Everything below is guarded by f.mu; change it through Fake.Update.
	R            Readings
	GPMSupported bool
	// Errs makes the named NVML method return the code instead of SUCCESS.
	Errs map[string]gonvml.Return
	// Delay is slept in every scripted call.
	Delay time.Duration
	// Hold, when not nil, makes every scripted call wait until it is
	// closed: a GPU that hangs for as long as the test wants, however slow
	// the machine running it.
	Hold chan struct{}
	// HoldCall holds only the named NVML method, as Hold holds them all.
	HoldCall map[string]chan struct{}
	Lost     bool
	// Unbound takes the GPU away from its driver: NVML no longer counts,
	// indexes or finds it, and its old handle answers GPU_IS_LOST. The
	// bound GPUs are indexed from 0 in slot order, as NVML re-enumerates.
	Unbound    bool
	Instances  []*Instance
	Registered bool
}

type sampleState struct {
	gpu   *GPU
	gi    int
	taken bool
	freed bool
	at    time.Time
}

// Fake is a scripted NVML.
type Fake struct {
	*server.Server
	GPUs []*GPU

	mu      sync.Mutex
	samples map[*mock.GpmSample]*sampleState
	events  chan gonvml.EventData
	// names answer SystemGetProcessName by PID; nameCalls counts the
	// calls. A PID without a name is NOT_FOUND, as for a process that
	// ended or that another PID namespace holds.
	names     map[uint32]string
	nameCalls int
	// nonRoot answers as NVML answers a caller without privileges.
	nonRoot bool
	// gpmClock stamps GPM samples; metrics between samples inside one
	// gpmRefresh period are 0 (SetGPMRefresh).
	gpmClock   timesource.Clock
	gpmRefresh time.Duration
}

// SetGPMRefresh makes GPM answer as nvml.h warns it does: "The interval
// between two nvmlGpmSampleGet() calls should be greater than 100ms due
// to the internal sample refresh rate". The counters refresh at each
// multiple of refresh on clock; the metrics between two samples taken
// inside one refresh period are 0, the counters not having moved.
func (f *Fake) SetGPMRefresh(clock timesource.Clock, refresh time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gpmClock, f.gpmRefresh = clock, refresh
}

// SetProcessName names a process for SystemGetProcessName.
func (f *Fake) SetProcessName(pid uint32, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.names[pid] = name
}

// ProcessNameCalls is how often SystemGetProcessName was called.
func (f *Fake) ProcessNameCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nameCalls
}

// New builds a fake DGX with plausible readings on every GPU.
func New(model Model) *Fake {
	var s *server.Server
	gpm := false
	switch model {
	case DGXH100:
		s, gpm = dgxh100.New(), true
	case DGXA100:
		s = dgxa100.New()
	default:
		panic(fmt.Sprintf("nvmlfake: unknown model %d", model))
	}
	f := &Fake{Server: s, samples: map[*mock.GpmSample]*sampleState{}, events: make(chan gonvml.EventData, 1024), names: map[uint32]string{}}
	for i, d := range s.Devices {
		g := &GPU{Device: d.(*server.Device), f: f, GPMSupported: gpm, Errs: map[string]gonvml.Return{}}
		g.R = defaultReadings(i, g.Device.MemoryInfo.Total)
		g.install(i)
		f.GPUs = append(f.GPUs, g)
	}
	f.installServer()
	return f
}

func defaultReadings(i int, total uint64) Readings {
	return Readings{
		SMClock: 1980, MemClock: 2619, VideoClock: 1755, MaxSMClock: 1980, AppSMClock: 1755,
		MaxMemClock: 2619, MaxVideoClock: 1965, Pstate: gonvml.PSTATE_0, FanPct: 30,
		ComputeMode: gonvml.COMPUTEMODE_DEFAULT, Persistence: gonvml.FEATURE_ENABLED, PowerDefaultMW: 700_000,
		PowerMinMW: 200_000, PowerMaxMW: 700_000,
		Fabric: gonvml.GpuFabricInfoV{State: gonvml.GPU_FABRIC_STATE_COMPLETED, Status: uint32(gonvml.SUCCESS),
			CliqueId: 1, ClusterUuid: [16]uint8{0x5e, 0x1f, 0x0a, 0x42, 0x9c, 0x3d, 0x4e, 0x8b, 0xa1, 0x07, 0x2f, 0x6c, 0xd0, 0x13, 0x88, 0xe4},
			HealthMask: HealthyFabricMask, HealthSummary: gonvml.GPU_FABRIC_HEALTH_SUMMARY_HEALTHY},
		GPUTemp: uint32(40 + i), SlowdownTemp: 87, ShutdownTemp: 92, MemoryTemp: uint32(50 + i),
		PowerMW: 312_500, PowerLimitMW: 700_000, EnforcedLimitMW: 700_000, EnergyMJ: 123_456_789,
		PCIeTxKBs: 2048, PCIeRxKBs: 4096, PCIeReplay: 3,
		PCIeGen: [2]int{5, 5}, PCIeWidth: [2]int{16, 16},
		Util: gonvml.Utilization{Gpu: 87, Memory: 42}, EncUtil: 0, DecUtil: 5,
		ClockEventReasons: 0x1,
		ViolationNs: map[gonvml.PerfPolicyType]uint64{
			gonvml.PERF_POLICY_POWER: 1_000, gonvml.PERF_POLICY_THERMAL: 2_000, gonvml.PERF_POLICY_SYNC_BOOST: 3_000,
			gonvml.PERF_POLICY_BOARD_LIMIT: 4_000, gonvml.PERF_POLICY_LOW_UTILIZATION: 5_000, gonvml.PERF_POLICY_RELIABILITY: 6_000,
		},
		Memory: gonvml.Memory_v2{Total: total, Reserved: 512 << 20, Used: 10 << 30, Free: total - 512<<20 - 10<<30},
		ECC:    [2][2]uint64{{1, 11}, {2, 22}},
		// Retired pages exist on pre-Ampere GPUs; the DGX models have
		// remapped rows instead, but a test may still script them.
		RetiredSBE: 1, RetiredDBE: 2, RetiredPending: false,
		RemapCorr: 4, RemapUnc: 1, RemapPending: true, RemapBad: false,
		FieldValues: map[uint32]uint64{
			gonvml.FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL: 7, gonvml.FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL: 8,
			gonvml.FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL: 9, gonvml.FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL: 10,
			gonvml.FI_DEV_NVLINK_LINK_COUNT: 2, gonvml.FI_DEV_GET_GPU_RECOVERY_ACTION: 0,
			gonvml.FI_DEV_POWER_INSTANT: 325_125,
		},
		NVLinkRawKiB:  [][2]uint64{{100, 200}, {300, 400}},
		NVLinkDataKiB: [][2]uint64{{90, 180}, {270, 360}},
		Serial:        fmt.Sprintf("165232300%04d", i), VBIOS: "96.00.74.00.01",
		GPM: map[gonvml.GpmMetricId]float64{
			gonvml.GPM_METRIC_GRAPHICS_UTIL: 90, gonvml.GPM_METRIC_SM_UTIL: 80, gonvml.GPM_METRIC_SM_OCCUPANCY: 50,
			gonvml.GPM_METRIC_ANY_TENSOR_UTIL: 40, gonvml.GPM_METRIC_DRAM_BW_UTIL: 30, gonvml.GPM_METRIC_FP64_UTIL: 1,
			gonvml.GPM_METRIC_FP32_UTIL: 20, gonvml.GPM_METRIC_FP16_UTIL: 10,
			gonvml.GPM_METRIC_PCIE_TX_PER_SEC: 100, gonvml.GPM_METRIC_PCIE_RX_PER_SEC: 200,
			gonvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC: 1000, gonvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC: 2000,
		},
	}
}

// Update changes a GPU's script under the fake's lock.
func (f *Fake) Update(gpu int, change func(g *GPU)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f.GPUs[gpu])
}

// PushXID queues an XID event on a GPU, as the driver would.
func (f *Fake) PushXID(gpu int, xid uint64) {
	f.events <- gonvml.EventData{Device: f.GPUs[gpu].Device, EventType: gonvml.EventTypeXidCriticalError, EventData: xid,
		GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF}
}

// LiveSamples is the number of GPM samples allocated and not freed.
func (f *Fake) LiveSamples() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, st := range f.samples {
		if !st.freed {
			n++
		}
	}
	return n
}

// BusID is the PCI bus ID the fake reports for GPU i.
func BusID(i int) string { return fmt.Sprintf("00000000:%02X:00.0", 0x18+i*0x10) }

// call applies the script's delay, loss and injected error to one method.
func (g *GPU) call(name string) gonvml.Return {
	g.f.mu.Lock()
	delay, hold, lost := g.Delay, g.Hold, g.Lost || g.Unbound
	holdCall := g.HoldCall[name]
	ret, injected := g.Errs[name]
	g.f.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay)
	}
	if hold != nil {
		<-hold
	}
	if holdCall != nil {
		<-holdCall
	}
	switch {
	case lost:
		return gonvml.ERROR_GPU_IS_LOST
	case injected:
		return ret
	}
	return gonvml.SUCCESS
}

// read runs get under the lock when call succeeded.
func read[T any](g *GPU, name string, get func(r *Readings) T) (T, gonvml.Return) {
	var zero T
	if ret := g.call(name); ret != gonvml.SUCCESS {
		return zero, ret
	}
	g.f.mu.Lock()
	defer g.f.mu.Unlock()
	return get(&g.R), gonvml.SUCCESS
}

func (g *GPU) install(i int) {
	d := g.Device
	uuid := d.UUID
	d.GetUUIDFunc = func() (string, gonvml.Return) { return read(g, "GetUUID", func(*Readings) string { return uuid }) }
	d.GetPciInfoFunc = func() (gonvml.PciInfo, gonvml.Return) {
		p := gonvml.PciInfo{PciDeviceId: d.Config.PciDeviceId, Bus: uint32(0x18 + i*0x10)}
		for j, c := range BusID(i) {
			p.BusId[j] = int8(c)
		}
		return p, g.call("GetPciInfo")
	}
	d.GetClockInfoFunc = func(t gonvml.ClockType) (uint32, gonvml.Return) {
		return read(g, "GetClockInfo", func(r *Readings) uint32 {
			switch t {
			case gonvml.CLOCK_SM:
				return r.SMClock
			case gonvml.CLOCK_MEM:
				return r.MemClock
			}
			return r.VideoClock
		})
	}
	d.GetMaxClockInfoFunc = func(t gonvml.ClockType) (uint32, gonvml.Return) {
		return read(g, "GetMaxClockInfo", func(r *Readings) uint32 {
			switch t {
			case gonvml.CLOCK_MEM:
				return r.MaxMemClock
			case gonvml.CLOCK_VIDEO:
				return r.MaxVideoClock
			}
			return r.MaxSMClock
		})
	}
	d.GetPerformanceStateFunc = func() (gonvml.Pstates, gonvml.Return) {
		return read(g, "GetPerformanceState", func(r *Readings) gonvml.Pstates { return r.Pstate })
	}
	d.GetFanSpeedFunc = func() (uint32, gonvml.Return) {
		return read(g, "GetFanSpeed", func(r *Readings) uint32 { return r.FanPct })
	}
	d.GetComputeModeFunc = func() (gonvml.ComputeMode, gonvml.Return) {
		return read(g, "GetComputeMode", func(r *Readings) gonvml.ComputeMode { return r.ComputeMode })
	}
	d.GetPersistenceModeFunc = func() (gonvml.EnableState, gonvml.Return) {
		return read(g, "GetPersistenceMode", func(r *Readings) gonvml.EnableState { return r.Persistence })
	}
	d.GetPowerManagementDefaultLimitFunc = func() (uint32, gonvml.Return) {
		return read(g, "GetPowerManagementDefaultLimit", func(r *Readings) uint32 { return r.PowerDefaultMW })
	}
	d.GetPowerManagementLimitConstraintsFunc = func() (uint32, uint32, gonvml.Return) {
		if ret := g.call("GetPowerManagementLimitConstraints"); ret != gonvml.SUCCESS {
			return 0, 0, ret
		}
		g.f.mu.Lock()
		defer g.f.mu.Unlock()
		return g.R.PowerMinMW, g.R.PowerMaxMW, gonvml.SUCCESS
	}
	d.GetGpuFabricInfoFunc = func() (gonvml.GpuFabricInfo, gonvml.Return) {
		return read(g, "GetGpuFabricInfo", func(r *Readings) gonvml.GpuFabricInfo {
			return gonvml.GpuFabricInfo{ClusterUuid: r.Fabric.ClusterUuid, Status: r.Fabric.Status, CliqueId: r.Fabric.CliqueId, State: r.Fabric.State}
		})
	}
	d.GetApplicationsClockFunc = func(gonvml.ClockType) (uint32, gonvml.Return) {
		return read(g, "GetApplicationsClock", func(r *Readings) uint32 { return r.AppSMClock })
	}
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, gonvml.Return) {
		return read(g, "GetCurrentClocksEventReasons", func(r *Readings) uint64 { return r.ClockEventReasons })
	}
	d.GetTemperatureFunc = func(gonvml.TemperatureSensors) (uint32, gonvml.Return) {
		return read(g, "GetTemperature", func(r *Readings) uint32 { return r.GPUTemp })
	}
	d.GetTemperatureThresholdFunc = func(t gonvml.TemperatureThresholds) (uint32, gonvml.Return) {
		return read(g, "GetTemperatureThreshold", func(r *Readings) uint32 {
			if t == gonvml.TEMPERATURE_THRESHOLD_SLOWDOWN {
				return r.SlowdownTemp
			}
			return r.ShutdownTemp
		})
	}
	d.GetPowerUsageFunc = func() (uint32, gonvml.Return) {
		return read(g, "GetPowerUsage", func(r *Readings) uint32 { return r.PowerMW })
	}
	d.GetPowerManagementLimitFunc = func() (uint32, gonvml.Return) {
		return read(g, "GetPowerManagementLimit", func(r *Readings) uint32 { return r.PowerLimitMW })
	}
	d.GetEnforcedPowerLimitFunc = func() (uint32, gonvml.Return) {
		return read(g, "GetEnforcedPowerLimit", func(r *Readings) uint32 { return r.EnforcedLimitMW })
	}
	d.GetTotalEnergyConsumptionFunc = func() (uint64, gonvml.Return) {
		return read(g, "GetTotalEnergyConsumption", func(r *Readings) uint64 { return r.EnergyMJ })
	}
	d.GetPcieThroughputFunc = func(c gonvml.PcieUtilCounter) (uint32, gonvml.Return) {
		return read(g, "GetPcieThroughput", func(r *Readings) uint32 {
			if c == gonvml.PCIE_UTIL_TX_BYTES {
				return r.PCIeTxKBs
			}
			return r.PCIeRxKBs
		})
	}
	d.GetP2PStatusFunc = func(peer gonvml.Device, idx gonvml.GpuP2PCapsIndex) (gonvml.GpuP2PStatus, gonvml.Return) {
		if idx != gonvml.P2P_CAPS_INDEX_NVLINK {
			return gonvml.P2P_STATUS_UNKNOWN, gonvml.ERROR_INVALID_ARGUMENT
		}
		j := -1
		for k, o := range g.f.GPUs {
			if gonvml.Device(o.Device) == peer {
				j = k
			}
		}
		if j < 0 || j == i {
			return gonvml.P2P_STATUS_UNKNOWN, gonvml.ERROR_INVALID_ARGUMENT
		}
		return read(g, "GetP2PStatus", func(r *Readings) gonvml.GpuP2PStatus { return r.P2P[j] })
	}
	d.GetPcieReplayCounterFunc = func() (int, gonvml.Return) {
		return read(g, "GetPcieReplayCounter", func(r *Readings) int { return r.PCIeReplay })
	}
	d.GetCurrPcieLinkGenerationFunc = func() (int, gonvml.Return) {
		return read(g, "GetCurrPcieLinkGeneration", func(r *Readings) int { return r.PCIeGen[0] })
	}
	d.GetMaxPcieLinkGenerationFunc = func() (int, gonvml.Return) {
		return read(g, "GetMaxPcieLinkGeneration", func(r *Readings) int { return r.PCIeGen[1] })
	}
	d.GetCurrPcieLinkWidthFunc = func() (int, gonvml.Return) {
		return read(g, "GetCurrPcieLinkWidth", func(r *Readings) int { return r.PCIeWidth[0] })
	}
	d.GetMaxPcieLinkWidthFunc = func() (int, gonvml.Return) {
		return read(g, "GetMaxPcieLinkWidth", func(r *Readings) int { return r.PCIeWidth[1] })
	}
	d.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
		// nvml.h: "On MIG-enabled GPUs, querying device utilization rates
		// is not currently supported."
		if g.migOn() {
			return gonvml.Utilization{}, gonvml.ERROR_NOT_SUPPORTED
		}
		return read(g, "GetUtilizationRates", func(r *Readings) gonvml.Utilization { return r.Util })
	}
	d.GetEncoderUtilizationFunc = func() (uint32, uint32, gonvml.Return) {
		v, ret := read(g, "GetEncoderUtilization", func(r *Readings) uint32 { return r.EncUtil })
		return v, 167_000, ret
	}
	d.GetDecoderUtilizationFunc = func() (uint32, uint32, gonvml.Return) {
		v, ret := read(g, "GetDecoderUtilization", func(r *Readings) uint32 { return r.DecUtil })
		return v, 167_000, ret
	}
	d.GetViolationStatusFunc = func(p gonvml.PerfPolicyType) (gonvml.ViolationTime, gonvml.Return) {
		return read(g, "GetViolationStatus", func(r *Readings) gonvml.ViolationTime {
			return gonvml.ViolationTime{ReferenceTime: 1, ViolationTime: r.ViolationNs[p]}
		})
	}
	d.GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) {
		if ret := g.privileged(); ret != gonvml.SUCCESS {
			return gonvml.Memory_v2{}, ret
		}
		return read(g, "GetMemoryInfo_v2", func(r *Readings) gonvml.Memory_v2 { return r.Memory })
	}
	d.GetMemoryInfoFunc = func() (gonvml.Memory, gonvml.Return) {
		if ret := g.privileged(); ret != gonvml.SUCCESS {
			return gonvml.Memory{}, ret
		}
		return read(g, "GetMemoryInfo", func(r *Readings) gonvml.Memory {
			return gonvml.Memory{Total: r.Memory.Total, Free: r.Memory.Free, Used: r.Memory.Used}
		})
	}
	d.GetTotalEccErrorsFunc = func(t gonvml.MemoryErrorType, c gonvml.EccCounterType) (uint64, gonvml.Return) {
		return read(g, "GetTotalEccErrors", func(r *Readings) uint64 { return r.ECC[t][c] })
	}
	d.GetRetiredPagesFunc = func(c gonvml.PageRetirementCause) ([]uint64, gonvml.Return) {
		return read(g, "GetRetiredPages", func(r *Readings) []uint64 {
			n := r.RetiredSBE
			if c == gonvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR {
				n = r.RetiredDBE
			}
			return make([]uint64, n)
		})
	}
	d.GetRetiredPagesPendingStatusFunc = func() (gonvml.EnableState, gonvml.Return) {
		return read(g, "GetRetiredPagesPendingStatus", func(r *Readings) gonvml.EnableState {
			if r.RetiredPending {
				return gonvml.FEATURE_ENABLED
			}
			return gonvml.FEATURE_DISABLED
		})
	}
	d.GetRemappedRowsFunc = func() (int, int, bool, bool, gonvml.Return) {
		v, ret := read(g, "GetRemappedRows", func(r *Readings) Readings { return *r })
		return v.RemapCorr, v.RemapUnc, v.RemapPending, v.RemapBad, ret
	}
	d.GetFieldValuesFunc = func(vals []gonvml.FieldValue) gonvml.Return {
		if ret := g.call("GetFieldValues"); ret != gonvml.SUCCESS {
			return ret
		}
		g.f.mu.Lock()
		defer g.f.mu.Unlock()
		for k := range vals {
			v := &vals[k]
			switch {
			case v.FieldId == gonvml.FI_DEV_NVLINK_THROUGHPUT_RAW_TX || v.FieldId == gonvml.FI_DEV_NVLINK_THROUGHPUT_RAW_RX:
				if int(v.ScopeId) >= len(g.R.NVLinkRawKiB) {
					v.NvmlReturn = uint32(gonvml.ERROR_INVALID_ARGUMENT)
					continue
				}
				setU64(v, g.R.NVLinkRawKiB[v.ScopeId][v.FieldId-gonvml.FI_DEV_NVLINK_THROUGHPUT_RAW_TX])
			case v.FieldId == gonvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX || v.FieldId == gonvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
				dir := v.FieldId - gonvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX
				switch {
				case v.ScopeId == allLinks:
					var sum uint64
					for _, l := range g.R.NVLinkDataKiB {
						sum += l[dir]
					}
					setU64(v, sum)
				case int(v.ScopeId) < len(g.R.NVLinkDataKiB):
					setU64(v, g.R.NVLinkDataKiB[v.ScopeId][dir])
				default:
					v.NvmlReturn = uint32(gonvml.ERROR_INVALID_ARGUMENT)
				}
			case v.FieldId == gonvml.FI_DEV_MEMORY_TEMP:
				v.NvmlReturn, v.ValueType = uint32(gonvml.SUCCESS), uint32(gonvml.VALUE_TYPE_UNSIGNED_INT)
				binary.LittleEndian.PutUint32(v.Value[:], g.R.MemoryTemp)
			default:
				x, ok := g.R.FieldValues[v.FieldId]
				if !ok {
					v.NvmlReturn = uint32(gonvml.ERROR_NOT_SUPPORTED)
					continue
				}
				setU64(v, x)
			}
		}
		return gonvml.SUCCESS
	}
	d.GetGridLicensableFeaturesFunc = func() (gonvml.GridLicensableFeatures, gonvml.Return) {
		return read(g, "GetGridLicensableFeatures", func(r *Readings) gonvml.GridLicensableFeatures {
			if r.VGPULicensed == nil {
				return gonvml.GridLicensableFeatures{}
			}
			var out gonvml.GridLicensableFeatures
			out.IsGridLicenseSupported, out.LicensableFeaturesCount = 1, 1
			out.GridLicensableFeatures[0].FeatureCode = uint32(gonvml.GRID_LICENSE_FEATURE_CODE_VGPU)
			if *r.VGPULicensed {
				out.GridLicensableFeatures[0].FeatureState = 1
			}
			return out
		})
	}
	d.GetSerialFunc = func() (string, gonvml.Return) {
		return read(g, "GetSerial", func(r *Readings) string { return r.Serial })
	}
	d.GetVbiosVersionFunc = func() (string, gonvml.Return) {
		return read(g, "GetVbiosVersion", func(r *Readings) string { return r.VBIOS })
	}
	d.GetBrandFunc = func() (gonvml.BrandType, gonvml.Return) {
		return read(g, "GetBrand", func(*Readings) gonvml.BrandType { return d.Config.Brand })
	}
	d.GpmQueryDeviceSupportFunc = func() (gonvml.GpmSupport, gonvml.Return) {
		g.f.mu.Lock()
		defer g.f.mu.Unlock()
		if !g.GPMSupported {
			return gonvml.GpmSupport{}, gonvml.SUCCESS
		}
		return gonvml.GpmSupport{Version: 1, IsSupportedDevice: 1}, gonvml.SUCCESS
	}
	d.GpmSampleGetFunc = func(smp gonvml.GpmSample) gonvml.Return { return g.f.takeSample(g, -1, smp) }
	d.GpmMigSampleGetFunc = func(gi int, smp gonvml.GpmSample) gonvml.Return { return g.f.takeSample(g, gi, smp) }
	d.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
		if ret := g.privileged(); ret != gonvml.SUCCESS {
			return nil, ret
		}
		return read(g, "GetComputeRunningProcesses", func(r *Readings) []gonvml.ProcessInfo {
			return append([]gonvml.ProcessInfo(nil), r.Processes...)
		})
	}
	d.GetProcessUtilizationFunc = func(last uint64) ([]gonvml.ProcessUtilizationSample, gonvml.Return) {
		out, ret := read(g, "GetProcessUtilization", func(r *Readings) []gonvml.ProcessUtilizationSample {
			var out []gonvml.ProcessUtilizationSample
			for _, smp := range r.ProcUtil {
				if smp.TimeStamp > last {
					out = append(out, smp)
				}
			}
			return out
		})
		if ret == gonvml.SUCCESS && len(out) == 0 {
			return nil, gonvml.ERROR_NOT_FOUND
		}
		return out, ret
	}
	d.RegisterEventsFunc = func(uint64, gonvml.EventSet) gonvml.Return {
		if ret := g.call("RegisterEvents"); ret != gonvml.SUCCESS {
			return ret
		}
		g.f.mu.Lock()
		g.Registered = true
		g.f.mu.Unlock()
		return gonvml.SUCCESS
	}
	g.installMIG()
}

// allLinks is the field-value scope of every NVLink of a GPU.
const allLinks = 0xFFFFFFFF

func setU64(v *gonvml.FieldValue, x uint64) {
	v.NvmlReturn, v.ValueType = uint32(gonvml.SUCCESS), uint32(gonvml.VALUE_TYPE_UNSIGNED_LONG_LONG)
	binary.LittleEndian.PutUint64(v.Value[:], x)
}

func (f *Fake) takeSample(g *GPU, gi int, smp gonvml.GpmSample) gonvml.Return {
	if ret := g.call("GpmSampleGet"); ret != gonvml.SUCCESS {
		return ret
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.samples[smp.(*mock.GpmSample)]
	if !ok || st.freed {
		return gonvml.ERROR_INVALID_ARGUMENT
	}
	st.gpu, st.gi, st.taken = g, gi, true
	if f.gpmClock != nil {
		st.at = f.gpmClock.Now()
	}
	return gonvml.SUCCESS
}

func (f *Fake) installServer() {
	s := f.Server
	s.SystemGetProcessNameFunc = func(pid int) (string, gonvml.Return) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.nameCalls++
		name, ok := f.names[uint32(pid)]
		if !ok {
			return "", gonvml.ERROR_NOT_FOUND
		}
		return name, gonvml.SUCCESS
	}
	s.GpmSampleAllocFunc = func() (gonvml.GpmSample, gonvml.Return) {
		smp := &mock.GpmSample{}
		smp.FreeFunc = func() gonvml.Return {
			f.mu.Lock()
			defer f.mu.Unlock()
			st := f.samples[smp]
			if st.freed {
				return gonvml.ERROR_INVALID_ARGUMENT
			}
			st.freed = true
			return gonvml.SUCCESS
		}
		f.mu.Lock()
		f.samples[smp] = &sampleState{}
		f.mu.Unlock()
		return smp, gonvml.SUCCESS
	}
	s.GpmMetricsGetFunc = func(m *gonvml.GpmMetricsGetType) gonvml.Return {
		f.mu.Lock()
		defer f.mu.Unlock()
		s1, ok1 := f.samples[m.Sample1.(*mock.GpmSample)]
		s2, ok2 := f.samples[m.Sample2.(*mock.GpmSample)]
		if !ok1 || !ok2 || !s1.taken || !s2.taken || s1.freed || s2.freed || s1.gpu != s2.gpu || s1.gi != s2.gi {
			return gonvml.ERROR_INVALID_ARGUMENT
		}
		if f.gpmClock != nil && s1.at.UnixNano()/int64(f.gpmRefresh) == s2.at.UnixNano()/int64(f.gpmRefresh) {
			// Two samples inside one refresh period hold the same counters.
			for i := 0; i < int(m.NumMetrics); i++ {
				m.Metrics[i].NvmlReturn, m.Metrics[i].Value = uint32(gonvml.SUCCESS), 0
			}
			return gonvml.SUCCESS
		}
		values := s2.gpu.R.GPM
		if s2.gi >= 0 {
			values = nil
			for _, in := range s2.gpu.Instances {
				if int(in.GI.Info.Id) == s2.gi {
					values = in.GPM
				}
			}
		}
		for i := 0; i < int(m.NumMetrics); i++ {
			v, ok := values[gonvml.GpmMetricId(m.Metrics[i].MetricId)]
			if !ok {
				m.Metrics[i].NvmlReturn = uint32(gonvml.ERROR_NOT_SUPPORTED)
				m.Metrics[i].Value = math.NaN()
				continue
			}
			m.Metrics[i].NvmlReturn, m.Metrics[i].Value = uint32(gonvml.SUCCESS), v
		}
		return gonvml.SUCCESS
	}
	s.EventSetCreateFunc = func() (gonvml.EventSet, gonvml.Return) {
		set := &mock.EventSet{}
		set.WaitFunc = func(ms uint32) (gonvml.EventData, gonvml.Return) {
			select {
			case e := <-f.events:
				return e, gonvml.SUCCESS
			case <-time.After(time.Duration(ms) * time.Millisecond):
				return gonvml.EventData{}, gonvml.ERROR_TIMEOUT
			}
		}
		set.FreeFunc = func() gonvml.Return { return gonvml.SUCCESS }
		return set, gonvml.SUCCESS
	}
	// A lost GPU cannot be re-acquired by UUID until it answers again; an
	// unbound one is not found at all.
	byUUID := s.DeviceGetHandleByUUIDFunc
	s.DeviceGetHandleByUUIDFunc = func(uuid string) (gonvml.Device, gonvml.Return) {
		for _, g := range f.GPUs {
			if g.UUID == uuid {
				if f.unbound(g) {
					return nil, gonvml.ERROR_NOT_FOUND
				}
				if ret := g.call("DeviceGetHandleByUUID"); ret != gonvml.SUCCESS {
					return nil, ret
				}
			}
		}
		return byUUID(uuid)
	}
	s.DeviceGetCountFunc = func() (int, gonvml.Return) { return len(f.bound()), gonvml.SUCCESS }
	s.DeviceGetHandleByIndexFunc = func(i int) (gonvml.Device, gonvml.Return) {
		b := f.bound()
		if i < 0 || i >= len(b) {
			return nil, gonvml.ERROR_INVALID_ARGUMENT
		}
		return b[i].Device, gonvml.SUCCESS
	}
}

func (f *Fake) unbound(g *GPU) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return g.Unbound
}

// bound lists the GPUs bound to the driver, in slot order.
func (f *Fake) bound() []*GPU {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*GPU
	for _, g := range f.GPUs {
		if !g.Unbound {
			out = append(out, g)
		}
	}
	return out
}
