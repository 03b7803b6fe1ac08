package nvml

import (
	"context"
	"strings"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/nvml/nvmlfake"
)

func kindOf(s *Source, k source.EntityKind) []*source.Entity {
	var out []*source.Entity
	for _, e := range s.Entities() {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// Both images run as a non-root user. nvml.h (go-nvml v0.13.4-1) says
// nvmlDeviceGetGpuInstanceById "Requires privileged user", and that in MIG
// mode the whole GPU's memory and processes are given "only if the caller
// has appropriate privileges"; utilisation is not supported in MIG mode at
// all. A MIG GPU read by a non-root user keeps its other series and its
// instances (profile names from nvmlDeviceGetAttributes_v2 on the MIG
// device handles), and says why the rest is missing; discovery of the
// other GPUs never stops on one GPU's MIG layout.
func TestMIGGPUReadWithoutPrivileges(t *testing.T) {
	cases := []struct {
		name    string
		nonRoot bool
		errs    map[string]gonvml.Return
		// wantGIs are the profiles of GPU 0's instances the source lists.
		wantGIs []string
		// parentFB says whether GPU 0's own framebuffer fields have values.
		parentFB bool
	}{
		{name: "root", wantGIs: []string{"1g.10gb", "3g.40gb"}, parentFB: true},
		{name: "non-root", nonRoot: true, wantGIs: []string{"1g.10gb", "3g.40gb"}},
		{name: "MIG devices cannot be listed", errs: map[string]gonvml.Return{"GetMigDeviceHandleByIndex": gonvml.ERROR_UNKNOWN},
			parentFB: true},
		{name: "MIG mode cannot be read", errs: map[string]gonvml.Return{"GetMaxMigDeviceCount": gonvml.ERROR_NO_PERMISSION},
			parentFB: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := nvmlfake.New(nvmlfake.DGXH100)
			f.EnableMIG(0, gonvml.GPU_INSTANCE_PROFILE_1_SLICE, gonvml.GPU_INSTANCE_PROFILE_3_SLICE)
			f.SetNonRoot(tc.nonRoot)
			f.Update(0, func(g *nvmlfake.GPU) {
				for k, v := range tc.errs {
					g.Errs[k] = v
				}
			})
			s := open(t, f, time.Second, fieldid.FBUsed, fieldid.FBTotal, fieldid.GPUTemp, fieldid.GPUUtil, fieldid.ProfSMActive)
			require.Len(t, kindOf(s, source.GPU), len(f.GPUs), "every GPU is discovered")
			var profiles []string
			for _, e := range kindOf(s, source.GPUInstance) {
				profiles = append(profiles, e.GPUInstanceProfile)
			}
			assert.Equal(t, tc.wantGIs, profiles)

			sink := newSink()
			collectTwice(t, s, sink)
			assert.Empty(t, s.Status().Lost)
			for _, e := range kindOf(s, source.GPUInstance) {
				_, ok := sink.value(e, fieldid.FBUsed)
				assert.True(t, ok, "instance %s reads its memory through its own handle", e.Key())
				_, ok = sink.value(e, fieldid.ProfSMActive)
				assert.True(t, ok, "instance %s has GPM", e.Key())
			}
			gpu0, gpu1 := gpuEntity(t, s, 0), gpuEntity(t, s, 1)
			_, ok := sink.value(gpu0, fieldid.GPUTemp)
			assert.True(t, ok, "the MIG GPU's other fields are read")
			_, ok = sink.value(gpu0, fieldid.FBUsed)
			assert.Equal(t, tc.parentFB, ok)
			assert.Empty(t, sink.fails[sample{gpu0.Key(), fieldid.FBUsed}], "a field without permission is no read error")
			if !tc.parentFB {
				reasons := sink.unsupported[sample{gpu0.Key(), fieldid.FBUsed}]
				require.Len(t, reasons, 1, "reported once")
				assert.True(t, strings.Contains(reasons[0], "root"), "the reason says what to do: %q", reasons[0])
			}
			assert.Len(t, sink.unsupported[sample{gpu0.Key(), fieldid.GPUUtil}], 1, "no utilisation in MIG mode")
			for _, id := range []uint16{fieldid.FBUsed, fieldid.GPUUtil, fieldid.GPUTemp} {
				_, ok = sink.value(gpu1, id)
				assert.True(t, ok, "the GPU without MIG keeps field %d", id)
			}
		})
	}
}

// Processes through the whole GPU need privileges in MIG mode; each MIG
// device handle lists its own (nvml.h, nvmlDeviceGetComputeRunningProcesses:
// "Per-instance information can be queried by using specific MIG device
// handles").
func TestMIGProcessesWithoutPrivileges(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	ins := f.EnableMIG(0, gonvml.GPU_INSTANCE_PROFILE_1_SLICE, gonvml.GPU_INSTANCE_PROFILE_3_SLICE)
	f.SetNonRoot(true)
	f.Update(0, func(g *nvmlfake.GPU) {
		ins[1].Processes = []gonvml.ProcessInfo{{Pid: 300, UsedGpuMemory: 1 << 30, GpuInstanceId: ins[1].GI.Info.Id}}
	})
	f.SetProcessName(300, "trainer")
	s := open(t, f, time.Second, fieldid.GPUTemp)
	require.NoError(t, s.Collect(context.Background(), 0, newSink()))
	assert.Equal(t, []source.Process{{PID: 300, UUID: f.GPUs[0].UUID, GPUInstanceID: int(ins[1].GI.Info.Id),
		UsedMemoryBytes: 1 << 30, SMUtil: -1, Name: "trainer"}}, s.Processes())
}
