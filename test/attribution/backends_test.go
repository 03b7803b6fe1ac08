package attribution

import (
	"context"
	"strconv"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/clock"
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/dcgm/dcgmfake"
	"github.com/gpuscope/gpuscope/source/dcgm/godcgm"
	"github.com/gpuscope/gpuscope/source/nvml"
	"github.com/gpuscope/gpuscope/source/nvml/nvmlfake"
	"github.com/gpuscope/gpuscope/source/sim"
)

// backend opens one kind of source over a scenario.
type backend struct {
	name string
	open func(t *testing.T, sc scenario, simCfg sim.Config) backendSource
}

var backends = []backend{
	{"dcgm", openDCGM},
	{"nvml", openNVML},
	{"sim", openSim},
}

// sharedAndMIGNodes are the two nodes every backend is compared on: a
// time-sliced GPU two pods share beside a GPU one pod holds, and a MIG GPU
// whose two instances two pods hold.
func sharedAndMIGNodes() []struct {
	name string
	cfg  sim.Config
} {
	shared := sim.DefaultConfig()
	shared.GPUs, shared.SharedGPUs, shared.Seed = 2, 1, 7
	mig := sim.DefaultConfig()
	mig.GPUs, mig.MIG, mig.Seed = 1, "2x3g.40gb", 7
	return []struct {
		name string
		cfg  sim.Config
	}{
		{"a time-sliced GPU two pods share, and a GPU one pod holds", shared},
		{"a MIG GPU whose two instances two pods hold", mig},
	}
}

// TestSharedGPUsAttributeAlikeOnEveryBackend: the same node gives every
// pod the same memory and SM share on DCGM, NVML and the sim, and that
// share is what the pod's processes hold and use.
func TestSharedGPUsAttributeAlikeOnEveryBackend(t *testing.T) {
	for _, tc := range sharedAndMIGNodes() {
		t.Run(tc.name, func(t *testing.T) {
			sc := fromSim(t, tc.name, tc.cfg)
			want := sc.want()
			require.NotEmpty(t, want)
			n := newNode(t, sc)
			for _, b := range backends {
				t.Run(b.name, func(t *testing.T) {
					got := attribute(t, sc, n, b.open(t, sc, tc.cfg))
					assert.Equal(t, want, got, "per-pod memory and SM share on %s", b.name)
				})
			}
		})
	}
}

// openSim is the sim that made the scenario, at the scenario's time.
func openSim(t *testing.T, _ scenario, cfg sim.Config) backendSource {
	s := newSim(t, cfg)
	return backendSource{src: s, processes: s.Processes}
}

// scriptNVML gives a fake NVML the scenario's MIG layout and processes:
// the i-th MIG instance of a GPU is the fake's i-th, and each process's
// utilisation is one sample newer than anything read before.
func scriptNVML(t *testing.T, sc scenario) *nvmlfake.Fake {
	t.Helper()
	f := nvmlfake.New(nvmlfake.DGXA100)
	require.LessOrEqual(t, sc.gpus, len(f.GPUs))
	ids := map[int][]uint32{}
	for g := 0; g < sc.gpus && sc.mig > 0; g++ {
		profiles := make([]int, sc.mig)
		for i := range profiles {
			profiles[i] = gonvml.GPU_INSTANCE_PROFILE_3_SLICE
		}
		for _, in := range f.EnableMIG(g, profiles...) {
			ids[g] = append(ids[g], in.GI.Info.Id)
		}
	}
	for g := 0; g < sc.gpus; g++ {
		var infos []gonvml.ProcessInfo
		var util []gonvml.ProcessUtilizationSample
		for _, p := range sc.procs {
			if p.gpu != g {
				continue
			}
			gi := uint32(0xFFFFFFFF)
			if p.inst >= 0 {
				gi = ids[g][p.inst]
			}
			infos = append(infos, gonvml.ProcessInfo{Pid: p.pid, UsedGpuMemory: p.mem, GpuInstanceId: gi})
			f.SetProcessName(p.pid, p.name)
			if p.sm >= 0 {
				util = append(util, gonvml.ProcessUtilizationSample{Pid: p.pid, TimeStamp: 1000, SmUtil: uint32(p.sm)})
			}
		}
		f.Update(g, func(gpu *nvmlfake.GPU) { gpu.R.Processes, gpu.R.ProcUtil = infos, util })
	}
	return f
}

