package sim

import (
	"sort"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
)

// maxLinks is the most NVLinks a GPU has (Hopper: 18), as many as DCGM
// has per-link fields for.
const maxLinks = len(fieldid.NVLinkBandwidthByLink)

// scope says which entities a field is sampled on.
type scope uint8

const (
	// The zero scope, that of the fields that leave it out: they describe
	// the whole board (clocks, power, ECC...).
	_ scope = iota
	// scopeGPUAndMIG fields are also sampled per MIG GPU instance: those
	// DCGM's field table reads at the GPU-instance or compute-instance level
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
	scope scope
	// nvlink fields are unsupported on GPUs without NVLink.
	nvlink bool
	kind   linkKind
	link   int
}

// gpuFields are the non-per-link fields the simulator produces.
var gpuFields = []fieldInfo{
	{id: fieldid.DriverVersion, scope: scopeText},
	{id: fieldid.NVMLVersion, scope: scopeText},
	{id: fieldid.Name, scope: scopeText},
	{id: fieldid.Brand, scope: scopeText},
	{id: fieldid.Serial, scope: scopeText},
	{id: fieldid.UUID, scope: scopeText},
	{id: fieldid.OEMInforomVer, scope: scopeText},
	{id: fieldid.PCIBusID, scope: scopeText},
	{id: fieldid.ECCInforomVer, scope: scopeText},
	{id: fieldid.PowerInforomVer, scope: scopeText},
	{id: fieldid.InforomImageVer, scope: scopeText},
	{id: fieldid.VBIOSVersion, scope: scopeText},
	{id: fieldid.CUDADriverVersion, scope: scopeText},
	{id: fieldid.CUDAComputeCapability, scope: scopeText},
	{id: fieldid.SMClock},
	{id: fieldid.VideoClock},
	{id: fieldid.Pstate},
	{id: fieldid.ComputeMode},
	{id: fieldid.PersistenceMode},
	{id: fieldid.MIGMode},
	{id: fieldid.GetGPURecoveryAction},
	{id: fieldid.FabricManagerStatus},
	{id: fieldid.FabricManagerError},
	{id: fieldid.FabricClusterUUID, scope: scopeText},
	{id: fieldid.FabricCliqueID},
	{id: fieldid.FabricHealthMask},
	{id: fieldid.FabricHealthSummary},
	{id: fieldid.PowerMgmtLimitDef},
	{id: fieldid.PowerMgmtLimitMin},
	{id: fieldid.PowerMgmtLimitMax},
	{id: fieldid.PCIeTXThroughput},
	{id: fieldid.PCIeRXThroughput},
	{id: fieldid.MemClock},
	{id: fieldid.ClocksEventReasons},
	{id: fieldid.MaxSMClock},
	{id: fieldid.MaxMemClock},
	{id: fieldid.FanSpeed},
	{id: fieldid.MemoryTemp},
	{id: fieldid.GPUTemp},
	{id: fieldid.PowerUsage},
	{id: fieldid.TotalEnergyConsumption},
	{id: fieldid.PowerUsageInstant},
	{id: fieldid.PowerMgmtLimit},
	{id: fieldid.EnforcedPowerLimit},
	{id: fieldid.PCIeReplayCounter},
	{id: fieldid.PCIeLinkGen},
	{id: fieldid.PCIeMaxLinkGen},
	{id: fieldid.PCIeLinkWidth},
	{id: fieldid.PCIeMaxLinkWidth},
	{id: fieldid.GPUUtil},
	{id: fieldid.MemCopyUtil},
	{id: fieldid.EncUtil},
	{id: fieldid.DecUtil},
	{id: fieldid.XIDErrors},
	{id: fieldid.PowerViolation},
	{id: fieldid.ThermalViolation},
	{id: fieldid.SyncBoostViolation},
	{id: fieldid.BoardLimitViolation},
	{id: fieldid.LowUtilViolation},
	{id: fieldid.ReliabilityViolation},
	{id: fieldid.FBTotal, scope: scopeGPUAndMIG},
	{id: fieldid.FBFree, scope: scopeGPUAndMIG},
	{id: fieldid.FBUsed, scope: scopeGPUAndMIG},
	{id: fieldid.FBReserved, scope: scopeGPUAndMIG},
	{id: fieldid.ECCSBEVolTotal},
	{id: fieldid.ECCDBEVolTotal},
	{id: fieldid.ECCSBEAggTotal},
	{id: fieldid.ECCDBEAggTotal},
	{id: fieldid.RetiredSBE},
	{id: fieldid.RetiredDBE},
	{id: fieldid.RetiredPending},
	{id: fieldid.UncorrectableRemappedRows},
	{id: fieldid.CorrectableRemappedRows},
	{id: fieldid.RowRemapFailure},
	{id: fieldid.RowRemapPending},
	{id: fieldid.NVLinkCRCFlitErrorCountTotal, nvlink: true},
	{id: fieldid.NVLinkCRCDataErrorCountTotal, nvlink: true},
	{id: fieldid.NVLinkReplayErrorCountTotal, nvlink: true},
	{id: fieldid.NVLinkRecoveryErrorCountTotal, nvlink: true},
	{id: fieldid.NVLinkBandwidthTotal, nvlink: true},
	{id: fieldid.VGPULicenseStatus},
	{id: fieldid.ProfGREngineActive, scope: scopeGPUAndMIG},
	{id: fieldid.ProfSMActive, scope: scopeGPUAndMIG},
	{id: fieldid.ProfSMOccupancy, scope: scopeGPUAndMIG},
	{id: fieldid.ProfPipeTensorActive, scope: scopeGPUAndMIG},
	{id: fieldid.ProfDRAMActive, scope: scopeGPUAndMIG},
	{id: fieldid.ProfPipeFP64Active, scope: scopeGPUAndMIG},
	{id: fieldid.ProfPipeFP32Active, scope: scopeGPUAndMIG},
	{id: fieldid.ProfPipeFP16Active, scope: scopeGPUAndMIG},
	// DCGM reads PCIe traffic per GPU, MIG or not (its field table puts
	// the PCIe fields at the GPU level): a MIG instance's series repeats
	// its GPU's, as every GPU-level field's does.
	{id: fieldid.ProfPCIeTXBytes},
	{id: fieldid.ProfPCIeRXBytes},
	{id: fieldid.ProfNVLinkTXBytes, nvlink: true},
	{id: fieldid.ProfNVLinkRXBytes, nvlink: true},
	{id: fieldid.ExpGPUHealthStatus},
	{id: fieldid.ExpP2PStatus},
}

