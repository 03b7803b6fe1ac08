package dcgm_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source/dcgm/dcgmfake"
)

// The fabric fields come through as the host engine gives them (DCGM
// v4.6.0, dcgmlib/src/DcgmCacheManager.cpp, ReadFabricManagerStatusField):
// a healthy fabric, a degraded one, and a GPU outside any fabric, whose
// NOT_SUPPORTED sentinels make every fabric field absent.
func TestFabricFieldsFromTheHostEngine(t *testing.T) {
	const gpu0, gpu1 = "gpu/GPU-00000000-0000-0000-0000-000000000000", "gpu/GPU-11111111-1111-1111-1111-111111111111"
	ids := []uint16{fieldid.FabricManagerStatus, fieldid.FabricManagerError, fieldid.FabricClusterUUID,
		fieldid.FabricCliqueID, fieldid.FabricHealthMask, fieldid.FabricHealthSummary}
	// Bandwidth degraded (1 in the two low bits), capacity limited (3).
	degraded := dcgmfake.HealthyFabric
	degraded.HealthMask = dcgmfake.HealthyFabricMask&^3 | 1
	degraded.HealthSummary = 3
	tests := []struct {
		name   string
		fabric dcgmfake.Fabric
		want   map[uint16]float64
		uuid   string
	}{
		{"healthy", dcgmfake.HealthyFabric, map[uint16]float64{
			fieldid.FabricManagerStatus: 3, fieldid.FabricManagerError: 0, fieldid.FabricCliqueID: 1,
			fieldid.FabricHealthMask: 426, fieldid.FabricHealthSummary: 1,
		}, "5e1f0a42-9c3d-4e8b-a107-2f6cd01388e4"},
		{"degraded bandwidth", degraded, map[uint16]float64{
			fieldid.FabricManagerStatus: 3, fieldid.FabricManagerError: 0, fieldid.FabricCliqueID: 1,
			fieldid.FabricHealthMask: 425, fieldid.FabricHealthSummary: 3,
		}, "5e1f0a42-9c3d-4e8b-a107-2f6cd01388e4"},
		{"training in progress: no error code yet", dcgmfake.Fabric{Status: 2, ClusterUUID: "5e1f0a42-9c3d-4e8b-a107-2f6cd01388e4",
			CliqueID: 1, HealthMask: dcgmfake.HealthyFabricMask, HealthSummary: 1}, map[uint16]float64{
			fieldid.FabricManagerStatus: 2, fieldid.FabricCliqueID: 1,
			fieldid.FabricHealthMask: 426, fieldid.FabricHealthSummary: 1,
		}, "5e1f0a42-9c3d-4e8b-a107-2f6cd01388e4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, clk := newFake()
			f.SetFabric(0, tt.fabric)
			f.SetFabric(1, dcgmfake.NoFabric)
			s := newSource(t, f, group(10*time.Millisecond, ids...))
			rec := &dcgmfake.Recorder{}
			collectUntil(t, clk, s, 0, rec, func() bool { return len(rec.Values(fieldid.FabricManagerStatus)) >= 2 })
			got := map[uint16]float64{}
			for _, v := range rec.All() {
				assert.NotEqual(t, gpu1, v.Key, "GPU 1 has no fabric, got field %d = %v", v.Field, v.V)
				if v.Key == gpu0 {
					got[v.Field] = v.V
				}
			}
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.uuid, rec.TextOf(gpu0, fieldid.FabricClusterUUID))
			assert.Empty(t, rec.TextOf(gpu1, fieldid.FabricClusterUUID))
			for _, id := range ids {
				assert.Contains(t, rec.UnsupportedReasons(), gpu1+"/"+idStr(id), "field %d of the PCIe GPU reported unsupported", id)
			}
		})
	}
}
