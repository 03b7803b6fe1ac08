package nvml

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
)

// The NVML source serves DCGM's fields (counters/fieldid) in DCGM's units,
// so that a dashboard does not care whether DCGM or NVML fed a series.
const (
	mib = 1 << 20
	// mWPerW converts NVML's milliwatts to DCGM's watts.
	mWPerW = 1000.0
)

// reasonPreHopper is why profiling fields are absent on GPUs without GPM.
const reasonPreHopper = "needs DCGM: profiling counters are only read by the DCGM host engine on pre-Hopper GPUs"

// fieldSpec says how one DCGM field is read through NVML. Exactly one of
// value, text, gpm or xid is set.
type fieldSpec struct {
	value func(r *reading) (float64, error)
	text  func(r *reading) (string, error)
	// gpm is the GPM metric behind a profiling field, and gpmScale the
	// factor from GPM's unit (percent, MiB/s) to DCGM's (ratio, bytes/s).
	gpm      gonvml.GpmMetricId
	gpmScale float64
	// instance marks fields also read on each MIG GPU instance.
	instance bool
	// xid is the XID errors field, fed from the event goroutine.
	xid bool
	// p2p is DCGM_EXP_P2P_STATUS, read towards every other GPU.
	p2p bool
}

// fieldMap is every DCGM field the NVML source serves; Support describes
// the source to the catalog from it.
var fieldMap = map[uint16]fieldSpec{
	fieldid.DriverVersion: {text: func(r *reading) (string, error) { return r.src.driverVersion, nil }},
	fieldid.NVMLVersion:   {text: func(r *reading) (string, error) { return r.src.nvmlVersion, nil }},
	fieldid.Name:          {text: func(r *reading) (string, error) { return r.dev.gpu.ModelName, nil }},
	fieldid.UUID:          {text: func(r *reading) (string, error) { return r.dev.gpu.UUID, nil }},
	fieldid.PCIBusID:      {text: func(r *reading) (string, error) { return r.dev.gpu.PCIBusID, nil }},
	fieldid.Brand:         {text: readBrand},
	fieldid.Serial:        {text: func(r *reading) (string, error) { return call("GetSerial", r.h.GetSerial) }},
	fieldid.VBIOSVersion:  {text: func(r *reading) (string, error) { return call("GetVbiosVersion", r.h.GetVbiosVersion) }},

	fieldid.SMClock:       {value: clock("GetClockInfo(SM)", gonvml.CLOCK_SM, false)},
	fieldid.MemClock:      {value: clock("GetClockInfo(MEM)", gonvml.CLOCK_MEM, false)},
	fieldid.VideoClock:    {value: clock("GetClockInfo(VIDEO)", gonvml.CLOCK_VIDEO, false)},
	fieldid.MaxSMClock:    {value: clock("GetMaxClockInfo(SM)", gonvml.CLOCK_SM, true)},
	fieldid.MaxMemClock:   {value: clock("GetMaxClockInfo(MEM)", gonvml.CLOCK_MEM, true)},
	fieldid.MaxVideoClock: {value: clock("GetMaxClockInfo(VIDEO)", gonvml.CLOCK_VIDEO, true)},
	fieldid.AppSMClock: {value: func(r *reading) (float64, error) {
		return callU32("GetApplicationsClock(SM)", func() (uint32, gonvml.Return) { return r.h.GetApplicationsClock(gonvml.CLOCK_SM) }, 1)
	}},
	fieldid.ClocksEventReasons: {value: func(r *reading) (float64, error) {
		v, ret := r.h.GetCurrentClocksEventReasons()
		return float64(v), nvmlErr("GetCurrentClocksEventReasons", ret)
	}},

	fieldid.MemoryTemp: {value: readMemoryTemp},
	fieldid.GPUTemp: {value: func(r *reading) (float64, error) {
		return callU32("GetTemperature(GPU)", func() (uint32, gonvml.Return) { return r.h.GetTemperature(gonvml.TEMPERATURE_GPU) }, 1)
	}},
	fieldid.SlowdownTemp: {value: func(r *reading) (float64, error) {
		return callU32("GetTemperatureThreshold(SLOWDOWN)", func() (uint32, gonvml.Return) {
			return r.h.GetTemperatureThreshold(gonvml.TEMPERATURE_THRESHOLD_SLOWDOWN)
		}, 1)
	}},
	fieldid.ShutdownTemp: {value: func(r *reading) (float64, error) {
		return callU32("GetTemperatureThreshold(SHUTDOWN)", func() (uint32, gonvml.Return) {
			return r.h.GetTemperatureThreshold(gonvml.TEMPERATURE_THRESHOLD_SHUTDOWN)
		}, 1)
	}},

	fieldid.PowerUsage: {value: func(r *reading) (float64, error) { return callU32("GetPowerUsage", r.h.GetPowerUsage, 1/mWPerW) }},
	fieldid.PowerMgmtLimit: {value: func(r *reading) (float64, error) {
		return callU32("GetPowerManagementLimit", r.h.GetPowerManagementLimit, 1/mWPerW)
	}},
	fieldid.EnforcedPowerLimit: {value: func(r *reading) (float64, error) {
		return callU32("GetEnforcedPowerLimit", r.h.GetEnforcedPowerLimit, 1/mWPerW)
	}},
	fieldid.TotalEnergyConsumption: {value: func(r *reading) (float64, error) {
		v, ret := r.h.GetTotalEnergyConsumption()
		return float64(v), nvmlErr("GetTotalEnergyConsumption", ret)
	}},

	fieldid.PCIeTXThroughput: {value: pcieThroughput("GetPcieThroughput(TX)", gonvml.PCIE_UTIL_TX_BYTES)},
	fieldid.PCIeRXThroughput: {value: pcieThroughput("GetPcieThroughput(RX)", gonvml.PCIE_UTIL_RX_BYTES)},
	fieldid.PCIeReplayCounter: {value: func(r *reading) (float64, error) {
		v, ret := r.h.GetPcieReplayCounter()
		return float64(v), nvmlErr("GetPcieReplayCounter", ret)
	}},
	fieldid.PCIeLinkGen:      {value: readPCIeLinkGen},
	fieldid.PCIeMaxLinkGen:   {value: readPCIeMaxLinkGen},
	fieldid.PCIeLinkWidth:    {value: readPCIeLinkWidth},
	fieldid.PCIeMaxLinkWidth: {value: readPCIeMaxLinkWidth},

	fieldid.GPUUtil:     {value: func(r *reading) (float64, error) { u, err := r.utilization(); return float64(u.Gpu), err }},
	fieldid.MemCopyUtil: {value: func(r *reading) (float64, error) { u, err := r.utilization(); return float64(u.Memory), err }},
	fieldid.EncUtil: {value: func(r *reading) (float64, error) {
		v, _, ret := r.h.GetEncoderUtilization()
		return float64(v), nvmlErr("GetEncoderUtilization", ret)
	}},
	fieldid.DecUtil: {value: func(r *reading) (float64, error) {
		v, _, ret := r.h.GetDecoderUtilization()
		return float64(v), nvmlErr("GetDecoderUtilization", ret)
	}},

	fieldid.XIDErrors: {xid: true},

	fieldid.Pstate:            {value: readPstate},
	fieldid.FanSpeed:          {value: func(r *reading) (float64, error) { return callU32("GetFanSpeed", r.h.GetFanSpeed, 1) }},
	fieldid.ComputeMode:       {value: readComputeMode},
	fieldid.PersistenceMode:   {value: readPersistenceMode},
	fieldid.MIGMode:           {value: readMIGMode},
	fieldid.PowerMgmtLimitMin: {value: func(r *reading) (float64, error) { return readPowerLimitConstraint(r, false) }},
	fieldid.PowerMgmtLimitMax: {value: func(r *reading) (float64, error) { return readPowerLimitConstraint(r, true) }},
	// NVML's instant power field is in mW, DCGM's in W.
	fieldid.PowerUsageInstant: {value: func(r *reading) (float64, error) {
		v, err := r.fieldValue(gonvml.FI_DEV_POWER_INSTANT, 0)
		return v / mWPerW, err
	}},
	fieldid.PowerMgmtLimitDef: {value: func(r *reading) (float64, error) {
		return callU32("GetPowerManagementDefaultLimit", r.h.GetPowerManagementDefaultLimit, 1/mWPerW)
	}},
	fieldid.GetGPURecoveryAction: {value: func(r *reading) (float64, error) {
		return r.fieldValue(gonvml.FI_DEV_GET_GPU_RECOVERY_ACTION, 0)
	}},
	fieldid.FabricManagerStatus:   {value: readFabricStatus},
	fieldid.FabricManagerError:    {value: readFabricError},
	fieldid.FabricClusterUUID:     {text: readFabricClusterUUID},
	fieldid.FabricCliqueID:        {value: readFabricCliqueID},
	fieldid.FabricHealthMask:      {value: readFabricHealthMask},
	fieldid.FabricHealthSummary:   {value: readFabricHealthSummary},
	fieldid.CUDADriverVersion:     {text: readCUDADriverVersion},
	fieldid.CUDAComputeCapability: {text: readComputeCapability},

	fieldid.PowerViolation:       {value: violation("POWER", gonvml.PERF_POLICY_POWER)},
	fieldid.ThermalViolation:     {value: violation("THERMAL", gonvml.PERF_POLICY_THERMAL)},
	fieldid.SyncBoostViolation:   {value: violation("SYNC_BOOST", gonvml.PERF_POLICY_SYNC_BOOST)},
	fieldid.BoardLimitViolation:  {value: violation("BOARD_LIMIT", gonvml.PERF_POLICY_BOARD_LIMIT)},
	fieldid.LowUtilViolation:     {value: violation("LOW_UTILIZATION", gonvml.PERF_POLICY_LOW_UTILIZATION)},
	fieldid.ReliabilityViolation: {value: violation("RELIABILITY", gonvml.PERF_POLICY_RELIABILITY)},

	fieldid.FBTotal:    {instance: true, value: func(r *reading) (float64, error) { m, err := r.memory(); return wholeMiB(m.Total), err }},
	fieldid.FBFree:     {instance: true, value: func(r *reading) (float64, error) { m, err := r.memory(); return wholeMiB(m.Free), err }},
	fieldid.FBUsed:     {instance: true, value: func(r *reading) (float64, error) { m, err := r.memory(); return wholeMiB(m.Used), err }},
	fieldid.FBReserved: {instance: true, value: readFBReserved},

	fieldid.ECCSBEVolTotal: {value: ecc("CORRECTED,VOLATILE", gonvml.MEMORY_ERROR_TYPE_CORRECTED, gonvml.VOLATILE_ECC)},
	fieldid.ECCDBEVolTotal: {value: ecc("UNCORRECTED,VOLATILE", gonvml.MEMORY_ERROR_TYPE_UNCORRECTED, gonvml.VOLATILE_ECC)},
	fieldid.ECCSBEAggTotal: {value: ecc("CORRECTED,AGGREGATE", gonvml.MEMORY_ERROR_TYPE_CORRECTED, gonvml.AGGREGATE_ECC)},
	fieldid.ECCDBEAggTotal: {value: ecc("UNCORRECTED,AGGREGATE", gonvml.MEMORY_ERROR_TYPE_UNCORRECTED, gonvml.AGGREGATE_ECC)},

	fieldid.RetiredSBE: {value: retiredPages("MULTIPLE_SINGLE_BIT_ECC_ERRORS", gonvml.PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)},
	fieldid.RetiredDBE: {value: retiredPages("DOUBLE_BIT_ECC_ERROR", gonvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)},
	fieldid.RetiredPending: {value: func(r *reading) (float64, error) {
		v, ret := r.h.GetRetiredPagesPendingStatus()
		return boolf(v == gonvml.FEATURE_ENABLED), nvmlErr("GetRetiredPagesPendingStatus", ret)
	}},

	fieldid.CorrectableRemappedRows:   {value: func(r *reading) (float64, error) { m, err := r.remappedRows(); return float64(m.corr), err }},
	fieldid.UncorrectableRemappedRows: {value: func(r *reading) (float64, error) { m, err := r.remappedRows(); return float64(m.unc), err }},
	fieldid.RowRemapPending:           {value: func(r *reading) (float64, error) { m, err := r.remappedRows(); return boolf(m.pending), err }},
	fieldid.RowRemapFailure:           {value: func(r *reading) (float64, error) { m, err := r.remappedRows(); return boolf(m.failed), err }},

	fieldid.NVLinkCRCFlitErrorCountTotal: {value: func(r *reading) (float64, error) {
		return r.fieldValue(gonvml.FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, 0)
	}},
	fieldid.NVLinkCRCDataErrorCountTotal: {value: func(r *reading) (float64, error) {
		return r.fieldValue(gonvml.FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL, 0)
	}},
	fieldid.NVLinkReplayErrorCountTotal: {value: func(r *reading) (float64, error) {
		return r.fieldValue(gonvml.FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL, 0)
	}},
	fieldid.NVLinkRecoveryErrorCountTotal: {value: func(r *reading) (float64, error) {
		return r.fieldValue(gonvml.FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL, 0)
	}},
	fieldid.NVLinkBandwidthTotal: {value: readNVLinkBandwidth},
	// DCGM 4.7's bytes per second from the driver's KiB/s itself, not from
	// the truncated "MB/s" above (fieldid/dcgm47.go).
	fieldid.NVLinkThroughputBytesPerSecond: {value: readNVLinkBytesPerSecond},

	fieldid.VGPULicenseStatus: {value: readVGPULicense},

	// GPM gives percentages where DCGM gives ratios, and MiB/s where DCGM
	// gives bytes/s.
	fieldid.ProfGREngineActive:   {instance: true, gpm: gonvml.GPM_METRIC_GRAPHICS_UTIL, gpmScale: 0.01},
	fieldid.ProfSMActive:         {instance: true, gpm: gonvml.GPM_METRIC_SM_UTIL, gpmScale: 0.01},
	fieldid.ProfSMOccupancy:      {instance: true, gpm: gonvml.GPM_METRIC_SM_OCCUPANCY, gpmScale: 0.01},
	fieldid.ProfPipeTensorActive: {instance: true, gpm: gonvml.GPM_METRIC_ANY_TENSOR_UTIL, gpmScale: 0.01},
	fieldid.ProfDRAMActive:       {instance: true, gpm: gonvml.GPM_METRIC_DRAM_BW_UTIL, gpmScale: 0.01},
	fieldid.ProfPipeFP64Active:   {instance: true, gpm: gonvml.GPM_METRIC_FP64_UTIL, gpmScale: 0.01},
	fieldid.ProfPipeFP32Active:   {instance: true, gpm: gonvml.GPM_METRIC_FP32_UTIL, gpmScale: 0.01},
	fieldid.ProfPipeFP16Active:   {instance: true, gpm: gonvml.GPM_METRIC_FP16_UTIL, gpmScale: 0.01},
	fieldid.ProfPCIeTXBytes:      {instance: true, gpm: gonvml.GPM_METRIC_PCIE_TX_PER_SEC, gpmScale: mib},
	fieldid.ProfPCIeRXBytes:      {instance: true, gpm: gonvml.GPM_METRIC_PCIE_RX_PER_SEC, gpmScale: mib},
	fieldid.ProfNVLinkTXBytes:    {instance: true, gpm: gonvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, gpmScale: mib},
	fieldid.ProfNVLinkRXBytes:    {instance: true, gpm: gonvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, gpmScale: mib},

	fieldid.ExpP2PStatus: {p2p: true},
}

