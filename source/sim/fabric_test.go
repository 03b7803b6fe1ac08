package sim

import (
	"context"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
)

var fabricIDs = []uint16{fieldid.FabricManagerStatus, fieldid.FabricManagerError, fieldid.FabricClusterUUID,
	fieldid.FabricCliqueID, fieldid.FabricHealthMask, fieldid.FabricHealthSummary}

// The HGX models (H100, H200 on NVSwitch baseboards) serve a healthy fabric
// in DCGM's values (DCGM v4.6.0, dcgmlib/src/DcgmCacheManager.cpp,
// ReadFabricManagerStatusField; the mask bits from nvml.h's
// NVML_GPU_FABRIC_HEALTH_MASK_*), and every GPU of the node reports the same
// cluster. PCIe models report no fabric field at all.
func TestFabricFieldsByModel(t *testing.T) {
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	for _, model := range []string{"h100", "h200", "a100", "l40s", "rtx6000ada"} {
		t.Run(model, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Model, cfg.GPUs, cfg.EventRate = model, 2, 0
			s, _ := newSim(t, cfg, fabricIDs...)
			rec := newRec()
			require.NoError(t, s.Collect(context.Background(), 0, rec))
			hgx := model == "h100" || model == "h200"
			for _, g := range s.gpus {
				for _, id := range fabricIDs {
					_, served := rec.values[key{g.ent.Key(), id}]
					if id == fieldid.FabricClusterUUID {
						_, served = rec.texts[key{g.ent.Key(), id}]
					}
					assert.Equal(t, hgx, served, "GPU %d field %s served", g.idx, nameOf(id))
					assert.Equal(t, !hgx, rec.unsup[key{g.ent.Key(), id}] > 0, "GPU %d field %s unsupported", g.idx, nameOf(id))
				}
				if !hgx {
					continue
				}
				assert.Equal(t, 3.0, rec.last(t, g.ent, fieldid.FabricManagerStatus), "DcgmFMStatusSuccess")
				assert.Equal(t, 0.0, rec.last(t, g.ent, fieldid.FabricManagerError), "DCGM_ST_OK")
				assert.Equal(t, 426.0, rec.last(t, g.ent, fieldid.FabricHealthMask), "every condition false, configuration correct")
				assert.Equal(t, 1.0, rec.last(t, g.ent, fieldid.FabricHealthSummary), "healthy")
				assert.Regexp(t, uuid, rec.texts[key{g.ent.Key(), fieldid.FabricClusterUUID}])
			}
			if hgx {
				assert.Equal(t, rec.texts[key{s.gpus[0].ent.Key(), fieldid.FabricClusterUUID}],
					rec.texts[key{s.gpus[1].ent.Key(), fieldid.FabricClusterUUID}], "one NVLink domain")
			}
		})
	}
}

// The degraded GPU's values are the ones deploy/prometheus/gpuscope-alerts.yml
// reads for GPUFabricDegraded, and none of those GPUFabricUnhealthy reads.
func TestFabricDegradedMaskMatchesTheRules(t *testing.T) {
	m := int64(fabricDegradedMask)
	get := func(shift, width int64) int64 { return m >> shift % width }
	assert.Equal(t, int64(1), get(0, 4), "floor(mask) %% 4 == 1: fabric bandwidth degraded")
	assert.NotEqual(t, int64(1), get(4, 4), "floor(mask / 16) %% 4 == 1 would be a route unhealthy")
	assert.Less(t, get(8, 16), int64(2), "floor(mask / 256) %% 16 >= 2 would be an incorrect configuration")
	assert.NotEqual(t, int64(2), get(14, 4), "global fabric manager not disconnected")
	h := int64(fabricHealthyMask)
	for _, shift := range []int64{0, 2, 4, 6} {
		assert.Equal(t, int64(2), h>>shift%4, "healthy: condition at bit %d false", shift)
	}
	assert.Equal(t, int64(1), h>>8%16, "healthy: configuration correct")
}
