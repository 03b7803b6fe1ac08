package nvml

import (
	"context"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source/nvml/nvmlfake"
)

// nvml.h lists NVML_ERROR_UNKNOWN ("on any unexpected error") among the
// answers of nearly every query, including ones a GPU in good health fails
// now and then; only GPU_IS_LOST, RESET_REQUIRED and GPU_NOT_FOUND say the
// handle is gone. So one field answering UNKNOWN costs that field, and a
// GPU is taken out only when everything it serves keeps failing.
func TestUnknownErrorDegradesTheFieldNotTheGPU(t *testing.T) {
	cases := []struct {
		name     string
		errs     map[string]gonvml.Return
		rounds   int
		wantLost bool
		// kept is a field that must still have its value on the GPU.
		kept uint16
	}{
		{name: "one field answers UNKNOWN", errs: map[string]gonvml.Return{"GetPowerUsage": gonvml.ERROR_UNKNOWN},
			rounds: 5, kept: fieldid.GPUTemp},
		{name: "every field answers UNKNOWN, fewer times than it takes", errs: map[string]gonvml.Return{
			"GetPowerUsage": gonvml.ERROR_UNKNOWN, "GetTemperature": gonvml.ERROR_UNKNOWN, "GpmSampleGet": gonvml.ERROR_UNKNOWN,
		}, rounds: allFailuresLost - 1},
		{name: "every field keeps answering UNKNOWN", errs: map[string]gonvml.Return{
			"GetPowerUsage": gonvml.ERROR_UNKNOWN, "GetTemperature": gonvml.ERROR_UNKNOWN, "GpmSampleGet": gonvml.ERROR_UNKNOWN,
		}, rounds: allFailuresLost, wantLost: true},
		{name: "one field answers GPU_IS_LOST", errs: map[string]gonvml.Return{"GetPowerUsage": gonvml.ERROR_GPU_IS_LOST},
			rounds: 1, wantLost: true},
		{name: "one field answers RESET_REQUIRED", errs: map[string]gonvml.Return{"GetPowerUsage": gonvml.ERROR_RESET_REQUIRED},
			rounds: 1, wantLost: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := nvmlfake.New(nvmlfake.DGXH100)
			f.Update(2, func(g *nvmlfake.GPU) {
				for k, v := range tc.errs {
					g.Errs[k] = v
				}
			})
			s := open(t, f, time.Second, fieldid.GPUTemp, fieldid.PowerUsage, fieldid.ProfSMActive)
			sink := newSink()
			for range tc.rounds {
				require.NoError(t, s.Collect(context.Background(), 0, sink))
			}
			gpu2 := gpuEntity(t, s, 2)
			if tc.wantLost {
				assert.Equal(t, []string{gpu2.Key()}, s.Status().Lost)
				return
			}
			assert.Empty(t, s.Status().Lost, "the GPU stays in")
			assert.Len(t, sink.fails[sample{gpu2.Key(), fieldid.PowerUsage}], tc.rounds, "the failing field is counted at each read")
			if tc.kept != 0 {
				_, ok := sink.value(gpu2, tc.kept)
				assert.True(t, ok, "the other fields keep their values")
				_, ok = sink.value(gpu2, fieldid.ProfSMActive)
				assert.True(t, ok, "GPM keeps its samples")
				assert.Equal(t, 2*len(f.GPUs), f.LiveSamples(), "no GPM sample freed")
			}
		})
	}
}