// unreadNotes says why the NVML source does not read fields an operator
// may expect from it; `gpuscope counters list --source nvml` shows them.
var unreadNotes = map[uint16]string{
	fieldid.FBUsedPercent:            "not derived by the NVML source: DCGM computes it from its own cache",
	fieldid.ProfPipeTensorIMMAActive: "needs DCGM: no GPM metric matches the IMMA tensor pipe",
	fieldid.ProfPipeTensorHMMAActive: "needs DCGM: no GPM metric matches the HMMA tensor pipe alone",
	fieldid.ProfPipeTensorDFMAActive: "needs DCGM: no GPM metric matches the DFMA tensor pipe alone",
	fieldid.ProfPipeIntActive:        "needs DCGM: no GPM metric matches the integer pipe",
	fieldid.ExpGPUHealthStatus:       "DCGM-only health aggregate",
}

// Support is the NVML source's account of the fields it reads, for the
// catalog's users: every field of fieldMap, and why some others are not.
func Support() counters.Support {
	table := make(map[uint16]string, len(fieldMap)+len(unreadNotes))
	for id, note := range unreadNotes {
		table[id] = note
	}
	for _, e := range fieldid.Current() {
		if fieldid.Of(e.ID).Level == fieldid.LevelLink {
			table[e.ID] = linkFieldNote
		}
	}
	for id := range fieldMap {
		table[id] = ""
	}
	s := counters.SupportTable(Name, table)
	s.Via = func(name string) string {
		if info, ok := counters.Lookup(name); ok && !readsNatively(info.ID) {
			if u, ok := fieldid.BaseUnitOf(info.ID); ok {
				return "NVML, derived from " + u.LegacyName
			}
		}
		if strings.HasPrefix(name, "DCGM_FI_PROF_") {
			return "GPM"
		}
		return "NVML"
	}
	return s
}

