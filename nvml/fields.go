package nvml

import (
	"fmt"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuscope/gpuscope/counters"
)

// DCGM field IDs this package reads. They follow dcgm_fields.h, so that a
// dashboard does not care whether DCGM or NVML fed a series.
const (
	fDriverVersion       uint16 = 1
	fNVMLVersion         uint16 = 2
	fName                uint16 = 50
	fBrand               uint16 = 51
	fSerial              uint16 = 53
	fUUID                uint16 = 54
	fPCIBusID            uint16 = 57
	fVBIOS               uint16 = 85
	fSMClock             uint16 = 100
	fMemClock            uint16 = 101
	fVideoClock          uint16 = 102
	fAppSMClock          uint16 = 110
	fMaxSMClock          uint16 = 113
	fMemoryTemp          uint16 = 140
	fGPUTemp             uint16 = 150
	fPowerUsage          uint16 = 155
	fTotalEnergy         uint16 = 156
	fSlowdownTemp        uint16 = 158
	fShutdownTemp        uint16 = 159
	fPowerMgmtLimit      uint16 = 160
	fEnforcedPowerLimit  uint16 = 164
	fPCIeTxThroughput    uint16 = 200
	fPCIeRxThroughput    uint16 = 201
	fPCIeReplayCounter   uint16 = 202
	fGPUUtil             uint16 = 203
	fMemCopyUtil         uint16 = 204
	fEncUtil             uint16 = 206
	fDecUtil             uint16 = 207
	fPowerViolation      uint16 = 240
	fThermalViolation    uint16 = 241
	fSyncBoostViolation  uint16 = 242
	fBoardLimitViolation uint16 = 243
	fLowUtilViolation    uint16 = 244
	fReliabilityViolat   uint16 = 245
	fFBTotal             uint16 = 250
	fFBFree              uint16 = 251
	fFBUsed              uint16 = 252
	fFBReserved          uint16 = 253
	fECCSBEVolTotal      uint16 = 310
	fECCDBEVolTotal      uint16 = 311
	fECCSBEAggTotal      uint16 = 312
	fECCDBEAggTotal      uint16 = 313
	fRetiredSBE          uint16 = 390
	fRetiredDBE          uint16 = 391
	fRetiredPending      uint16 = 392
	fUncorrRemappedRows  uint16 = 393
	fCorrRemappedRows    uint16 = 394
	fRowRemapFailure     uint16 = 395
	fRowRemapPending     uint16 = 396
	fNVLinkCRCFlitErrors uint16 = 409
	fNVLinkCRCDataErrors uint16 = 419
	fNVLinkReplayErrors  uint16 = 429
	fNVLinkRecoveryErrs  uint16 = 439
	fNVLinkBandwidth     uint16 = 449
	fVGPULicenseStatus   uint16 = 526
	fProfGrEngineActive  uint16 = 1001
	fProfSMActive        uint16 = 1002
	fProfSMOccupancy     uint16 = 1003
	fProfTensorActive    uint16 = 1004
	fProfDRAMActive      uint16 = 1005
	fProfFP64Active      uint16 = 1006
	fProfFP32Active      uint16 = 1007
	fProfFP16Active      uint16 = 1008
	fProfPCIeTxBytes     uint16 = 1009
	fProfPCIeRxBytes     uint16 = 1010
	fProfNVLinkTxBytes   uint16 = 1011
	fProfNVLinkRxBytes   uint16 = 1012
)

// NVML field-value IDs (nvml.h NVML_FI_DEV_*) read through GetFieldValues.
const (
	nvmlFINVLinkCRCFlitTotal  = 38
	nvmlFINVLinkCRCDataTotal  = 45
	nvmlFINVLinkReplayTotal   = 52
	nvmlFINVLinkRecoveryTotal = 59
	nvmlFIMemoryTemp          = 82
	nvmlFINVLinkLinkCount     = 91
	nvmlFINVLinkRawTx         = 140
	nvmlFINVLinkRawRx         = 141
)

const (
	mib = 1 << 20
	// mWPerW converts NVML's milliwatts to DCGM's watts.
	mWPerW = 1000.0
)

// reasonPreHopper is why profiling fields are absent on GPUs without GPM.
const reasonPreHopper = "needs DCGM: profiling counters are only read by the DCGM host engine on pre-Hopper GPUs"

