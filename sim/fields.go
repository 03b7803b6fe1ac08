package sim

import (
	"sort"
	"strconv"

	"github.com/gpuscope/gpuscope/counters"
)

// DCGM field IDs, as DCGM numbers them (dcgm_fields.h). They are written out
// here so that the simulator does not import go-dcgm, whose calls are only
// safe after a successful Init.
const (
	fieldDriverVersion       uint16 = 1
	fieldNVMLVersion         uint16 = 2
	fieldName                uint16 = 50
	fieldBrand               uint16 = 51
	fieldSerial              uint16 = 53
	fieldUUID                uint16 = 54
	fieldOEMInforomVer       uint16 = 56
	fieldPCIBusID            uint16 = 57
	fieldECCInforomVer       uint16 = 80
	fieldPowerInforomVer     uint16 = 81
	fieldInforomImageVer     uint16 = 82
	fieldVBIOSVersion        uint16 = 85
	fieldSMClock             uint16 = 100
	fieldMemClock            uint16 = 101
	fieldClockEventReasons          = counters.FieldClockEventReasons
	fieldMaxSMClock          uint16 = 113
	fieldMaxMemClock         uint16 = 114
	fieldMemoryTemp          uint16 = 140
	fieldGPUTemp             uint16 = 150
	fieldPowerUsage          uint16 = 155
	fieldTotalEnergy         uint16 = 156
	fieldPowerUsageInstant   uint16 = 157
	fieldPowerMgmtLimit      uint16 = 160
	fieldEnforcedPowerLimit  uint16 = 164
	fieldPCIeReplayCounter   uint16 = 202
	fieldGPUUtil             uint16 = 203
	fieldMemCopyUtil         uint16 = 204
	fieldEncUtil             uint16 = 206
	fieldDecUtil             uint16 = 207
	fieldXIDErrors                  = counters.FieldXIDErrors
	fieldPowerViolation      uint16 = 240
	fieldThermalViolation    uint16 = 241
	fieldSyncBoostViolation  uint16 = 242
	fieldBoardLimitViolation uint16 = 243
	fieldLowUtilViolation    uint16 = 244
	fieldReliabilityViol     uint16 = 245
	fieldFBTotal             uint16 = 250
	fieldFBFree              uint16 = 251
	fieldFBUsed              uint16 = 252
	fieldFBReserved          uint16 = 253
	fieldECCSBEVolTotal      uint16 = 310
	fieldECCDBEVolTotal      uint16 = 311
	fieldECCSBEAggTotal      uint16 = 312
	fieldECCDBEAggTotal      uint16 = 313
	fieldRetiredSBE          uint16 = 390
	fieldRetiredDBE          uint16 = 391
	fieldRetiredPending      uint16 = 392
	fieldUncorrRemappedRows  uint16 = 393
	fieldCorrRemappedRows    uint16 = 394
	fieldRowRemapFailure     uint16 = 395
	fieldRowRemapPending     uint16 = 396
	fieldNVLinkCRCFlitTotal  uint16 = 409
	fieldNVLinkCRCDataTotal  uint16 = 419
	fieldNVLinkReplayTotal   uint16 = 429
	fieldNVLinkRecoveryTotal uint16 = 439
	fieldNVLinkBandwidthTot  uint16 = 449
	fieldVGPULicenseStatus   uint16 = 526
	fieldProfGREngineActive  uint16 = 1001
	fieldProfSMActive        uint16 = 1002
	fieldProfSMOccupancy     uint16 = 1003
	fieldProfTensorActive    uint16 = 1004
	fieldProfDRAMActive      uint16 = 1005
	fieldProfFP64Active      uint16 = 1006
	fieldProfFP32Active      uint16 = 1007
	fieldProfFP16Active      uint16 = 1008
	fieldProfPCIeTXBytes     uint16 = 1009
	fieldProfPCIeRXBytes     uint16 = 1010
	fieldProfNVLinkTXBytes   uint16 = 1011
	fieldProfNVLinkRXBytes   uint16 = 1012
	fieldExpGPUHealthStatus         = counters.FieldExpGPUHealthStatus
	fieldExpP2PStatus               = counters.FieldExpP2PStatus
)