// linkFieldNote is why the NVML source reads no field that DCGM keeps per
// NVLink entity (the PPCNT port counters, the link state): it has no link
// entities, and a per-link value summed or picked into a GPU series would
// not be the value dcgm-exporter shows per link.
const linkFieldNote = "per-link NVLink fields (NVLink5 PPCNT counters, NvSwitch ports) live on DCGM's link entities; the NVML source does not read them, use --source=dcgm"

// unsupportedReason is why a field outside fieldMap is absent.
func unsupportedReason(id uint16) string {
	if reason := unreadNotes[id]; reason != "" {
		return reason
	}
	if fieldid.Of(id).Level == fieldid.LevelLink {
		return linkFieldNote
	}
	return fmt.Sprintf("field %d has no NVML equivalent", id)
}

func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func clock(name string, t gonvml.ClockType, maxClock bool) func(r *reading) (float64, error) {
	return func(r *reading) (float64, error) {
		if maxClock {
			return callU32(name, func() (uint32, gonvml.Return) { return r.h.GetMaxClockInfo(t) }, 1)
		}
		return callU32(name, func() (uint32, gonvml.Return) { return r.h.GetClockInfo(t) }, 1)
	}
}

// pcieThroughput keeps NVML's KB/s, which is what DCGM reports for its
// PCIe throughput fields.
func pcieThroughput(name string, c gonvml.PcieUtilCounter) func(r *reading) (float64, error) {
	return func(r *reading) (float64, error) {
		return callU32(name, func() (uint32, gonvml.Return) { return r.h.GetPcieThroughput(c) }, 1)
	}
}

