package nvml

import (
	"context"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/nvml/nvmlfake"
)

func pidsOf(procs []source.Process) []uint32 {
	var out []uint32
	for _, p := range procs {
		out = append(out, p.PID)
	}
	return out
}

func setProcesses(f *nvmlfake.Fake, gpu int, pids ...uint32) {
	f.Update(gpu, func(g *nvmlfake.GPU) {
		g.R.Processes = nil
		for _, pid := range pids {
			g.R.Processes = append(g.R.Processes, gonvml.ProcessInfo{Pid: pid, UsedGpuMemory: 1 << 30, GpuInstanceId: noInstance})
		}
	})
}

// RefreshProcesses lists the processes when asked, before any collection
// and within the process interval, in which Collect lists none: a tool
// that compares the list with a known state (internal/testkit/capturecheck)
// reads that state, not an older or an empty snapshot.
func TestRefreshProcessesListsWhenAsked(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	s, err := New(Config{Lib: f, Logger: quietLogger(), ProcessInterval: time.Hour, EventWait: 20 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Watch([]source.Group{source.GroupOf(time.Second, fields(fieldid.GPUTemp))}))
	for i, tc := range []struct {
		name    string
		collect bool
		pids    []uint32
	}{
		{"before any collection", false, []uint32{100, 200}},
		{"after the collection that starts the first refresh", true, []uint32{300}},
		{"within the process interval", true, []uint32{400, 500}},
		{"all processes gone", true, nil},
	} {
		setProcesses(f, 0, tc.pids...)
		if tc.collect {
			require.NoError(t, s.Collect(context.Background(), 0, newSink()), tc.name)
		}
		require.NoError(t, s.RefreshProcesses(context.Background()), tc.name)
		got := s.Processes()
		assert.NotNil(t, got, "%s: an empty list, not 'cannot list'", tc.name)
		assert.Equal(t, tc.pids, pidsOf(got), "step %d: %s", i, tc.name)
	}
	require.NoError(t, s.Close())
	assert.ErrorContains(t, s.RefreshProcesses(context.Background()), "after close")
}

// A GPU whose process list hangs holds RefreshProcesses only until its
// context ends, and the reads not at all; the list comes once the driver
// answers.
func TestRefreshProcessesEndsWithItsContext(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	hold := make(chan struct{})
	setProcesses(f, 0, 100)
	f.Update(0, func(g *nvmlfake.GPU) {
		g.HoldCall = map[string]chan struct{}{"GetComputeRunningProcesses": hold}
	})
	released := false
	release := func() {
		if !released {
			released = true
			close(hold)
		}
	}
	t.Cleanup(release)
	s := open(t, f, time.Second, fieldid.GPUTemp)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, s.RefreshProcesses(ctx), context.DeadlineExceeded)
	sink := newSink()
	require.NoError(t, s.Collect(context.Background(), 0, sink))
	_, ok := sink.value(gpuEntity(t, s, 0), fieldid.GPUTemp)
	assert.True(t, ok, "the GPU is read while its process list hangs")
	assert.Empty(t, s.Processes())

	release()
	require.NoError(t, s.RefreshProcesses(context.Background()))
	assert.Equal(t, []uint32{100}, pidsOf(s.Processes()))
}

// RefreshProcesses waits for the refresh Collect started, and never
// runs beside it: the two would share each GPU's process cursor.
func TestRefreshProcessesTakesTurnsWithCollect(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	hold := make(chan struct{})
	setProcesses(f, 0, 100)
	setProcesses(f, 1, 900)
	// The background refresh lists GPU 0, then hangs on GPU 1.
	f.Update(1, func(g *nvmlfake.GPU) {
		g.HoldCall = map[string]chan struct{}{"GetComputeRunningProcesses": hold}
	})
	released := false
	release := func() {
		if !released {
			released = true
			close(hold)
		}
	}
	t.Cleanup(release)
	s := open(t, f, time.Second, fieldid.GPUTemp)
	require.NoError(t, s.Collect(context.Background(), 0, newSink()))
	testwait.For(t, "GPU 0's processes from the background refresh", func() bool {
		return assert.ObjectsAreEqual([]uint32{100}, pidsOf(s.Processes()))
	})

	setProcesses(f, 0, 200)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, s.RefreshProcesses(ctx), context.DeadlineExceeded)
	assert.Equal(t, []uint32{100}, pidsOf(s.Processes()), "GPU 0 not listed while the background refresh runs")

	release()
	require.NoError(t, s.RefreshProcesses(context.Background()))
	assert.Equal(t, []uint32{200, 900}, pidsOf(s.Processes()))
}
