package nvml

import (
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/nvml/nvmlfake"
)

func openReader(t *testing.T, f *nvmlfake.Fake) *ProcessReader {
	t.Helper()
	r, err := OpenProcessReader(ReaderConfig{Lib: f, Logger: quietLogger()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// The reader beside DCGM lists a GPU's processes by UUID with the calls and
// the rules of the NVML source: memory from the running processes, SM
// utilisation from each PID's newest sample, -1 for a PID without one.
func TestProcessReaderListsAGPUsProcessesByUUID(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	f.Update(3, func(g *nvmlfake.GPU) {
		g.R.Processes = []gonvml.ProcessInfo{
			{Pid: 100, UsedGpuMemory: 2 << 30, GpuInstanceId: noInstance},
			{Pid: 200, UsedGpuMemory: 1 << 30, GpuInstanceId: noInstance},
		}
		g.R.ProcUtil = []gonvml.ProcessUtilizationSample{{Pid: 100, TimeStamp: 10, SmUtil: 30}, {Pid: 100, TimeStamp: 20, SmUtil: 70}}
	})
	f.SetProcessName(100, "/usr/bin/python3")
	r := openReader(t, f)
	uuid := f.GPUs[3].UUID
	got, err := r.GPUProcesses(uuid)
	require.NoError(t, err)
	assert.Equal(t, []source.Process{
		{PID: 100, UUID: uuid, GPUInstanceID: -1, UsedMemoryBytes: 2 << 30, SMUtil: 70, Name: "/usr/bin/python3"},
		{PID: 200, UUID: uuid, GPUInstanceID: -1, UsedMemoryBytes: 1 << 30, SMUtil: -1, Name: "[Unknown Error]"},
	}, got, "a process the driver cannot name has nvidia-smi's token")

	// The next read asks only for newer utilisation samples: a process that
	// ran nothing since has no SM utilisation.
	f.Update(3, func(g *nvmlfake.GPU) {
		g.R.ProcUtil = append(g.R.ProcUtil, gonvml.ProcessUtilizationSample{Pid: 200, TimeStamp: 30, SmUtil: 15})
	})
	got, err = r.GPUProcesses(uuid)
	require.NoError(t, err)
	assert.Equal(t, []float64{-1, 15}, []float64{got[0].SMUtil, got[1].SMUtil})

	other, err := r.GPUProcesses(f.GPUs[0].UUID)
	require.NoError(t, err)
	assert.Empty(t, other, "a GPU without processes")
}

// On a MIG GPU each process carries its GPU instance, and no SM share:
// NVML has no per-process utilisation inside a MIG instance.
func TestProcessReaderGivesMIGProcessesTheirInstance(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXA100)
	ins := f.EnableMIG(1, gonvml.GPU_INSTANCE_PROFILE_3_SLICE, gonvml.GPU_INSTANCE_PROFILE_3_SLICE)
	gi0, gi1 := ins[0].GI.Info.Id, ins[1].GI.Info.Id
	f.Update(1, func(g *nvmlfake.GPU) {
		g.R.Processes = []gonvml.ProcessInfo{
			{Pid: 10, UsedGpuMemory: 4 << 30, GpuInstanceId: gi0},
			{Pid: 11, UsedGpuMemory: 6 << 30, GpuInstanceId: gi1},
		}
		g.R.ProcUtil = []gonvml.ProcessUtilizationSample{{Pid: 10, TimeStamp: 5, SmUtil: 40}}
	})
	f.SetProcessName(10, "infer")
	f.SetProcessName(11, "train")
	r := openReader(t, f)
	uuid := f.GPUs[1].UUID
	got, err := r.GPUProcesses(uuid)
	require.NoError(t, err)
	assert.Equal(t, []source.Process{
		{PID: 10, UUID: uuid, GPUInstanceID: int(gi0), UsedMemoryBytes: 4 << 30, SMUtil: -1, Name: "infer"},
		{PID: 11, UUID: uuid, GPUInstanceID: int(gi1), UsedMemoryBytes: 6 << 30, SMUtil: -1, Name: "train"},
	}, got)
}

func TestProcessReaderErrors(t *testing.T) {
	tests := []struct {
		name  string
		setup func(f *nvmlfake.Fake)
		uuid  func(f *nvmlfake.Fake) string
		want  string
	}{
		{"a GPU NVML does not know", func(*nvmlfake.Fake) {}, func(*nvmlfake.Fake) string { return "GPU-not-here" },
			"GPU-not-here"},
		{"a GPU that cannot list its processes", func(f *nvmlfake.Fake) {
			f.Update(0, func(g *nvmlfake.GPU) { g.Errs["GetComputeRunningProcesses"] = gonvml.ERROR_NOT_SUPPORTED })
		}, func(f *nvmlfake.Fake) string { return f.GPUs[0].UUID }, "cannot list its compute processes"},
		{"a lost GPU", func(f *nvmlfake.Fake) {
			f.Update(0, func(g *nvmlfake.GPU) { g.Errs["GetComputeRunningProcesses"] = gonvml.ERROR_GPU_IS_LOST })
		}, func(f *nvmlfake.Fake) string { return f.GPUs[0].UUID }, "GetComputeRunningProcesses"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := nvmlfake.New(nvmlfake.DGXH100)
			tt.setup(f)
			r := openReader(t, f)
			_, err := r.GPUProcesses(tt.uuid(f))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Contains(t, err.Error(), tt.uuid(f), "the error names the GPU")
		})
	}
}

// A GPU that was lost is looked up again once it answers.
func TestProcessReaderFindsALostGPUAgain(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	f.Update(0, func(g *nvmlfake.GPU) {
		g.Errs["GetComputeRunningProcesses"] = gonvml.ERROR_GPU_IS_LOST
		g.R.Processes = []gonvml.ProcessInfo{{Pid: 7, UsedGpuMemory: 1 << 20, GpuInstanceId: noInstance}}
	})
	r := openReader(t, f)
	_, err := r.GPUProcesses(f.GPUs[0].UUID)
	require.Error(t, err)
	f.Update(0, func(g *nvmlfake.GPU) { delete(g.Errs, "GetComputeRunningProcesses") })
	got, err := r.GPUProcesses(f.GPUs[0].UUID)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, uint32(7), got[0].PID)
}