// violation reports the accumulated throttling time in ns, as DCGM does.
func violation(name string, p gonvml.PerfPolicyType) func(r *reading) (float64, error) {
	return func(r *reading) (float64, error) {
		v, ret := r.h.GetViolationStatus(p)
		return float64(v.ViolationTime), nvmlErr("GetViolationStatus("+name+")", ret)
	}
}

func ecc(name string, t gonvml.MemoryErrorType, c gonvml.EccCounterType) func(r *reading) (float64, error) {
	return func(r *reading) (float64, error) {
		v, ret := r.h.GetTotalEccErrors(t, c)
		return float64(v), nvmlErr("GetTotalEccErrors("+name+")", ret)
	}
}

func retiredPages(name string, cause gonvml.PageRetirementCause) func(r *reading) (float64, error) {
	return func(r *reading) (float64, error) {
		pages, ret := r.h.GetRetiredPages(cause)
		return float64(len(pages)), nvmlErr("GetRetiredPages("+name+")", ret)
	}
}

func readFBReserved(r *reading) (float64, error) {
	m, err := r.memory()
	if err != nil {
		return 0, err
	}
	if !m.hasReserved {
		return 0, notSupported("GetMemoryInfo_v2")
	}
	return wholeMiB(m.Reserved), nil
}