// maxLinks is the most NVLinks a GPU has (Hopper: 18).
const maxLinks = 18

// Per-link field IDs, indexed by link. DCGM added links in batches, so the
// IDs are not contiguous.
var (
	linkCRCFlitIDs = [maxLinks]uint16{400, 401, 402, 403, 404, 405, 451, 452, 453, 454, 455, 456, 406, 407, 408, 481, 482, 483}
	linkCRCDataIDs = [maxLinks]uint16{410, 411, 412, 413, 414, 415, 457, 458, 459, 460, 461, 462, 416, 417, 418, 484, 485, 486}
	linkReplayIDs  = [maxLinks]uint16{420, 421, 422, 423, 424, 425, 463, 464, 465, 466, 467, 468, 426, 427, 428, 487, 488, 489}
	linkRecovIDs   = [maxLinks]uint16{430, 431, 432, 433, 434, 435, 469, 470, 471, 472, 473, 474, 436, 437, 438, 491, 492, 493}
	linkBwIDs      = [maxLinks]uint16{440, 441, 442, 443, 444, 445, 475, 476, 477, 478, 479, 480, 446, 447, 448, 494, 495, 496}
)

// DCGM_FI_PROF_NVLINK_L0_TX_BYTES; link k has TX at base+2k and RX at base+2k+1.
const profLinkBytesBase uint16 = 1040

// scope says which entities a field is sampled on.
type scope uint8

const (
	// scopeGPU fields describe the whole board (clocks, power, ECC...).
	scopeGPU scope = iota
	// scopeGPUAndMIG fields are also sampled per MIG GPU instance
	// (profiling activity, framebuffer).
	scopeGPUAndMIG
	// scopeLink fields belong to one link, named by fieldInfo.link.
	scopeLink
	// scopeText fields are static strings, sent on every entity of the GPU
	// so that label-type fields label MIG and link series too.
	scopeText
)

// linkKind says which per-link quantity a scopeLink field is.
type linkKind uint8

const (
	linkNone linkKind = iota
	linkCRCFlit
	linkCRCData
	linkReplay
	linkRecovery
	linkBandwidth
	linkProfTX
	linkProfRX
)

type fieldInfo struct {
	id    uint16
	name  string
	scope scope
	// nvlink fields are unsupported on GPUs without NVLink.
	nvlink bool
	kind   linkKind
	link   int
}

