package smifake

import (
	"fmt"
	"strings"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpuscope/gpuscope/internal/testkit/smicapture"
)

// brands are nvidia-smi's "Product Brand" names of NVML's brand types.
var brands = map[string]gonvml.BrandType{
	"Quadro": gonvml.BRAND_QUADRO, "Tesla": gonvml.BRAND_TESLA, "NVS": gonvml.BRAND_NVS, "GeForce": gonvml.BRAND_GEFORCE,
	"Titan": gonvml.BRAND_TITAN, "Quadro RTX": gonvml.BRAND_QUADRO_RTX, "NVIDIA RTX": gonvml.BRAND_NVIDIA_RTX,
	"NVIDIA": gonvml.BRAND_NVIDIA, "GeForce RTX": gonvml.BRAND_GEFORCE_RTX, "Titan RTX": gonvml.BRAND_TITAN_RTX,
}

var computeModes = map[string]gonvml.ComputeMode{
	"Default": gonvml.COMPUTEMODE_DEFAULT, "Exclusive_Thread": gonvml.COMPUTEMODE_EXCLUSIVE_THREAD,
	"Prohibited": gonvml.COMPUTEMODE_PROHIBITED, "Exclusive_Process": gonvml.COMPUTEMODE_EXCLUSIVE_PROCESS,
}

var fabricStates = map[string]gonvml.GpuFabricState{
	"Not Started": gonvml.GPU_FABRIC_STATE_NOT_STARTED, "In Progress": gonvml.GPU_FABRIC_STATE_IN_PROGRESS,
	"Completed": gonvml.GPU_FABRIC_STATE_COMPLETED,
}

// RecoveryActions are nvidia-smi's names of NVML's GPU recovery actions
// (nvml.h, nvmlDeviceGpuRecoveryAction_t).
var RecoveryActions = map[string]uint64{"None": 0, "Reset": 1, "Reboot": 2, "Drain P2P": 3, "Drain and Reset": 4}

// violationCounters are the --query-gpu clock event counters (in µs)
// behind each NVML perf policy; a policy nvidia-smi prints no counter for
// is NOT_SUPPORTED.
var violationCounters = map[gonvml.PerfPolicyType][]string{
	gonvml.PERF_POLICY_POWER:      {"clocks_event_reasons_counters.sw_power_cap"},
	gonvml.PERF_POLICY_SYNC_BOOST: {"clocks_event_reasons_counters.sync_boost"},
	gonvml.PERF_POLICY_THERMAL: {"clocks_event_reasons_counters.sw_thermal_slowdown",
		"clocks_event_reasons_counters.hw_thermal_slowdown"},
}

// ViolationNs is the violation time nvidia-smi's counters give a perf
// policy, in ns, false where it prints none.
func ViolationNs(g *smicapture.GPU, p gonvml.PerfPolicyType) (uint64, bool) {
	names, ok := violationCounters[p]
	if !ok {
		return 0, false
	}
	var sum uint64
	for _, n := range names {
		v, ret := u64(g.Field(n), 1000)
		if ret != gonvml.SUCCESS {
			return 0, false
		}
		sum += v
	}
	return sum, true
}

func newDevice(c *smicapture.Capture, index int, g *smicapture.GPU) (*mock.Device, []string, error) {
	d := &mock.Device{}
	uuid := g.Field("uuid").Text()
	d.GetUUIDFunc = func() (string, gonvml.Return) { return uuid, gonvml.SUCCESS }
	installIdentity(d, g)
	installClocks(d, g)
	installPower(d, g)
	installStates(d, g)
	migUUIDs, err := installRest(d, c, index, g, uuid)
	if err != nil {
		return nil, nil, err
	}
	return d, migUUIDs, nil
}

// installIdentity answers the identity calls.
func installIdentity(d *mock.Device, g *smicapture.GPU) {
	q := g.Q
	d.GetNameFunc = func() (string, gonvml.Return) { return g.Field("name").Text(), gonvml.SUCCESS }
	d.GetPciInfoFunc = func() (gonvml.PciInfo, gonvml.Return) {
		var p gonvml.PciInfo
		cBytes(p.BusId[:], g.Field("pci.bus_id").Text())
		if v, ret := u32(g.Field("pci.device_id"), 1); ret == gonvml.SUCCESS {
			p.PciDeviceId = v
		}
		if v, ret := u32(g.Field("pci.bus"), 1); ret == gonvml.SUCCESS {
			p.Bus = v
		}
		return p, gonvml.SUCCESS
	}
	text := func(v smicapture.Value) (string, gonvml.Return) {
		if !v.Supported {
			return "", notSupported
		}
		return v.Text(), gonvml.SUCCESS
	}
	d.GetSerialFunc = func() (string, gonvml.Return) { return text(g.Field("serial")) }
	d.GetVbiosVersionFunc = func() (string, gonvml.Return) { return text(g.Field("vbios_version")) }
	d.GetBrandFunc = func() (gonvml.BrandType, gonvml.Return) {
		b, ok := brands[q.Get("Product Brand").Text()]
		if !ok {
			return gonvml.BRAND_UNKNOWN, notSupported
		}
		return b, gonvml.SUCCESS
	}
}

