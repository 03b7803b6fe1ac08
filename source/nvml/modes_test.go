package nvml

import (
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source/nvml/nvmlfake"
)

// The states nvidia-smi reports are read in DCGM's encoding, and a state the
// GPU does not have is absent, never a made-up value.
func TestStatesInDCGMsEncoding(t *testing.T) {
	tests := []struct {
		name    string
		id      uint16
		script  func(r *nvmlfake.Readings)
		want    float64
		missing bool
	}{
		{"P-state 8", fieldid.Pstate, func(r *nvmlfake.Readings) { r.Pstate = gonvml.PSTATE_8 }, 8, false},
		{"unknown P-state is absent", fieldid.Pstate, func(r *nvmlfake.Readings) { r.Pstate = gonvml.PSTATE_UNKNOWN }, 0, true},
		// DCGM numbers compute modes without NVML's removed exclusive-thread
		// mode (DCGM, dcgmlib/src/DcgmCacheManager.cpp, case
		// DCGM_FI_DEV_GPU_COMPUTE_MODE): prohibited is 1, exclusive-process 2.
		{"default compute mode", fieldid.ComputeMode, func(r *nvmlfake.Readings) { r.ComputeMode = gonvml.COMPUTEMODE_DEFAULT }, 0, false},
		{"prohibited compute mode", fieldid.ComputeMode, func(r *nvmlfake.Readings) { r.ComputeMode = gonvml.COMPUTEMODE_PROHIBITED }, 1, false},
		{"exclusive-process compute mode", fieldid.ComputeMode, func(r *nvmlfake.Readings) { r.ComputeMode = gonvml.COMPUTEMODE_EXCLUSIVE_PROCESS }, 2, false},
		// The PCIe link as nvidia-smi's pcie.link.* shows it: a Gen5 x16
		// GPU that trained at Gen4 x8 (DcgmCacheManager.cpp,
		// DCGM_FI_DEV_PCIE_LINK_GEN and the three beside it).
		{"PCIe link generation", fieldid.PCIeLinkGen, func(r *nvmlfake.Readings) { r.PCIeGen = [2]int{4, 5} }, 4, false},
		{"PCIe max link generation", fieldid.PCIeMaxLinkGen, func(r *nvmlfake.Readings) { r.PCIeGen = [2]int{4, 5} }, 5, false},
		{"PCIe link width", fieldid.PCIeLinkWidth, func(r *nvmlfake.Readings) { r.PCIeWidth = [2]int{8, 16} }, 8, false},
		{"PCIe max link width", fieldid.PCIeMaxLinkWidth, func(r *nvmlfake.Readings) { r.PCIeWidth = [2]int{8, 16} }, 16, false},
		{"persistence off", fieldid.PersistenceMode, func(r *nvmlfake.Readings) { r.Persistence = gonvml.FEATURE_DISABLED }, 0, false},
		{"recovery action: reboot", fieldid.GetGPURecoveryAction, func(r *nvmlfake.Readings) {
			r.FieldValues[gonvml.FI_DEV_GET_GPU_RECOVERY_ACTION] = 2
		}, 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := nvmlfake.New(nvmlfake.DGXH100)
			f.Update(0, func(g *nvmlfake.GPU) { tt.script(&g.R) })
			s := open(t, f, time.Second, tt.id)
			sink := newSink()
			collectTwice(t, s, sink)
			gpu0 := gpuEntity(t, s, 0)
			v, ok := sink.value(gpu0, tt.id)
			if tt.missing {
				assert.False(t, ok)
				assert.Len(t, sink.unsupported[sample{gpu0.Key(), tt.id}], 1, "reported unsupported once")
				return
			}
			assert.True(t, ok)
			assert.Equal(t, tt.want, v)
		})
	}
}