// gpuFields are the non-per-link fields the simulator produces.
var gpuFields = []fieldInfo{
	{id: fieldDriverVersion, name: "DCGM_FI_DRIVER_VERSION", scope: scopeText},
	{id: fieldNVMLVersion, name: "DCGM_FI_NVML_VERSION", scope: scopeText},
	{id: fieldName, name: "DCGM_FI_DEV_NAME", scope: scopeText},
	{id: fieldBrand, name: "DCGM_FI_DEV_BRAND", scope: scopeText},
	{id: fieldSerial, name: "DCGM_FI_DEV_SERIAL", scope: scopeText},
	{id: fieldUUID, name: "DCGM_FI_DEV_UUID", scope: scopeText},
	{id: fieldOEMInforomVer, name: "DCGM_FI_DEV_OEM_INFOROM_VER", scope: scopeText},
	{id: fieldPCIBusID, name: "DCGM_FI_DEV_PCI_BUSID", scope: scopeText},
	{id: fieldECCInforomVer, name: "DCGM_FI_DEV_ECC_INFOROM_VER", scope: scopeText},
	{id: fieldPowerInforomVer, name: "DCGM_FI_DEV_POWER_INFOROM_VER", scope: scopeText},
	{id: fieldInforomImageVer, name: "DCGM_FI_DEV_INFOROM_IMAGE_VER", scope: scopeText},
	{id: fieldVBIOSVersion, name: "DCGM_FI_DEV_VBIOS_VERSION", scope: scopeText},
	{id: fieldSMClock, name: "DCGM_FI_DEV_SM_CLOCK"},
	{id: fieldMemClock, name: "DCGM_FI_DEV_MEM_CLOCK"},
	{id: fieldClockEventReasons, name: "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"},
	{id: fieldMaxSMClock, name: "DCGM_FI_DEV_MAX_SM_CLOCK"},
	{id: fieldMaxMemClock, name: "DCGM_FI_DEV_MAX_MEM_CLOCK"},
	{id: fieldMemoryTemp, name: "DCGM_FI_DEV_MEMORY_TEMP"},
	{id: fieldGPUTemp, name: "DCGM_FI_DEV_GPU_TEMP"},
	{id: fieldPowerUsage, name: "DCGM_FI_DEV_POWER_USAGE"},
	{id: fieldTotalEnergy, name: "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"},
	{id: fieldPowerUsageInstant, name: "DCGM_FI_DEV_POWER_USAGE_INSTANT"},
	{id: fieldPowerMgmtLimit, name: "DCGM_FI_DEV_POWER_MGMT_LIMIT"},
	{id: fieldEnforcedPowerLimit, name: "DCGM_FI_DEV_ENFORCED_POWER_LIMIT"},
	{id: fieldPCIeReplayCounter, name: "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"},
	{id: fieldGPUUtil, name: "DCGM_FI_DEV_GPU_UTIL"},
	{id: fieldMemCopyUtil, name: "DCGM_FI_DEV_MEM_COPY_UTIL"},
	{id: fieldEncUtil, name: "DCGM_FI_DEV_ENC_UTIL"},
	{id: fieldDecUtil, name: "DCGM_FI_DEV_DEC_UTIL"},
	{id: fieldXIDErrors, name: "DCGM_FI_DEV_XID_ERRORS"},
	{id: fieldPowerViolation, name: "DCGM_FI_DEV_POWER_VIOLATION"},
	{id: fieldThermalViolation, name: "DCGM_FI_DEV_THERMAL_VIOLATION"},
	{id: fieldSyncBoostViolation, name: "DCGM_FI_DEV_SYNC_BOOST_VIOLATION"},
	{id: fieldBoardLimitViolation, name: "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION"},
	{id: fieldLowUtilViolation, name: "DCGM_FI_DEV_LOW_UTIL_VIOLATION"},
	{id: fieldReliabilityViol, name: "DCGM_FI_DEV_RELIABILITY_VIOLATION"},
	{id: fieldFBTotal, name: "DCGM_FI_DEV_FB_TOTAL", scope: scopeGPUAndMIG},
	{id: fieldFBFree, name: "DCGM_FI_DEV_FB_FREE", scope: scopeGPUAndMIG},
	{id: fieldFBUsed, name: "DCGM_FI_DEV_FB_USED", scope: scopeGPUAndMIG},
	{id: fieldFBReserved, name: "DCGM_FI_DEV_FB_RESERVED", scope: scopeGPUAndMIG},
	{id: fieldECCSBEVolTotal, name: "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"},
	{id: fieldECCDBEVolTotal, name: "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"},
	{id: fieldECCSBEAggTotal, name: "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL"},
	{id: fieldECCDBEAggTotal, name: "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL"},
	{id: fieldRetiredSBE, name: "DCGM_FI_DEV_RETIRED_SBE"},
	{id: fieldRetiredDBE, name: "DCGM_FI_DEV_RETIRED_DBE"},
	{id: fieldRetiredPending, name: "DCGM_FI_DEV_RETIRED_PENDING"},
	{id: fieldUncorrRemappedRows, name: "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"},
	{id: fieldCorrRemappedRows, name: "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"},
	{id: fieldRowRemapFailure, name: "DCGM_FI_DEV_ROW_REMAP_FAILURE"},
	{id: fieldRowRemapPending, name: "DCGM_FI_DEV_ROW_REMAP_PENDING"},
	{id: fieldNVLinkCRCFlitTotal, name: "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", nvlink: true},
	{id: fieldNVLinkCRCDataTotal, name: "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", nvlink: true},
	{id: fieldNVLinkReplayTotal, name: "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", nvlink: true},
	{id: fieldNVLinkRecoveryTotal, name: "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", nvlink: true},
	{id: fieldNVLinkBandwidthTot, name: "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", nvlink: true},
	{id: fieldVGPULicenseStatus, name: "DCGM_FI_DEV_VGPU_LICENSE_STATUS"},
	{id: fieldProfGREngineActive, name: "DCGM_FI_PROF_GR_ENGINE_ACTIVE", scope: scopeGPUAndMIG},
	{id: fieldProfSMActive, name: "DCGM_FI_PROF_SM_ACTIVE", scope: scopeGPUAndMIG},
	{id: fieldProfSMOccupancy, name: "DCGM_FI_PROF_SM_OCCUPANCY", scope: scopeGPUAndMIG},
	{id: fieldProfTensorActive, name: "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", scope: scopeGPUAndMIG},
	{id: fieldProfDRAMActive, name: "DCGM_FI_PROF_DRAM_ACTIVE", scope: scopeGPUAndMIG},
	{id: fieldProfFP64Active, name: "DCGM_FI_PROF_PIPE_FP64_ACTIVE", scope: scopeGPUAndMIG},
	{id: fieldProfFP32Active, name: "DCGM_FI_PROF_PIPE_FP32_ACTIVE", scope: scopeGPUAndMIG},
	{id: fieldProfFP16Active, name: "DCGM_FI_PROF_PIPE_FP16_ACTIVE", scope: scopeGPUAndMIG},
	{id: fieldProfPCIeTXBytes, name: "DCGM_FI_PROF_PCIE_TX_BYTES", scope: scopeGPUAndMIG},
	{id: fieldProfPCIeRXBytes, name: "DCGM_FI_PROF_PCIE_RX_BYTES", scope: scopeGPUAndMIG},
	{id: fieldProfNVLinkTXBytes, name: "DCGM_FI_PROF_NVLINK_TX_BYTES", nvlink: true},
	{id: fieldProfNVLinkRXBytes, name: "DCGM_FI_PROF_NVLINK_RX_BYTES", nvlink: true},
	{id: fieldExpGPUHealthStatus, name: "DCGM_EXP_GPU_HEALTH_STATUS"},
	{id: fieldExpP2PStatus, name: "DCGM_EXP_P2P_STATUS", nvlink: true},
}