// installClocks answers the clock and temperature calls.
func installClocks(d *mock.Device, g *smicapture.GPU) {
	q := g.Q
	clocks := map[gonvml.ClockType]smicapture.Value{gonvml.CLOCK_SM: g.Field("clocks.current.sm"),
		gonvml.CLOCK_MEM: g.Field("clocks.current.memory"), gonvml.CLOCK_VIDEO: g.Field("clocks.current.video"),
		gonvml.CLOCK_GRAPHICS: g.Field("clocks.current.graphics")}
	maxClocks := map[gonvml.ClockType]smicapture.Value{gonvml.CLOCK_SM: g.Field("clocks.max.sm"),
		gonvml.CLOCK_MEM: g.Field("clocks.max.memory"), gonvml.CLOCK_VIDEO: q.Get("Max Clocks", "Video"),
		gonvml.CLOCK_GRAPHICS: g.Field("clocks.max.graphics")}
	d.GetClockInfoFunc = func(t gonvml.ClockType) (uint32, gonvml.Return) { return u32(clocks[t], 1) }
	d.GetMaxClockInfoFunc = func(t gonvml.ClockType) (uint32, gonvml.Return) { return u32(maxClocks[t], 1) }
	// nvidia-smi prints the applications clocks of graphics and memory;
	// the SM's follows the graphics clock.
	d.GetApplicationsClockFunc = func(t gonvml.ClockType) (uint32, gonvml.Return) {
		if t == gonvml.CLOCK_MEM {
			return u32(g.Field("clocks.applications.memory"), 1)
		}
		return u32(g.Field("clocks.applications.graphics"), 1)
	}
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, gonvml.Return) {
		return u64(g.Field("clocks_event_reasons.active"), 1)
	}
	d.GetTemperatureFunc = func(gonvml.TemperatureSensors) (uint32, gonvml.Return) { return u32(g.Field("temperature.gpu"), 1) }
	d.GetTemperatureThresholdFunc = func(t gonvml.TemperatureThresholds) (uint32, gonvml.Return) {
		switch t {
		case gonvml.TEMPERATURE_THRESHOLD_SLOWDOWN:
			return u32(q.Get("Temperature", "GPU Slowdown Temp"), 1)
		case gonvml.TEMPERATURE_THRESHOLD_SHUTDOWN:
			return u32(q.Get("Temperature", "GPU Shutdown Temp"), 1)
		}
		return 0, notSupported
	}
}