// wholeMiB is a byte count in whole MiB, as DCGM reports the FB fields (an
// integer field: the bytes shifted right by 20).
func wholeMiB(b uint64) float64 { return float64(b >> 20) }

// maxMemoryTemp is the highest HBM temperature DCGM passes on; it blanks
// readings above it, which some boards report when the sensor is absent.
const maxMemoryTemp = 200

// readMemoryTemp reads the memory temperature, leaving out what DCGM blanks.
func readMemoryTemp(r *reading) (float64, error) {
	v, err := r.fieldValue(gonvml.FI_DEV_MEMORY_TEMP, 0)
	if err == nil && v > maxMemoryTemp {
		return 0, errBlank
	}
	return v, err
}

// readNVLinkBandwidth reports DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL (field
// 449, DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL) as DCGM computes it
// (DcgmCacheManager.cpp, ReadAndCacheNvLinkBandwidth): the data counters
// (NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX and _RX, the payload without the
// protocol overhead the raw ones count) of all links in one call, scope
// 0xFFFFFFFF, summed; their increase in KiB per second divided by 1000 and
// truncated to a whole number, so that the series keeps its level when
// the source switches between DCGM and NVML. Where DCGM publishes 0 at the
// first reading, this source leaves the field without a value: a 0 would
// read as idle links.
func readNVLinkBandwidth(r *reading) (float64, error) {
	perSec, err := r.nvlinkRate()
	if err != nil {
		return 0, err
	}
	return math.Trunc(perSec / 1000), nil
}