// fieldsByID holds every field the simulator produces, per-link ones
// included. Built once; read-only afterwards.
var fieldsByID = buildFieldTable()

func buildFieldTable() map[uint16]*fieldInfo {
	m := make(map[uint16]*fieldInfo, len(gpuFields)+7*maxLinks)
	for i := range gpuFields {
		m[gpuFields[i].id] = &gpuFields[i]
	}
	add := func(id uint16, name string, kind linkKind, link int) {
		m[id] = &fieldInfo{id: id, name: name, scope: scopeLink, nvlink: true, kind: kind, link: link}
	}
	for l := 0; l < maxLinks; l++ {
		ls := "_L" + strconv.Itoa(l)
		add(linkCRCFlitIDs[l], "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT"+ls, linkCRCFlit, l)
		add(linkCRCDataIDs[l], "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT"+ls, linkCRCData, l)
		add(linkReplayIDs[l], "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT"+ls, linkReplay, l)
		add(linkRecovIDs[l], "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT"+ls, linkRecovery, l)
		add(linkBwIDs[l], "DCGM_FI_DEV_NVLINK_BANDWIDTH"+ls, linkBandwidth, l)
		ps := "DCGM_FI_PROF_NVLINK_L" + strconv.Itoa(l)
		add(profLinkBytesBase+uint16(2*l), ps+"_TX_BYTES", linkProfTX, l)
		add(profLinkBytesBase+uint16(2*l+1), ps+"_RX_BYTES", linkProfRX, l)
	}
	return m
}

// FieldIDs returns every field ID the simulator can produce, sorted. The
// counters catalog's sim support table must list exactly these.
func FieldIDs() []uint16 {
	ids := make([]uint16, 0, len(fieldsByID))
	for id := range fieldsByID {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// engineDerived are exporter-side fields the engine computes from what a
// source reports (XID events, the clock-event bitmask); no source samples them.
func engineDerived(id uint16) bool {
	return id == counters.FieldExpXIDErrorsCount || id == counters.FieldExpClockEventsCount
}