// installPower answers the power, PCIe and utilisation calls.
func installPower(d *mock.Device, g *smicapture.GPU) {
	q := g.Q
	d.GetPowerUsageFunc = func() (uint32, gonvml.Return) { return u32(g.Field("power.draw"), 1000) }
	d.GetPowerManagementLimitFunc = func() (uint32, gonvml.Return) { return u32(g.Field("power.limit"), 1000) }
	d.GetEnforcedPowerLimitFunc = func() (uint32, gonvml.Return) { return u32(g.Field("enforced.power.limit"), 1000) }
	d.GetPowerManagementDefaultLimitFunc = func() (uint32, gonvml.Return) {
		return u32(g.Field("power.default_limit"), 1000)
	}
	d.GetPowerManagementLimitConstraintsFunc = func() (uint32, uint32, gonvml.Return) {
		lo, r1 := u32(g.Field("power.min_limit"), 1000)
		hi, r2 := u32(g.Field("power.max_limit"), 1000)
		if r1 != gonvml.SUCCESS || r2 != gonvml.SUCCESS {
			return 0, 0, notSupported
		}
		return lo, hi, gonvml.SUCCESS
	}
	// nvidia-smi prints no energy counter.
	d.GetTotalEnergyConsumptionFunc = func() (uint64, gonvml.Return) { return 0, notSupported }
	d.GetPcieThroughputFunc = func(c gonvml.PcieUtilCounter) (uint32, gonvml.Return) {
		if c == gonvml.PCIE_UTIL_TX_BYTES {
			return u32(q.Get("PCI", "Tx Throughput"), 1)
		}
		return u32(q.Get("PCI", "Rx Throughput"), 1)
	}
	d.GetPcieReplayCounterFunc = func() (int, gonvml.Return) { return integer(q.Get("PCI", "Replays Since Reset")) }
	d.GetCurrPcieLinkGenerationFunc = func() (int, gonvml.Return) { return integer(g.Field("pcie.link.gen.current")) }
	d.GetMaxPcieLinkGenerationFunc = func() (int, gonvml.Return) { return integer(g.Field("pcie.link.gen.max")) }
	d.GetGpuMaxPcieLinkGenerationFunc = func() (int, gonvml.Return) { return integer(g.Field("pcie.link.gen.gpumax")) }
	d.GetCurrPcieLinkWidthFunc = func() (int, gonvml.Return) { return integer(g.Field("pcie.link.width.current")) }
	d.GetMaxPcieLinkWidthFunc = func() (int, gonvml.Return) { return integer(g.Field("pcie.link.width.max")) }
	d.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
		gpu, r1 := u32(g.Field("utilization.gpu"), 1)
		mem, r2 := u32(g.Field("utilization.memory"), 1)
		if r1 != gonvml.SUCCESS || r2 != gonvml.SUCCESS {
			return gonvml.Utilization{}, notSupported
		}
		return gonvml.Utilization{Gpu: gpu, Memory: mem}, gonvml.SUCCESS
	}
	d.GetEncoderUtilizationFunc = func() (uint32, uint32, gonvml.Return) {
		v, ret := u32(g.Field("utilization.encoder"), 1)
		return v, 167_000, ret
	}
	d.GetDecoderUtilizationFunc = func() (uint32, uint32, gonvml.Return) {
		v, ret := u32(g.Field("utilization.decoder"), 1)
		return v, 167_000, ret
	}
	d.GetViolationStatusFunc = func(p gonvml.PerfPolicyType) (gonvml.ViolationTime, gonvml.Return) {
		ns, ok := ViolationNs(g, p)
		if !ok {
			return gonvml.ViolationTime{}, notSupported
		}
		return gonvml.ViolationTime{ReferenceTime: 1, ViolationTime: ns}, gonvml.SUCCESS
	}
}

// installStates answers the state, mode and memory calls.
func installStates(d *mock.Device, g *smicapture.GPU) {
	q := g.Q
	d.GetPerformanceStateFunc = func() (gonvml.Pstates, gonvml.Return) {
		p := g.Field("pstate").Text()
		n, ret := integer(smicapture.NewValue(strings.TrimPrefix(p, "P")))
		if !strings.HasPrefix(p, "P") || ret != gonvml.SUCCESS {
			return gonvml.PSTATE_UNKNOWN, notSupported
		}
		return gonvml.Pstates(n), gonvml.SUCCESS
	}
	d.GetFanSpeedFunc = func() (uint32, gonvml.Return) { return u32(g.Field("fan.speed"), 1) }
	d.GetComputeModeFunc = func() (gonvml.ComputeMode, gonvml.Return) {
		m, ok := computeModes[g.Field("compute_mode").Text()]
		if !ok {
			return 0, notSupported
		}
		return m, gonvml.SUCCESS
	}
	d.GetPersistenceModeFunc = func() (gonvml.EnableState, gonvml.Return) {
		on, ret := yesNo(g.Field("persistence_mode"))
		if on {
			return gonvml.FEATURE_ENABLED, ret
		}
		return gonvml.FEATURE_DISABLED, ret
	}
	d.GetMigModeFunc = func() (int, int, gonvml.Return) {
		cur, r1 := yesNo(g.Field("mig.mode.current"))
		pend, r2 := yesNo(g.Field("mig.mode.pending"))
		if r1 != gonvml.SUCCESS || r2 != gonvml.SUCCESS {
			return 0, 0, notSupported
		}
		return migMode(cur), migMode(pend), gonvml.SUCCESS
	}
	d.GetGpuFabricInfoFunc = func() (gonvml.GpuFabricInfo, gonvml.Return) {
		st, ok := fabricStates[q.Get("Fabric", "State").Text()]
		if !ok {
			return gonvml.GpuFabricInfo{State: gonvml.GPU_FABRIC_STATE_NOT_SUPPORTED}, gonvml.SUCCESS
		}
		status := gonvml.SUCCESS
		if s := q.Get("Fabric", "Status"); s.Supported && s.Text() != "Success" {
			status = gonvml.ERROR_UNKNOWN
		}
		return gonvml.GpuFabricInfo{State: uint8(st), Status: uint32(status)}, gonvml.SUCCESS
	}
	d.GetCudaComputeCapabilityFunc = func() (int, int, gonvml.Return) {
		major, minor, ok := strings.Cut(g.Field("compute_cap").Text(), ".")
		ma, r1 := integer(smicapture.NewValue(major))
		mi, r2 := integer(smicapture.NewValue(minor))
		if !ok || r1 != gonvml.SUCCESS || r2 != gonvml.SUCCESS {
			return 0, 0, notSupported
		}
		return ma, mi, gonvml.SUCCESS
	}
	d.GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) {
		var m gonvml.Memory_v2
		for _, p := range []struct {
			dst  *uint64
			name string
		}{{&m.Total, "memory.total"}, {&m.Reserved, "memory.reserved"}, {&m.Used, "memory.used"}, {&m.Free, "memory.free"}} {
			v, ret := u64(g.Field(p.name), mib)
			if ret != gonvml.SUCCESS {
				return gonvml.Memory_v2{}, ret
			}
			*p.dst = v
		}
		return m, gonvml.SUCCESS
	}
	d.GetMemoryInfoFunc = func() (gonvml.Memory, gonvml.Return) {
		m, ret := d.GetMemoryInfo_v2Func()
		return gonvml.Memory{Total: m.Total, Free: m.Free, Used: m.Used}, ret
	}
}