func TestProcessReaderInitFailuresSayWhy(t *testing.T) {
	for _, tt := range []struct {
		ret  gonvml.Return
		want error
	}{{gonvml.ERROR_LIBRARY_NOT_FOUND, ErrNoDriver}, {gonvml.ERROR_DRIVER_NOT_LOADED, gonvml.ERROR_DRIVER_NOT_LOADED}} {
		f := nvmlfake.New(nvmlfake.DGXH100)
		f.InitFunc = func() gonvml.Return { return tt.ret }
		_, err := OpenProcessReader(ReaderConfig{Lib: f, Logger: quietLogger()})
		require.ErrorIs(t, err, tt.want)
		assert.Contains(t, err.Error(), "nvml process list")
	}
}

func TestProcessReaderAfterClose(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	r, err := OpenProcessReader(ReaderConfig{Lib: f, Logger: quietLogger()})
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.NoError(t, r.Close(), "a second Close")
	_, err = r.GPUProcesses(f.GPUs[0].UUID)
	require.ErrorContains(t, err, "closed")
}

// In MIG mode nvml.h gives the whole GPU's process list "only if the
// caller has appropriate privileges"; per instance it is "queried by using
// specific MIG device handles". The reader beside DCGM runs as the same
// non-root user, so it lists each MIG device's processes instead.
func TestProcessReaderListsMIGProcessesWithoutPrivileges(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXA100)
	ins := f.EnableMIG(1, gonvml.GPU_INSTANCE_PROFILE_3_SLICE, gonvml.GPU_INSTANCE_PROFILE_3_SLICE)
	f.AddComputeInstance(1, ins[1])
	gi0, gi1 := ins[0].GI.Info.Id, ins[1].GI.Info.Id
	f.SetNonRoot(true)
	f.Update(1, func(g *nvmlfake.GPU) {
		ins[0].Processes = []gonvml.ProcessInfo{{Pid: 10, UsedGpuMemory: 4 << 30, GpuInstanceId: gi0}}
		ins[1].Processes = []gonvml.ProcessInfo{{Pid: 11, UsedGpuMemory: 6 << 30, GpuInstanceId: gi1}}
	})
	f.SetProcessName(10, "infer")
	f.SetProcessName(11, "train")
	r := openReader(t, f)
	uuid := f.GPUs[1].UUID
	got, err := r.GPUProcesses(uuid)
	require.NoError(t, err)
	assert.Equal(t, []source.Process{
		{PID: 10, UUID: uuid, GPUInstanceID: int(gi0), UsedMemoryBytes: 4 << 30, SMUtil: -1, Name: "infer"},
		{PID: 11, UUID: uuid, GPUInstanceID: int(gi1), UsedMemoryBytes: 6 << 30, SMUtil: -1, Name: "train"},
	}, got, "each process once, however many compute instances list it")
}