// readNVLinkBytesPerSecond is the NVLink throughput in bytes per second:
// the driver's KiB/s times 1024.
func readNVLinkBytesPerSecond(r *reading) (float64, error) {
	perSec, err := r.nvlinkRate()
	if err != nil {
		return 0, err
	}
	return perSec * 1024, nil
}

// nvlinkRate is the GPU's NVLink throughput in KiB/s, read once per
// reading: both NVLink fields share one counter baseline.
func (r *reading) nvlinkRate() (float64, error) {
	if r.nvlinkKiBs == nil && r.nvlinkErr == nil {
		v, err := readNVLinkKiBs(r)
		r.nvlinkKiBs, r.nvlinkErr = &v, err
	}
	if r.nvlinkErr != nil {
		return 0, r.nvlinkErr
	}
	return *r.nvlinkKiBs, nil
}

func readNVLinkKiBs(r *reading) (float64, error) {
	links, err := r.linkCount()
	if err != nil {
		return 0, err
	}
	if links == 0 {
		return 0, notSupported("NVLink throughput (no NVLink on this GPU)")
	}
	vals := []gonvml.FieldValue{
		{FieldId: gonvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, ScopeId: nvlinkAllLinks},
		{FieldId: gonvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX, ScopeId: nvlinkAllLinks},
	}
	if err := nvmlErr("GetFieldValues(NVLINK_THROUGHPUT_DATA)", r.h.GetFieldValues(vals)); err != nil {
		return 0, err
	}
	var kib float64
	for i := range vals {
		v, err := decodeFieldValue(&vals[i])
		if err != nil {
			return 0, err
		}
		kib += v
	}
	perSec, ok := r.dev.nvlink.rate(kib, r.now)
	if !ok {
		return 0, errBaseline
	}
	return perSec, nil
}

