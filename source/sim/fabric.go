package sim

import "github.com/gpuscope/gpuscope/counters/fieldid"

// The NVLink fabric of an HGX node (H100, H200), as DCGM reports it from
// nvmlDeviceGetGpuFabricInfoV (DCGM v4.6.0, dcgmlib/src/DcgmCacheManager.cpp,
// ReadFabricManagerStatusField): training finished, one clique, a healthy
// mask; the fabric-degraded scenario takes one GPU's bandwidth away.
const (
	// fabricStatusSuccess is DCGM's DcgmFMStatusSuccess.
	fabricStatusSuccess = 3
	// fabricHealthyMask holds NVML's NVML_GPU_FABRIC_HEALTH_MASK_*
	// conditions of a working baseboard, two bits each: bandwidth not
	// degraded (2 at bit 0), no route recovery (2 at 2), no unhealthy
	// route (2 at 4), no access-timeout recovery (2 at 6), a correct
	// configuration (1 at 8); partitions and a global fabric manager,
	// which only NVL72 racks have, not supported (0 at 12 and 14).
	fabricHealthyMask = 2 | 2<<2 | 2<<4 | 2<<6 | 1<<8
	// fabricDegradedMask is the same with the bandwidth degraded (1 at 0).
	fabricDegradedMask = fabricHealthyMask&^3 | 1
	// NVML_GPU_FABRIC_HEALTH_SUMMARY_HEALTHY and _LIMITED_CAPACITY.
	fabricSummaryHealthy = 1
	fabricSummaryLimited = 3
)

func isFabricField(id uint16) bool {
	return id >= fieldid.FabricManagerStatus && id <= fieldid.FabricHealthSummary
}

// fabricValue is a numeric fabric field of a GPU of a fabric model.
func fabricValue(g *gpuSim, id uint16) float64 {
	switch id {
	case fieldid.FabricManagerStatus:
		return fabricStatusSuccess
	case fieldid.FabricCliqueID:
		return 1
	case fieldid.FabricHealthMask:
		if g.fabricDegraded {
			return fabricDegradedMask
		}
		return fabricHealthyMask
	case fieldid.FabricHealthSummary:
		if g.fabricDegraded {
			return fabricSummaryLimited
		}
		return fabricSummaryHealthy
	}
	// DCGM_FI_DEV_FABRIC_MANAGER_ERROR: DCGM_ST_OK, training succeeded.
	return 0
}