// fieldSpec says how one DCGM field is read through NVML. Exactly one of
// value, text, gpm, derived or xid is set.
type fieldSpec struct {
	value func(r *reading) (float64, error)
	text  func(r *reading) (string, error)
	// gpm is the GPM metric behind a profiling field, and gpmScale the
	// factor from GPM's unit (percent, MiB/s) to DCGM's (ratio, bytes/s).
	gpm      gonvml.GpmMetricId
	gpmScale float64
	// instance marks fields also read on each MIG GPU instance.
	instance bool
	// derived fields are computed by the engine from other fields; the
	// source accepts them and reads nothing.
	derived bool
	// xid is field 230, fed from the event goroutine.
	xid bool
}

// fieldMap is every DCGM field the NVML source serves. counters.NVMLSupport
// lists the same IDs with an empty reason; a test keeps them equal.
var fieldMap = map[uint16]fieldSpec{
	fDriverVersion: {text: func(r *reading) (string, error) { return r.src.driverVersion, nil }},
	fNVMLVersion:   {text: func(r *reading) (string, error) { return r.src.nvmlVersion, nil }},
	fName:          {text: func(r *reading) (string, error) { return r.dev.gpu.ModelName, nil }},
	fUUID:          {text: func(r *reading) (string, error) { return r.dev.gpu.UUID, nil }},
	fPCIBusID:      {text: func(r *reading) (string, error) { return r.dev.gpu.PCIBusID, nil }},
	fBrand:         {text: readBrand},
	fSerial:        {text: func(r *reading) (string, error) { return call("GetSerial", r.h.GetSerial) }},
	fVBIOS:         {text: func(r *reading) (string, error) { return call("GetVbiosVersion", r.h.GetVbiosVersion) }},

	fSMClock:    {value: clock("GetClockInfo(SM)", gonvml.CLOCK_SM, false)},
	fMemClock:   {value: clock("GetClockInfo(MEM)", gonvml.CLOCK_MEM, false)},
	fVideoClock: {value: clock("GetClockInfo(VIDEO)", gonvml.CLOCK_VIDEO, false)},
	fMaxSMClock: {value: clock("GetMaxClockInfo(SM)", gonvml.CLOCK_SM, true)},
	fAppSMClock: {value: func(r *reading) (float64, error) {
		return callU32("GetApplicationsClock(SM)", func() (uint32, gonvml.Return) { return r.h.GetApplicationsClock(gonvml.CLOCK_SM) }, 1)
	}},
	counters.FieldClockEventReasons: {value: func(r *reading) (float64, error) {
		v, ret := r.h.GetCurrentClocksEventReasons()
		return float64(v), nvmlErr("GetCurrentClocksEventReasons", ret)
	}},

	fMemoryTemp: {value: func(r *reading) (float64, error) { return r.fieldValue(nvmlFIMemoryTemp, 0) }},
	fGPUTemp: {value: func(r *reading) (float64, error) {
		return callU32("GetTemperature(GPU)", func() (uint32, gonvml.Return) { return r.h.GetTemperature(gonvml.TEMPERATURE_GPU) }, 1)
	}},
	fSlowdownTemp: {value: func(r *reading) (float64, error) {
		return callU32("GetTemperatureThreshold(SLOWDOWN)", func() (uint32, gonvml.Return) {
			return r.h.GetTemperatureThreshold(gonvml.TEMPERATURE_THRESHOLD_SLOWDOWN)
		}, 1)
	}},
	fShutdownTemp: {value: func(r *reading) (float64, error) {
		return callU32("GetTemperatureThreshold(SHUTDOWN)", func() (uint32, gonvml.Return) {
			return r.h.GetTemperatureThreshold(gonvml.TEMPERATURE_THRESHOLD_SHUTDOWN)
		}, 1)
	}},

	fPowerUsage: {value: func(r *reading) (float64, error) { return callU32("GetPowerUsage", r.h.GetPowerUsage, 1/mWPerW) }},
	fPowerMgmtLimit: {value: func(r *reading) (float64, error) {
		return callU32("GetPowerManagementLimit", r.h.GetPowerManagementLimit, 1/mWPerW)
	}},
	fEnforcedPowerLimit: {value: func(r *reading) (float64, error) {
		return callU32("GetEnforcedPowerLimit", r.h.GetEnforcedPowerLimit, 1/mWPerW)
	}},
	fTotalEnergy: {value: func(r *reading) (float64, error) {
		v, ret := r.h.GetTotalEnergyConsumption()
		return float64(v), nvmlErr("GetTotalEnergyConsumption", ret)
	}},

	fPCIeTxThroughput: {value: pcieThroughput("GetPcieThroughput(TX)", gonvml.PCIE_UTIL_TX_BYTES)},
	fPCIeRxThroughput: {value: pcieThroughput("GetPcieThroughput(RX)", gonvml.PCIE_UTIL_RX_BYTES)},
	fPCIeReplayCounter: {value: func(r *reading) (float64, error) {
		v, ret := r.h.GetPcieReplayCounter()
		return float64(v), nvmlErr("GetPcieReplayCounter", ret)
	}},

	fGPUUtil:     {value: func(r *reading) (float64, error) { u, err := r.utilization(); return float64(u.Gpu), err }},
	fMemCopyUtil: {value: func(r *reading) (float64, error) { u, err := r.utilization(); return float64(u.Memory), err }},
	fEncUtil: {value: func(r *reading) (float64, error) {
		v, _, ret := r.h.GetEncoderUtilization()
		return float64(v), nvmlErr("GetEncoderUtilization", ret)
	}},
	fDecUtil: {value: func(r *reading) (float64, error) {
		v, _, ret := r.h.GetDecoderUtilization()
		return float64(v), nvmlErr("GetDecoderUtilization", ret)
	}},

	counters.FieldXIDErrors: {xid: true},

	fPowerViolation:      {value: violation("POWER", gonvml.PERF_POLICY_POWER)},
	fThermalViolation:    {value: violation("THERMAL", gonvml.PERF_POLICY_THERMAL)},
	fSyncBoostViolation:  {value: violation("SYNC_BOOST", gonvml.PERF_POLICY_SYNC_BOOST)},
	fBoardLimitViolation: {value: violation("BOARD_LIMIT", gonvml.PERF_POLICY_BOARD_LIMIT)},
	fLowUtilViolation:    {value: violation("LOW_UTILIZATION", gonvml.PERF_POLICY_LOW_UTILIZATION)},
	fReliabilityViolat:   {value: violation("RELIABILITY", gonvml.PERF_POLICY_RELIABILITY)},

	fFBTotal:    {instance: true, value: func(r *reading) (float64, error) { m, err := r.memory(); return float64(m.Total) / mib, err }},
	fFBFree:     {instance: true, value: func(r *reading) (float64, error) { m, err := r.memory(); return float64(m.Free) / mib, err }},
	fFBUsed:     {instance: true, value: func(r *reading) (float64, error) { m, err := r.memory(); return float64(m.Used) / mib, err }},
	fFBReserved: {instance: true, value: readFBReserved},

	fECCSBEVolTotal: {value: ecc("CORRECTED,VOLATILE", gonvml.MEMORY_ERROR_TYPE_CORRECTED, gonvml.VOLATILE_ECC)},
	fECCDBEVolTotal: {value: ecc("UNCORRECTED,VOLATILE", gonvml.MEMORY_ERROR_TYPE_UNCORRECTED, gonvml.VOLATILE_ECC)},
	fECCSBEAggTotal: {value: ecc("CORRECTED,AGGREGATE", gonvml.MEMORY_ERROR_TYPE_CORRECTED, gonvml.AGGREGATE_ECC)},
	fECCDBEAggTotal: {value: ecc("UNCORRECTED,AGGREGATE", gonvml.MEMORY_ERROR_TYPE_UNCORRECTED, gonvml.AGGREGATE_ECC)},

	fRetiredSBE: {value: retiredPages("MULTIPLE_SINGLE_BIT_ECC_ERRORS", gonvml.PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)},
	fRetiredDBE: {value: retiredPages("DOUBLE_BIT_ECC_ERROR", gonvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)},
	fRetiredPending: {value: func(r *reading) (float64, error) {
		v, ret := r.h.GetRetiredPagesPendingStatus()
		return boolf(v == gonvml.FEATURE_ENABLED), nvmlErr("GetRetiredPagesPendingStatus", ret)
	}},

	fCorrRemappedRows:   {value: func(r *reading) (float64, error) { m, err := r.remappedRows(); return float64(m.corr), err }},
	fUncorrRemappedRows: {value: func(r *reading) (float64, error) { m, err := r.remappedRows(); return float64(m.unc), err }},
	fRowRemapPending:    {value: func(r *reading) (float64, error) { m, err := r.remappedRows(); return boolf(m.pending), err }},
	fRowRemapFailure:    {value: func(r *reading) (float64, error) { m, err := r.remappedRows(); return boolf(m.failed), err }},

	fNVLinkCRCFlitErrors: {value: func(r *reading) (float64, error) { return r.fieldValue(nvmlFINVLinkCRCFlitTotal, 0) }},
	fNVLinkCRCDataErrors: {value: func(r *reading) (float64, error) { return r.fieldValue(nvmlFINVLinkCRCDataTotal, 0) }},
	fNVLinkReplayErrors:  {value: func(r *reading) (float64, error) { return r.fieldValue(nvmlFINVLinkReplayTotal, 0) }},
	fNVLinkRecoveryErrs:  {value: func(r *reading) (float64, error) { return r.fieldValue(nvmlFINVLinkRecoveryTotal, 0) }},
	fNVLinkBandwidth:     {value: readNVLinkBandwidth},

	fVGPULicenseStatus: {value: readVGPULicense},

	// GPM gives percentages where DCGM gives ratios, and MiB/s where DCGM
	// gives bytes/s.
	fProfGrEngineActive: {instance: true, gpm: gonvml.GPM_METRIC_GRAPHICS_UTIL, gpmScale: 0.01},
	fProfSMActive:       {instance: true, gpm: gonvml.GPM_METRIC_SM_UTIL, gpmScale: 0.01},
	fProfSMOccupancy:    {instance: true, gpm: gonvml.GPM_METRIC_SM_OCCUPANCY, gpmScale: 0.01},
	fProfTensorActive:   {instance: true, gpm: gonvml.GPM_METRIC_ANY_TENSOR_UTIL, gpmScale: 0.01},
	fProfDRAMActive:     {instance: true, gpm: gonvml.GPM_METRIC_DRAM_BW_UTIL, gpmScale: 0.01},
	fProfFP64Active:     {instance: true, gpm: gonvml.GPM_METRIC_FP64_UTIL, gpmScale: 0.01},
	fProfFP32Active:     {instance: true, gpm: gonvml.GPM_METRIC_FP32_UTIL, gpmScale: 0.01},
	fProfFP16Active:     {instance: true, gpm: gonvml.GPM_METRIC_FP16_UTIL, gpmScale: 0.01},
	fProfPCIeTxBytes:    {instance: true, gpm: gonvml.GPM_METRIC_PCIE_TX_PER_SEC, gpmScale: mib},
	fProfPCIeRxBytes:    {instance: true, gpm: gonvml.GPM_METRIC_PCIE_RX_PER_SEC, gpmScale: mib},
	fProfNVLinkTxBytes:  {instance: true, gpm: gonvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, gpmScale: mib},
	fProfNVLinkRxBytes:  {instance: true, gpm: gonvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, gpmScale: mib},

	counters.FieldExpXIDErrorsCount:   {derived: true},
	counters.FieldExpClockEventsCount: {derived: true},
}