// installRest answers the calls nvidia-smi has nothing for, and the MIG
// and process calls.
func installRest(d *mock.Device, c *smicapture.Capture, index int, g *smicapture.GPU, uuid string) ([]string, error) {
	q := g.Q
	installErrors(d, g)
	installFieldValues(d, c, index, g)
	d.GetGridLicensableFeaturesFunc = func() (gonvml.GridLicensableFeatures, gonvml.Return) {
		// Only a vGPU guest has licensable features; nvidia-smi says which
		// one this is under "GPU Virtualization Mode".
		if q.Get("GPU Virtualization Mode", "Virtualization Mode").Text() == "VGPU" {
			return gonvml.GridLicensableFeatures{}, notSupported
		}
		return gonvml.GridLicensableFeatures{}, gonvml.SUCCESS
	}
	d.GpmQueryDeviceSupportFunc = func() (gonvml.GpmSupport, gonvml.Return) { return gonvml.GpmSupport{}, gonvml.SUCCESS }
	d.GetP2PStatusFunc = func(gonvml.Device, gonvml.GpuP2PCapsIndex) (gonvml.GpuP2PStatus, gonvml.Return) {
		return gonvml.P2P_STATUS_UNKNOWN, notSupported
	}
	d.RegisterEventsFunc = func(uint64, gonvml.EventSet) gonvml.Return { return gonvml.SUCCESS }
	d.GetSupportedEventTypesFunc = func() (uint64, gonvml.Return) { return gonvml.EventTypeXidCriticalError, gonvml.SUCCESS }
	d.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) { return computeProcesses(g), gonvml.SUCCESS }
	d.GetProcessUtilizationFunc = func(uint64) ([]gonvml.ProcessUtilizationSample, gonvml.Return) { return nil, notSupported }
	return installMIG(d, g, uuid)
}

func migMode(on bool) int {
	if on {
		return gonvml.DEVICE_MIG_ENABLE
	}
	return gonvml.DEVICE_MIG_DISABLE
}

// ComputeProcesses are the processes -q lists whose type includes compute
// ("C", "C+G"), as nvmlDeviceGetComputeRunningProcesses gives them.
func ComputeProcesses(g *smicapture.GPU) []smicapture.Process {
	var out []smicapture.Process
	for _, p := range g.Processes {
		if strings.Contains(p.Type, "C") {
			out = append(out, p)
		}
	}
	return out
}

func computeProcesses(g *smicapture.GPU) []gonvml.ProcessInfo {
	var out []gonvml.ProcessInfo
	for _, p := range ComputeProcesses(g) {
		info := gonvml.ProcessInfo{Pid: uint32(p.PID), UsedGpuMemory: uint64(p.UsedMiB) * mib,
			GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF}
		if p.GPUInstanceID >= 0 {
			info.GpuInstanceId, info.ComputeInstanceId = uint32(p.GPUInstanceID), uint32(p.ComputeInstanceID)
		}
		out = append(out, info)
	}
	return out
}