// fieldsByID holds every field the simulator produces, per-link ones
// included. Built once; read-only afterwards.
var fieldsByID = buildFieldTable()

func buildFieldTable() map[uint16]*fieldInfo {
	m := make(map[uint16]*fieldInfo, len(gpuFields)+7*maxLinks)
	for i := range gpuFields {
		m[gpuFields[i].id] = &gpuFields[i]
	}
	add := func(id uint16, kind linkKind, link int) {
		m[id] = &fieldInfo{id: id, scope: scopeLink, nvlink: true, kind: kind, link: link}
	}
	for l := 0; l < maxLinks; l++ {
		add(fieldid.NVLinkCRCFlitErrorCountByLink[l], linkCRCFlit, l)
		add(fieldid.NVLinkCRCDataErrorCountByLink[l], linkCRCData, l)
		add(fieldid.NVLinkReplayErrorCountByLink[l], linkReplay, l)
		add(fieldid.NVLinkRecoveryErrorCountByLink[l], linkRecovery, l)
		add(fieldid.NVLinkBandwidthByLink[l], linkBandwidth, l)
		add(fieldid.ProfNVLinkTXBytesByLink[l], linkProfTX, l)
		add(fieldid.ProfNVLinkRXBytesByLink[l], linkProfRX, l)
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

// linkFieldNote is why the sim produces no field that DCGM keeps per NVLink
// entity (the PPCNT port counters, the link state): it simulates no link
// entities, and invents no per-link values.
const linkFieldNote = "per-link NVLink fields (NVLink5 PPCNT counters, NvSwitch ports) live on DCGM's link entities; the sim does not simulate them"

// Support is the sim source's account of the fields it reads, for the
// catalog's users: exactly those it produces.
func Support() counters.Support {
	return counters.Support{Source: Name, Reads: func(id uint16) (bool, string) {
		if _, ok := fieldsByID[id]; ok {
			return true, ""
		}
		if fieldid.Of(id).Level == fieldid.LevelLink {
			return false, linkFieldNote
		}
		return false, ""
	}}
}