// nvlinkAllLinks is the field-value scope DCGM passes for all NVLinks of a
// GPU ("std::numeric_limits<unsigned>::max() represents all NvLinks of the
// GPU and is passed verbatim to nvml", DcgmCacheManager.cpp).
const nvlinkAllLinks = 0xFFFFFFFF

// errBaseline says a rate has no value yet: its counter has been read once.
var errBaseline = errors.New("first reading of the counter sets the baseline")

// errBlank says the reading is one DCGM would blank: no value this time,
// and no failure.
var errBlank = errors.New("reading outside what DCGM reports")

// counterBaseline turns a cumulative counter into a rate per second.
type counterBaseline struct {
	v   float64
	at  time.Time
	set bool
}

// rate returns the counter's increase per second since the previous call,
// false on the first call, after a reset of the counter or when no time has
// passed.
func (c *counterBaseline) rate(v float64, now time.Time) (float64, bool) {
	prev := *c
	*c = counterBaseline{v: v, at: now, set: true}
	dt := now.Sub(prev.at).Seconds()
	if !prev.set || v < prev.v || dt <= 0 {
		return 0, false
	}
	return (v - prev.v) / dt, true
}

// readVGPULicense reports the vGPU feature's license state inside a vGPU
// guest (1 licensed, 0 not); bare-metal GPUs have no licensable features.
func readVGPULicense(r *reading) (float64, error) {
	f, ret := r.h.GetGridLicensableFeatures()
	if err := nvmlErr("GetGridLicensableFeatures", ret); err != nil {
		return 0, err
	}
	if f.IsGridLicenseSupported == 0 {
		// DCGM reports 0 on bare metal, and dcgm-exporter's default
		// counters file lists the field, so it is 0 here too.
		return 0, nil
	}
	n := int(f.LicensableFeaturesCount)
	if n > len(f.GridLicensableFeatures) {
		n = len(f.GridLicensableFeatures)
	}
	for _, feat := range f.GridLicensableFeatures[:n] {
		if gonvml.GridLicenseFeatureCode(feat.FeatureCode) == gonvml.GRID_LICENSE_FEATURE_CODE_VGPU {
			return float64(feat.FeatureState), nil
		}
	}
	return 0, notSupported("GetGridLicensableFeatures (no vGPU feature)")
}

var brandNames = map[gonvml.BrandType]string{
	gonvml.BRAND_QUADRO:              "Quadro",
	gonvml.BRAND_TESLA:               "Tesla",
	gonvml.BRAND_NVS:                 "NVS",
	gonvml.BRAND_GRID:                "Grid",
	gonvml.BRAND_GEFORCE:             "GeForce",
	gonvml.BRAND_TITAN:               "Titan",
	gonvml.BRAND_NVIDIA_VAPPS:        "NVIDIA Virtual Applications",
	gonvml.BRAND_NVIDIA_VPC:          "NVIDIA Virtual PC",
	gonvml.BRAND_NVIDIA_VCS:          "NVIDIA Virtual Compute Server",
	gonvml.BRAND_NVIDIA_VWS:          "NVIDIA RTX Virtual Workstation",
	gonvml.BRAND_NVIDIA_CLOUD_GAMING: "NVIDIA Cloud Gaming",
	gonvml.BRAND_QUADRO_RTX:          "Quadro RTX",
	gonvml.BRAND_NVIDIA_RTX:          "NVIDIA RTX",
	gonvml.BRAND_NVIDIA:              "NVIDIA",
	gonvml.BRAND_GEFORCE_RTX:         "GeForce RTX",
	gonvml.BRAND_TITAN_RTX:           "Titan RTX",
}

func readBrand(r *reading) (string, error) {
	b, ret := r.h.GetBrand()
	if err := nvmlErr("GetBrand", ret); err != nil {
		return "", err
	}
	if name, ok := brandNames[b]; ok {
		return name, nil
	}
	return "Unknown", nil
}
