package nvml

import (
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/source/nvml/nvmlfake"
)

// A process's name is nvmlSystemGetProcessName's, or the token nvidia-smi
// prints when it cannot be read, as nvidia_gpu_exporter's NVML backend
// writes it (internal/nvmlnative/backend_nvml.go: tok).
func TestProcessNameTokens(t *testing.T) {
	tests := []struct {
		ret  gonvml.Return
		want string
	}{
		{gonvml.SUCCESS, "/usr/bin/python3"},
		{gonvml.ERROR_NOT_SUPPORTED, "[N/A]"},
		{gonvml.ERROR_NO_PERMISSION, "[Insufficient Permissions]"},
		{gonvml.ERROR_FUNCTION_NOT_FOUND, "[Function Not Found]"},
		{gonvml.ERROR_NOT_FOUND, "[Unknown Error]"},
		{gonvml.ERROR_UNKNOWN, "[Unknown Error]"},
	}
	for _, tt := range tests {
		t.Run(gonvml.ErrorString(tt.ret), func(t *testing.T) {
			lib := &mock.Interface{SystemGetProcessNameFunc: func(pid int) (string, gonvml.Return) {
				assert.Equal(t, 42, pid)
				if tt.ret != gonvml.SUCCESS {
					return "", tt.ret
				}
				return "/usr/bin/python3", gonvml.SUCCESS
			}}
			assert.Equal(t, tt.want, processName(lib, 42))
		})
	}
}

// A process is named once while it runs, not at every read: the driver's
// call reads /proc, and a GPU of MPS clients lists dozens of processes. A
// process gone from the list is forgotten; a new one is named.
func TestProcessNamesAreAskedOncePerProcess(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	f.Update(0, func(g *nvmlfake.GPU) {
		g.R.Processes = []gonvml.ProcessInfo{{Pid: 1, GpuInstanceId: noInstance}, {Pid: 2, GpuInstanceId: noInstance}}
	})
	f.SetProcessName(1, "a")
	f.SetProcessName(2, "b")
	f.SetProcessName(3, "c")
	r := openReader(t, f)
	uuid := f.GPUs[0].UUID
	names := func() []string {
		got, err := r.GPUProcesses(uuid)
		require.NoError(t, err)
		var out []string
		for _, p := range got {
			out = append(out, p.Name)
		}
		return out
	}
	assert.Equal(t, []string{"a", "b"}, names())
	assert.Equal(t, []string{"a", "b"}, names())
	assert.Equal(t, 2, f.ProcessNameCalls(), "each process named once")

	f.Update(0, func(g *nvmlfake.GPU) {
		g.R.Processes = []gonvml.ProcessInfo{{Pid: 2, GpuInstanceId: noInstance}, {Pid: 3, GpuInstanceId: noInstance}}
	})
	assert.Equal(t, []string{"b", "c"}, names())
	assert.Equal(t, 3, f.ProcessNameCalls(), "only the new process is named")
	f.Update(0, func(g *nvmlfake.GPU) {
		g.R.Processes = []gonvml.ProcessInfo{{Pid: 1, GpuInstanceId: noInstance}}
	})
	f.SetProcessName(1, "a2")
	assert.Equal(t, []string{"a2"}, names(), "a PID gone and back is named anew")
}