// unsupportedReason is why a field outside fieldMap is absent.
func unsupportedReason(id uint16) string {
	if reason := counters.NVMLSupport()[id]; reason != "" {
		return reason
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

// pcieThroughput keeps NVML's KB/s, which is what DCGM reports for 200/201.
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
	return float64(m.Reserved) / mib, nil
}

// readNVLinkBandwidth sums the raw TX and RX throughput counters (KiB,
// headers included) over all links, which is what DCGM's
// DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL counts on current drivers.
func readNVLinkBandwidth(r *reading) (float64, error) {
	links, err := r.linkCount()
	if err != nil {
		return 0, err
	}
	if links == 0 {
		return 0, notSupported("NVLink throughput (no NVLink on this GPU)")
	}
	vals := make([]gonvml.FieldValue, 0, 2*links)
	for l := 0; l < links; l++ {
		vals = append(vals,
			gonvml.FieldValue{FieldId: nvmlFINVLinkRawTx, ScopeId: uint32(l)},
			gonvml.FieldValue{FieldId: nvmlFINVLinkRawRx, ScopeId: uint32(l)})
	}
	if err := nvmlErr("GetFieldValues(NVLINK_THROUGHPUT_RAW)", r.h.GetFieldValues(vals)); err != nil {
		return 0, err
	}
	var total float64
	for i := range vals {
		v, err := decodeFieldValue(&vals[i])
		if err != nil {
			return 0, err
		}
		total += v
	}
	return total, nil
}

// readVGPULicense reports the vGPU feature's license state inside a vGPU
// guest (1 licensed, 0 not); bare-metal GPUs have no licensable features.
func readVGPULicense(r *reading) (float64, error) {
	f, ret := r.h.GetGridLicensableFeatures()
	if err := nvmlErr("GetGridLicensableFeatures", ret); err != nil {
		return 0, err
	}
	if f.IsGridLicenseSupported == 0 {
		return 0, notSupported("GetGridLicensableFeatures (not a vGPU guest)")
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
