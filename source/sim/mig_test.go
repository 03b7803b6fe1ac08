package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
)

// TestMIGInstancesGetTheFieldsDCGMServesThem pins which fields the sim
// samples on a MIG GPU instance to DCGM's field table
// (dcgmlib/src/dcgm_fields.cpp, as counters/fieldid/internal/gen/
// dcgm-field-meta.tsv records it): exactly the fields read at the GPU
// instance or compute instance level (framebuffer, SM, tensor, DRAM and
// pipe activity). GPU-level fields (power, temperature, PCIe and NVLink
// traffic) are read on the GPU; the DCGM source asks them of the instances
// too and DCGM answers with the GPU's value, which the engine repeats on
// each instance (internal/engine/mig_test.go). Label-type text fields go to
// every entity, so that they label the instances' series.
func TestMIGInstancesGetTheFieldsDCGMServesThem(t *testing.T) {
	for _, id := range FieldIDs() {
		info := fieldsByID[id]
		if info.scope == scopeText || info.scope == scopeLink || id == fieldid.XIDErrors {
			// XIDs come from the GPU's event queue, per GPU, in every
			// exporter, whatever DCGM's table says of the field.
			continue
		}
		level := fieldid.Of(id).Level
		perInstance := level == fieldid.LevelGPUInstance || level == fieldid.LevelComputeInstance
		assert.Equal(t, perInstance, info.scope == scopeGPUAndMIG, "%s: DCGM reads it at the %s level", nameOf(id), level)
	}
}

// TestAMIGGPUHasNoDeviceUtilization: NVML serves no device utilization on
// a MIG-enabled GPU (nvml.h of go-nvml v0.13.4-1: "On MIG-enabled GPUs,
// querying device utilization rates is not currently supported", and the
// same of the encoder and decoder utilization), and DCGM, which reads it
// through NVML, answers NOT_SUPPORTED; nvidia-smi prints [N/A], which
// nvidia_gpu_exporter skips (internal/exporter/exporter.go, renderCell). The sim says so for the MIG GPUs and serves it
// on the GPUs beside them without MIG, so that a rule which only reads
// DCGM_FI_DEV_GPU_UTIL is as blind to MIG instances on the sim as on a real
// node.
func TestAMIGGPUHasNoDeviceUtilization(t *testing.T) {
	cfg := DefaultConfig()
	cfg.GPUs, cfg.MIG, cfg.MIGGPUs = 2, "3g.40gb,2x2g.20gb", []int{1}
	ids := []uint16{fieldid.GPUUtil, fieldid.MemCopyUtil, fieldid.EncUtil, fieldid.DecUtil, fieldid.MIGMode,
		fieldid.ProfGREngineActive, fieldid.FBUsed, fieldid.PowerUsage, fieldid.ProfPCIeTXBytes}
	s, c := newSim(t, cfg, ids...)
	rec := newRec()
	run(t, s, c, rec, time.Second, 3*time.Second)
	ents := s.Entities()
	require.Len(t, ents, 2+3, "GPU 0 alone, GPU 1 and its three instances")
	gpu0, gpu1 := ents[0], ents[1]
	for _, id := range []uint16{fieldid.GPUUtil, fieldid.MemCopyUtil, fieldid.EncUtil, fieldid.DecUtil} {
		assert.Contains(t, rec.reasons[key{gpu1.Key(), id}], "NVML does not serve it", "%s on the MIG GPU", nameOf(id))
		assert.NotEmpty(t, rec.values[key{gpu0.Key(), id}], "%s on the GPU without MIG", nameOf(id))
	}
	assert.Equal(t, 1.0, rec.last(t, gpu1, fieldid.MIGMode))
	assert.Equal(t, 0.0, rec.last(t, gpu0, fieldid.MIGMode))
	for _, e := range ents[2:] {
		require.Equal(t, source.GPUInstance, e.Kind)
		for _, id := range []uint16{fieldid.ProfGREngineActive, fieldid.FBUsed} {
			assert.NotEmpty(t, rec.values[key{e.Key(), id}], "%s on instance %d", nameOf(id), e.GPUInstanceID)
		}
		for _, id := range []uint16{fieldid.GPUUtil, fieldid.PowerUsage, fieldid.ProfPCIeTXBytes} {
			assert.Empty(t, rec.values[key{e.Key(), id}], "%s is the GPU's, not the instance's", nameOf(id))
		}
	}
}

func TestMIGGPUsMustBeOnTheNode(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{MIGGPUs: []int{0}}, "without a MIG layout"},
		{Config{MIG: "all", MIGGPUs: []int{8}}, "index 8 out of range 0..7"},
		{Config{MIG: "all", MIGGPUs: []int{1, 1}}, "index 1 repeated"},
	}
	for _, tc := range tests {
		_, err := New(tc.cfg)
		assert.ErrorContains(t, err, tc.want)
	}
}
