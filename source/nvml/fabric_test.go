package nvml

import (
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source/nvml/nvmlfake"
)

var fabricFields = []uint16{fieldid.FabricManagerStatus, fieldid.FabricManagerError, fieldid.FabricClusterUUID,
	fieldid.FabricCliqueID, fieldid.FabricHealthMask, fieldid.FabricHealthSummary}

// The fabric fields read from nvmlDeviceGetGpuFabricInfoV as DCGM's host
// engine maps them (DCGM commit 72fa3fe, dcgmlib/src/DcgmCacheManager.cpp,
// ReadFabricManagerStatusField and GetFMStatusFromStruct; the status
// codes from dcgmlib/dcgm_structs.h, dcgmFabricManagerStatus_t, the error
// codes from common/DcgmUtilities.h, NvmlReturnToDcgmReturn). A field
// missing from want is absent, reported unsupported.
func TestFabricFieldsAsDCGMMapsThem(t *testing.T) {
	healthy := float64(nvmlfake.HealthyFabricMask)
	// Bandwidth degraded: the two low bits say TRUE (1) instead of FALSE.
	degraded := uint32(nvmlfake.HealthyFabricMask&^3 | gonvml.GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE)
	tests := []struct {
		name   string
		script func(g *nvmlfake.GPU)
		want   map[uint16]float64
		uuid   string
	}{
		{"healthy HGX fabric", func(*nvmlfake.GPU) {}, map[uint16]float64{
			fieldid.FabricManagerStatus: 3, fieldid.FabricManagerError: 0, fieldid.FabricCliqueID: 1,
			fieldid.FabricHealthMask: healthy, fieldid.FabricHealthSummary: 1,
		}, "5e1f0a42-9c3d-4e8b-a107-2f6cd01388e4"},
		{"degraded bandwidth, limited capacity", func(g *nvmlfake.GPU) {
			g.R.Fabric.HealthMask = degraded
			g.R.Fabric.HealthSummary = gonvml.GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY
		}, map[uint16]float64{
			fieldid.FabricManagerStatus: 3, fieldid.FabricManagerError: 0, fieldid.FabricCliqueID: 1,
			fieldid.FabricHealthMask: float64(degraded), fieldid.FabricHealthSummary: 3,
		}, "5e1f0a42-9c3d-4e8b-a107-2f6cd01388e4"},
		// No error code before training completed (DCGM leaves it blank).
		{"training in progress", func(g *nvmlfake.GPU) {
			g.R.Fabric.State = gonvml.GPU_FABRIC_STATE_IN_PROGRESS
		}, map[uint16]float64{
			fieldid.FabricManagerStatus: 2, fieldid.FabricCliqueID: 1,
			fieldid.FabricHealthMask: healthy, fieldid.FabricHealthSummary: 1,
		}, "5e1f0a42-9c3d-4e8b-a107-2f6cd01388e4"},
		// Completed with NVML_ERROR_TIMEOUT: DCGM's failure, DCGM_ST_TIMEOUT.
		{"training failed", func(g *nvmlfake.GPU) {
			g.R.Fabric.Status = uint32(gonvml.ERROR_TIMEOUT)
		}, map[uint16]float64{
			fieldid.FabricManagerStatus: 4, fieldid.FabricManagerError: -11, fieldid.FabricCliqueID: 1,
			fieldid.FabricHealthMask: healthy, fieldid.FabricHealthSummary: 1,
		}, "5e1f0a42-9c3d-4e8b-a107-2f6cd01388e4"},
		// A driver that refuses the v3 struct is asked for v2, which has
		// no health summary.
		{"driver with the v2 struct only", func(g *nvmlfake.GPU) {
			g.R.FabricVersion = 2
		}, map[uint16]float64{
			fieldid.FabricManagerStatus: 3, fieldid.FabricManagerError: 0, fieldid.FabricCliqueID: 1,
			fieldid.FabricHealthMask: healthy,
		}, "5e1f0a42-9c3d-4e8b-a107-2f6cd01388e4"},
		// A driver without nvmlDeviceGetGpuFabricInfoV: DCGM's "NVML too
		// old" status, nothing else.
		{"driver without the call", func(g *nvmlfake.GPU) {
			g.Errs = map[string]gonvml.Return{"GetGpuFabricInfoV": gonvml.ERROR_FUNCTION_NOT_FOUND}
		}, map[uint16]float64{fieldid.FabricManagerStatus: 6}, ""},
		{"PCIe GPU: the call is not supported", func(g *nvmlfake.GPU) {
			g.Errs = map[string]gonvml.Return{"GetGpuFabricInfoV": gonvml.ERROR_NOT_SUPPORTED}
		}, map[uint16]float64{}, ""},
		{"PCIe GPU: the state is not supported", func(g *nvmlfake.GPU) {
			g.R.Fabric = gonvml.GpuFabricInfoV{State: gonvml.GPU_FABRIC_STATE_NOT_SUPPORTED}
		}, map[uint16]float64{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := nvmlfake.New(nvmlfake.DGXH100)
			f.Update(0, tt.script)
			s := open(t, f, time.Second, fabricFields...)
			sink := newSink()
			collectTwice(t, s, sink)
			gpu0 := gpuEntity(t, s, 0)
			for _, id := range fabricFields {
				if id == fieldid.FabricClusterUUID {
					continue
				}
				v, ok := sink.value(gpu0, id)
				want, present := tt.want[id]
				assert.Equal(t, present, ok, "field %d present", id)
				if present {
					assert.Equal(t, want, v, "field %d", id)
				} else {
					assert.NotEmpty(t, sink.unsupported[sample{gpu0.Key(), id}], "field %d reported unsupported", id)
				}
			}
			assert.Equal(t, tt.uuid, sink.texts[sample{gpu0.Key(), fieldid.FabricClusterUUID}])
			assert.Empty(t, sink.fails, "no field failed")
		})
	}
}

// A driver that refused the v3 struct once is not asked for it again, and
// the other GPUs are read with v2.
func TestFabricV2StructRemembered(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	f.Update(0, func(g *nvmlfake.GPU) { g.R.FabricVersion = 2 })
	s := open(t, f, time.Second, fabricFields...)
	sink := newSink()
	collectTwice(t, s, sink)
	assert.True(t, s.fabricV2.Load(), "v3 refused, v2 remembered")
	v, ok := sink.value(gpuEntity(t, s, 1), fieldid.FabricHealthMask)
	assert.True(t, ok)
	assert.Equal(t, float64(nvmlfake.HealthyFabricMask), v)
}