// openNVML is the NVML source over go-nvml's mocks scripted with the
// scenario.
func openNVML(t *testing.T, sc scenario, _ sim.Config) backendSource {
	t.Helper()
	f := scriptNVML(t, sc)
	s, err := nvml.New(nvml.Config{Lib: f, Logger: quietLogger(), ProcessInterval: time.Millisecond, EventWait: 20 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Watch(watched()))
	firstProcesses(t, "nvml", s.Processes, len(sc.procs), func() {
		require.NoError(t, s.Collect(context.Background(), 0, discard{}))
	})
	resample := func() {
		for g := 0; g < sc.gpus; g++ {
			f.Update(g, func(gpu *nvmlfake.GPU) {
				for i := range gpu.R.ProcUtil {
					gpu.R.ProcUtil[i].TimeStamp += 1000
				}
			})
		}
	}
	return backendSource{src: s, processes: s.Processes, resample: resample}
}

// openDCGM is the DCGM source over the fake host engine, whose GPUs and
// MIG instances are those of the scripted NVML, with its processes listed
// and its MIG UUIDs read by NVML beside it, as gpuscope does in production.
func openDCGM(t *testing.T, sc scenario, _ sim.Config) backendSource {
	t.Helper()
	f := scriptNVML(t, sc)
	var gpus []dcgm.GPUInfo
	var migs []dcgm.MIGInfo
	for g := 0; g < sc.gpus; g++ {
		gpu := f.GPUs[g]
		gpus = append(gpus, dcgm.GPUInfo{ID: uint(g), UUID: gpu.UUID, PCIBusID: nvmlfake.BusID(g), Model: "NVIDIA A100-SXM4-80GB"})
		for k, in := range gpu.Instances {
			migs = append(migs, dcgm.MIGInfo{Entity: dcgm.EntityRef{Group: dcgm.EntityGPUInstance, ID: uint(100*g + k)},
				Parent: dcgm.EntityRef{Group: dcgm.EntityGPU, ID: uint(g)}, GPU: uint(g),
				InstanceID: uint(in.GI.Info.Id), Profile: "3g.40gb"})
		}
	}
	clk := clock.NewFake(epoch)
	host := dcgmfake.New(dcgmfake.WithClock(clk), dcgmfake.WithGPUs(gpus...), dcgmfake.WithMIG(migs...))
	// The MIG UUIDs come from NVML, as the production adapter reads them:
	// the host engine has none.
	s, err := dcgm.New(godcgm.WithMIGUUIDs(host, f, quietLogger()), dcgm.Config{Window: time.Second, Clock: clk, Log: quietLogger(), Processes: dcgm.ProcessConfig{
		Interval: time.Second,
		Open: func() (dcgm.ProcessReader, error) {
			return nvml.OpenProcessReader(nvml.ReaderConfig{Lib: f, Logger: quietLogger()})
		},
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Watch(watched()))
	firstProcesses(t, "dcgm", s.Processes, len(sc.procs), func() {
		clk.Add(time.Second)
		require.NoError(t, s.Collect(context.Background(), 0, discard{}))
	})
	return backendSource{src: s, processes: s.Processes}
}

// The scenarios themselves are what the test means: two pods on a
// time-sliced GPU each with their own memory and SM share, and MIG pods
// with memory and no SM share.
func TestScenariosAreTheSharedAndMIGCases(t *testing.T) {
	shared := sim.DefaultConfig()
	shared.GPUs, shared.SharedGPUs, shared.Seed = 2, 1, 7
	sc := fromSim(t, "shared", shared)
	want := sc.want()
	require.Len(t, want, 3)
	a, b := want["pod-0-0-0"], want["pod-0-0-1"]
	assert.Positive(t, a.mem)
	assert.Positive(t, b.mem)
	assert.NotEqual(t, a.mem, b.mem, "the two pods of GPU 0 hold different memory")
	assert.True(t, a.hasSM && b.hasSM)
	assert.LessOrEqual(t, a.sm+b.sm, 1.0, "the shares of one GPU add up to at most 1")
	assert.Positive(t, a.sm+b.sm, "the shared GPU is busy")

	mig := sim.DefaultConfig()
	mig.GPUs, mig.MIG, mig.Seed = 1, "2x3g.40gb", 7
	sc = fromSim(t, "mig", mig)
	want = sc.want()
	require.Len(t, want, 2)
	for pod, ps := range want {
		assert.Positive(t, ps.mem, pod)
		assert.False(t, ps.hasSM, "%s: no SM share inside a MIG instance", pod)
		assert.Equal(t, strconv.Itoa(0), ps.gpu)
	}
}