// installErrors answers the ECC, retired page and row remapping calls from
// --query-gpu.
func installErrors(d *mock.Device, g *smicapture.GPU) {
	eccOn, _ := yesNo(g.Field("ecc.mode.current"))
	d.GetTotalEccErrorsFunc = func(t gonvml.MemoryErrorType, c gonvml.EccCounterType) (uint64, gonvml.Return) {
		if !eccOn {
			return 0, notSupported
		}
		return u64(g.Field(EccField(t, c)), 1)
	}
	d.GetRetiredPagesFunc = func(cause gonvml.PageRetirementCause) ([]uint64, gonvml.Return) {
		name := "retired_pages.single_bit_ecc.count"
		if cause == gonvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR {
			name = "retired_pages.double_bit.count"
		}
		n, ret := integer(g.Field(name))
		if ret != gonvml.SUCCESS {
			return nil, ret
		}
		return make([]uint64, n), gonvml.SUCCESS
	}
	d.GetRetiredPagesPendingStatusFunc = func() (gonvml.EnableState, gonvml.Return) {
		on, ret := yesNo(g.Field("retired_pages.pending"))
		if on {
			return gonvml.FEATURE_ENABLED, ret
		}
		return gonvml.FEATURE_DISABLED, ret
	}
	d.GetRemappedRowsFunc = func() (int, int, bool, bool, gonvml.Return) {
		corr, r1 := integer(g.Field("remapped_rows.correctable"))
		unc, r2 := integer(g.Field("remapped_rows.uncorrectable"))
		pend, r3 := yesNo(g.Field("remapped_rows.pending"))
		fail, r4 := yesNo(g.Field("remapped_rows.failure"))
		for _, r := range []gonvml.Return{r1, r2, r3, r4} {
			if r != gonvml.SUCCESS {
				return 0, 0, false, false, notSupported
			}
		}
		return corr, unc, pend, fail, gonvml.SUCCESS
	}
}

// EccField is the --query-gpu total behind one ECC counter.
func EccField(t gonvml.MemoryErrorType, c gonvml.EccCounterType) string {
	kind, scope := "corrected", "volatile"
	if t == gonvml.MEMORY_ERROR_TYPE_UNCORRECTED {
		kind = "uncorrected"
	}
	if c == gonvml.AGGREGATE_ECC {
		scope = "aggregate"
	}
	return fmt.Sprintf("ecc.errors.%s.%s.total", kind, scope)
}

// installFieldValues answers nvmlDeviceGetFieldValues for what nvidia-smi
// shows: memory temperature, instant power, the recovery action and the
// NVLink count; every other field ID is NOT_SUPPORTED.
func installFieldValues(d *mock.Device, c *smicapture.Capture, index int, g *smicapture.GPU) {
	d.GetFieldValuesFunc = func(vals []gonvml.FieldValue) gonvml.Return {
		for k := range vals {
			v := &vals[k]
			var x uint64
			ret := notSupported
			switch v.FieldId {
			case gonvml.FI_DEV_MEMORY_TEMP:
				x, ret = u64(g.Field("temperature.memory"), 1)
			case gonvml.FI_DEV_POWER_INSTANT:
				x, ret = u64(g.Field("power.draw.instant"), 1000)
			case gonvml.FI_DEV_GET_GPU_RECOVERY_ACTION:
				x, ret = RecoveryAction(g)
			case gonvml.FI_DEV_NVLINK_LINK_COUNT:
				var n int
				n, ret = NVLinkCount(c, index, g)
				x = uint64(n)
			}
			if ret != gonvml.SUCCESS {
				v.NvmlReturn = uint32(ret)
				continue
			}
			setU64(v, x)
		}
		return gonvml.SUCCESS
	}
}

// RecoveryAction is the GPU recovery action --query-gpu shows.
func RecoveryAction(g *smicapture.GPU) (uint64, gonvml.Return) {
	a, ok := RecoveryActions[g.Field("gpu_recovery_action").Text()]
	if !ok {
		return 0, notSupported
	}
	return a, gonvml.SUCCESS
}

// NVLinkCount is the GPU's NVLink count from `nvidia-smi nvlink -s`: the
// links it lists, none where it says the GPU has none, and NOT_SUPPORTED
// in MIG mode, where nvidia-smi cannot query them.
func NVLinkCount(c *smicapture.Capture, index int, g *smicapture.GPU) (int, gonvml.Return) {
	if on, _ := yesNo(g.Field("mig.mode.current")); on {
		return 0, notSupported
	}
	n, ok := c.NVLinks[index]
	if !ok {
		return 0, notSupported
	}
	return n, gonvml.SUCCESS
}
