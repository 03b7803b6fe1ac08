package smifake

import (
	"path/filepath"
	"strings"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/smicapture"
)

func load(t *testing.T, part, phase string) (*Fake, *smicapture.GPU) {
	t.Helper()
	for _, f := range smicapture.TestFiles(t) {
		if !strings.Contains(filepath.Base(f), part) {
			continue
		}
		c, err := smicapture.ParseFile(f)
		require.NoError(t, err)
		for _, s := range c.Snapshots {
			if s.Phase == phase {
				fake, err := New(c, s)
				require.NoError(t, err)
				return fake, s.GPUs[0]
			}
		}
	}
	t.Fatalf("no %s snapshot of a capture named like %q", phase, part)
	return nil, nil
}

// TestAnswersInNVMLUnits: the capture's W, MiB and "P0" come back as
// NVML's mW, bytes and PSTATE_0, and what it prints N/A is NOT_SUPPORTED.
func TestAnswersInNVMLUnits(t *testing.T) {
	f, _ := load(t, "h100-mig", "load")
	d := f.Devices[0]
	mw, ret := d.GetPowerUsage()
	assert.Equal(t, gonvml.SUCCESS, ret)
	assert.Equal(t, uint32(433_780), mw, "433.78 W")
	mem, ret := d.GetMemoryInfo_v2()
	assert.Equal(t, gonvml.SUCCESS, ret)
	assert.Equal(t, uint64(81559)<<20, mem.Total)
	assert.Equal(t, uint64(479)<<20, mem.Reserved)
	p, _ := d.GetPerformanceState()
	assert.Equal(t, gonvml.PSTATE_0, p)
	_, ret = d.GetFanSpeed()
	assert.Equal(t, gonvml.ERROR_NOT_SUPPORTED, ret, "fan.speed [N/A]")
	_, ret = d.GetUtilizationRates()
	assert.Equal(t, gonvml.ERROR_NOT_SUPPORTED, ret, "utilization in MIG mode is [N/A]")
	kbs, _ := d.GetPcieThroughput(gonvml.PCIE_UTIL_RX_BYTES)
	assert.Equal(t, uint32(19191), kbs, "Rx Throughput 19191 KB/s")
	cuda, _ := f.SystemGetCudaDriverVersion()
	assert.Equal(t, 13010, cuda, "CUDA 13.1")
}

// TestMIGLayoutAndProcesses: the MIG devices keep their GPU instance IDs,
// profiles and memory, and the compute processes their instance.
func TestMIGLayoutAndProcesses(t *testing.T) {
	f, g := load(t, "h100-mig", "load")
	d := f.Devices[0]
	cur, _, ret := d.GetMigMode()
	require.Equal(t, gonvml.SUCCESS, ret)
	assert.Equal(t, gonvml.DEVICE_MIG_ENABLE, cur)
	want := []struct {
		gi      int
		profile string
		slices  uint32
		mib     uint64
	}{{2, "3g.40gb", 3, 40448}, {3, "2g.20gb", 2, 20096}, {9, "1g.10gb", 1, 9984}, {10, "1g.10gb", 1, 9984}}
	for i, w := range want {
		md, ret := d.GetMigDeviceHandleByIndex(i)
		require.Equal(t, gonvml.SUCCESS, ret)
		gi, _ := md.GetGpuInstanceId()
		assert.Equal(t, w.gi, gi)
		p, ok := ProfileOf(g.Field("name").Text(), g.MIG[i])
		assert.True(t, ok)
		assert.Equal(t, w.profile, p.Name)
		inst, ret := d.GetGpuInstanceById(gi)
		require.Equal(t, gonvml.SUCCESS, ret)
		info, _ := inst.GetInfo()
		prof, ret := d.GetGpuInstanceProfileInfo(int(info.ProfileId))
		require.Equal(t, gonvml.SUCCESS, ret)
		assert.Equal(t, w.slices, prof.SliceCount)
		m, _ := md.GetMemoryInfo_v2()
		assert.Equal(t, w.mib<<20, m.Total)
	}
	_, ret = d.GetMigDeviceHandleByIndex(4)
	assert.Equal(t, gonvml.ERROR_NOT_FOUND, ret)
	procs, _ := d.GetComputeRunningProcesses()
	require.Len(t, procs, 3)
	assert.Equal(t, uint32(21180), procs[0].Pid)
	assert.Equal(t, uint32(2), procs[0].GpuInstanceId)
	assert.Equal(t, uint64(2296)<<20, procs[0].UsedGpuMemory)
	name, _ := f.SystemGetProcessName(21198)
	assert.Equal(t, "./gpu_burn", name)
}

// TestGraphicsProcessesAreNotCompute: a GeForce's desktop processes (type
// G) are not listed by nvmlDeviceGetComputeRunningProcesses.
func TestGraphicsProcessesAreNotCompute(t *testing.T) {
	f, g := load(t, "rtx-2080-super", "load")
	require.NotEmpty(t, g.Processes)
	procs, _ := f.Devices[0].GetComputeRunningProcesses()
	for _, p := range procs {
		assert.NotEqual(t, uint32(1696), p.Pid, "gnome-shell is a graphics process")
		assert.Equal(t, uint32(0xFFFFFFFF), p.GpuInstanceId)
	}
	assert.Len(t, procs, 2, "the two ffmpeg processes")
	_, _, ret := f.Devices[0].GetMigMode()
	assert.Equal(t, gonvml.ERROR_NOT_SUPPORTED, ret, "mig.mode.current [N/A]")
}
