package sim

import (
	"sort"
	"strconv"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
)

// maxLinks is the most NVLinks a GPU has (Hopper: 18), as many as DCGM
// has per-link fields for.
const maxLinks = len(fieldid.NVLinkBandwidthByLink)

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
	{id: fieldid.DriverVersion, name: "DCGM_FI_DRIVER_VERSION", scope: scopeText},
	{id: fieldid.NVMLVersion, name: "DCGM_FI_NVML_VERSION", scope: scopeText},
	{id: fieldid.Name, name: "DCGM_FI_DEV_NAME", scope: scopeText},
	{id: fieldid.Brand, name: "DCGM_FI_DEV_BRAND", scope: scopeText},
	{id: fieldid.Serial, name: "DCGM_FI_DEV_SERIAL", scope: scopeText},
	{id: fieldid.UUID, name: "DCGM_FI_DEV_UUID", scope: scopeText},
	{id: fieldid.OEMInforomVer, name: "DCGM_FI_DEV_OEM_INFOROM_VER", scope: scopeText},
	{id: fieldid.PCIBusID, name: "DCGM_FI_DEV_PCI_BUSID", scope: scopeText},
	{id: fieldid.ECCInforomVer, name: "DCGM_FI_DEV_ECC_INFOROM_VER", scope: scopeText},
	{id: fieldid.PowerInforomVer, name: "DCGM_FI_DEV_POWER_INFOROM_VER", scope: scopeText},
	{id: fieldid.InforomImageVer, name: "DCGM_FI_DEV_INFOROM_IMAGE_VER", scope: scopeText},
	{id: fieldid.VBIOSVersion, name: "DCGM_FI_DEV_VBIOS_VERSION", scope: scopeText},
	{id: fieldid.SMClock, name: "DCGM_FI_DEV_SM_CLOCK"},
	{id: fieldid.MemClock, name: "DCGM_FI_DEV_MEM_CLOCK"},
	{id: fieldid.ClocksEventReasons, name: "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"},
	{id: fieldid.MaxSMClock, name: "DCGM_FI_DEV_MAX_SM_CLOCK"},
	{id: fieldid.MaxMemClock, name: "DCGM_FI_DEV_MAX_MEM_CLOCK"},
	{id: fieldid.MemoryTemp, name: "DCGM_FI_DEV_MEMORY_TEMP"},
	{id: fieldid.GPUTemp, name: "DCGM_FI_DEV_GPU_TEMP"},
	{id: fieldid.PowerUsage, name: "DCGM_FI_DEV_POWER_USAGE"},
	{id: fieldid.TotalEnergyConsumption, name: "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"},
	{id: fieldid.PowerUsageInstant, name: "DCGM_FI_DEV_POWER_USAGE_INSTANT"},
	{id: fieldid.PowerMgmtLimit, name: "DCGM_FI_DEV_POWER_MGMT_LIMIT"},
	{id: fieldid.EnforcedPowerLimit, name: "DCGM_FI_DEV_ENFORCED_POWER_LIMIT"},
	{id: fieldid.PCIeReplayCounter, name: "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"},
	{id: fieldid.GPUUtil, name: "DCGM_FI_DEV_GPU_UTIL"},
	{id: fieldid.MemCopyUtil, name: "DCGM_FI_DEV_MEM_COPY_UTIL"},
	{id: fieldid.EncUtil, name: "DCGM_FI_DEV_ENC_UTIL"},
	{id: fieldid.DecUtil, name: "DCGM_FI_DEV_DEC_UTIL"},
	{id: fieldid.XIDErrors, name: "DCGM_FI_DEV_XID_ERRORS"},
	{id: fieldid.PowerViolation, name: "DCGM_FI_DEV_POWER_VIOLATION"},
	{id: fieldid.ThermalViolation, name: "DCGM_FI_DEV_THERMAL_VIOLATION"},
	{id: fieldid.SyncBoostViolation, name: "DCGM_FI_DEV_SYNC_BOOST_VIOLATION"},
	{id: fieldid.BoardLimitViolation, name: "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION"},
	{id: fieldid.LowUtilViolation, name: "DCGM_FI_DEV_LOW_UTIL_VIOLATION"},
	{id: fieldid.ReliabilityViolation, name: "DCGM_FI_DEV_RELIABILITY_VIOLATION"},
	{id: fieldid.FBTotal, name: "DCGM_FI_DEV_FB_TOTAL", scope: scopeGPUAndMIG},
	{id: fieldid.FBFree, name: "DCGM_FI_DEV_FB_FREE", scope: scopeGPUAndMIG},
	{id: fieldid.FBUsed, name: "DCGM_FI_DEV_FB_USED", scope: scopeGPUAndMIG},
	{id: fieldid.FBReserved, name: "DCGM_FI_DEV_FB_RESERVED", scope: scopeGPUAndMIG},
	{id: fieldid.ECCSBEVolTotal, name: "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"},
	{id: fieldid.ECCDBEVolTotal, name: "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"},
	{id: fieldid.ECCSBEAggTotal, name: "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL"},
	{id: fieldid.ECCDBEAggTotal, name: "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL"},
	{id: fieldid.RetiredSBE, name: "DCGM_FI_DEV_RETIRED_SBE"},
	{id: fieldid.RetiredDBE, name: "DCGM_FI_DEV_RETIRED_DBE"},
	{id: fieldid.RetiredPending, name: "DCGM_FI_DEV_RETIRED_PENDING"},
	{id: fieldid.UncorrectableRemappedRows, name: "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"},
	{id: fieldid.CorrectableRemappedRows, name: "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"},
	{id: fieldid.RowRemapFailure, name: "DCGM_FI_DEV_ROW_REMAP_FAILURE"},
	{id: fieldid.RowRemapPending, name: "DCGM_FI_DEV_ROW_REMAP_PENDING"},
	{id: fieldid.NVLinkCRCFlitErrorCountTotal, name: "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", nvlink: true},
	{id: fieldid.NVLinkCRCDataErrorCountTotal, name: "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", nvlink: true},
	{id: fieldid.NVLinkReplayErrorCountTotal, name: "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", nvlink: true},
	{id: fieldid.NVLinkRecoveryErrorCountTotal, name: "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", nvlink: true},
	{id: fieldid.NVLinkBandwidthTotal, name: "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", nvlink: true},
	{id: fieldid.VGPULicenseStatus, name: "DCGM_FI_DEV_VGPU_LICENSE_STATUS"},
	{id: fieldid.ProfGREngineActive, name: "DCGM_FI_PROF_GR_ENGINE_ACTIVE", scope: scopeGPUAndMIG},
	{id: fieldid.ProfSMActive, name: "DCGM_FI_PROF_SM_ACTIVE", scope: scopeGPUAndMIG},
	{id: fieldid.ProfSMOccupancy, name: "DCGM_FI_PROF_SM_OCCUPANCY", scope: scopeGPUAndMIG},
	{id: fieldid.ProfPipeTensorActive, name: "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", scope: scopeGPUAndMIG},
	{id: fieldid.ProfDRAMActive, name: "DCGM_FI_PROF_DRAM_ACTIVE", scope: scopeGPUAndMIG},
	{id: fieldid.ProfPipeFP64Active, name: "DCGM_FI_PROF_PIPE_FP64_ACTIVE", scope: scopeGPUAndMIG},
	{id: fieldid.ProfPipeFP32Active, name: "DCGM_FI_PROF_PIPE_FP32_ACTIVE", scope: scopeGPUAndMIG},
	{id: fieldid.ProfPipeFP16Active, name: "DCGM_FI_PROF_PIPE_FP16_ACTIVE", scope: scopeGPUAndMIG},
	{id: fieldid.ProfPCIeTXBytes, name: "DCGM_FI_PROF_PCIE_TX_BYTES", scope: scopeGPUAndMIG},
	{id: fieldid.ProfPCIeRXBytes, name: "DCGM_FI_PROF_PCIE_RX_BYTES", scope: scopeGPUAndMIG},
	{id: fieldid.ProfNVLinkTXBytes, name: "DCGM_FI_PROF_NVLINK_TX_BYTES", nvlink: true},
	{id: fieldid.ProfNVLinkRXBytes, name: "DCGM_FI_PROF_NVLINK_RX_BYTES", nvlink: true},
	{id: fieldid.ExpGPUHealthStatus, name: "DCGM_EXP_GPU_HEALTH_STATUS"},
	{id: fieldid.ExpP2PStatus, name: "DCGM_EXP_P2P_STATUS", nvlink: true},
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
		add(fieldid.NVLinkCRCFlitErrorCountByLink[l], "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT"+ls, linkCRCFlit, l)
		add(fieldid.NVLinkCRCDataErrorCountByLink[l], "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT"+ls, linkCRCData, l)
		add(fieldid.NVLinkReplayErrorCountByLink[l], "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT"+ls, linkReplay, l)
		add(fieldid.NVLinkRecoveryErrorCountByLink[l], "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT"+ls, linkRecovery, l)
		add(fieldid.NVLinkBandwidthByLink[l], "DCGM_FI_DEV_NVLINK_BANDWIDTH"+ls, linkBandwidth, l)
		ps := "DCGM_FI_PROF_NVLINK_L" + strconv.Itoa(l)
		add(fieldid.ProfNVLinkTXBytesByLink[l], ps+"_TX_BYTES", linkProfTX, l)
		add(fieldid.ProfNVLinkRXBytesByLink[l], ps+"_RX_BYTES", linkProfRX, l)
	}
	return m
}

// FieldIDs returns every field ID the simulator can produce, sorted.
func FieldIDs() []uint16 {
	ids := make([]uint16, 0, len(fieldsByID))
	for id := range fieldsByID {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// engineDerived are exporter-side fields the engine computes from the base
// field a source reports (XID events, the clock-event bitmask); no source
// samples them.
func engineDerived(id uint16) bool {
	_, derived := fieldid.BaseOf(id)
	return derived
}

// linkFieldNote is why the sim produces no field that DCGM keeps per NVLink
// entity (the PPCNT port counters, the link state): it simulates no link
// entities, and invents no per-link values.
const linkFieldNote = "per-link NVLink fields (NVLink5 PPCNT counters, NvSwitch ports) live on DCGM's link entities; the sim does not simulate them"

// Support is the sim source's account of the fields it reads, for the
// catalog's users: exactly those it produces.
func Support() counters.Support {
	return counters.Support{Source: "sim", Reads: func(id uint16) (bool, string) {
		if _, ok := fieldsByID[id]; ok {
			return true, ""
		}
		if fieldid.Of(id).Level == fieldid.LevelLink {
			return false, linkFieldNote
		}
		return false, ""
	}}
}
