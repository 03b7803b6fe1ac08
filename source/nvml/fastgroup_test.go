package nvml

import (
	"context"
	"errors"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	timesource "github.com/gpuscope/gpuscope/internal/clock"
	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/nvml/nvmlfake"
)

// A collection that waited for a slow GPU as long as the interval would
// leave no time before the next tick: a 100 ms group whose GPU hangs would
// run its collections back to back. The wait is three quarters of it.
func TestReadTimeoutIsBelowTheInterval(t *testing.T) {
	cases := []struct {
		interval time.Duration
		want     string
	}{
		{100 * time.Millisecond, "after 75ms"},
		{time.Second, "after 750ms"},
	}
	for _, tc := range cases {
		t.Run(tc.interval.String(), func(t *testing.T) {
			f := nvmlfake.New(nvmlfake.DGXA100)
			s := open(t, f, tc.interval, fieldid.GPUTemp)
			hold := make(chan struct{})
			f.Update(5, func(g *nvmlfake.GPU) { g.Hold = hold })
			sink := newSink()
			start := time.Now()
			require.NoError(t, s.Collect(context.Background(), 0, sink))
			took := time.Since(start)
			f.Update(5, func(g *nvmlfake.GPU) { g.Hold = nil })
			close(hold)
			fails := sink.fails[sample{gpuEntity(t, s, 5).Key(), fieldid.GPUTemp}]
			require.Len(t, fails, 1)
			assert.True(t, errors.Is(fails[0], ErrReadTimeout), fails[0])
			assert.ErrorContains(t, fails[0], tc.want)
			assert.GreaterOrEqual(t, took, tc.interval*3/4, "the collection waited for the held GPU")
		})
	}
}

// The process list (a driver call per GPU, and one per new process for its
// name) is refreshed beside the reads, not inside them: a GPU whose
// process list hangs keeps its fields.
func TestProcessRefreshIsOutOfTheReadPath(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	hold := make(chan struct{})
	f.Update(0, func(g *nvmlfake.GPU) {
		g.R.Processes = []gonvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 1 << 30, GpuInstanceId: 0xFFFFFFFF}}
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
	s := open(t, f, 2*time.Second, fieldid.GPUTemp)
	gpu0 := gpuEntity(t, s, 0)
	for round := 0; round < 3; round++ {
		sink := newSink()
		require.NoError(t, s.Collect(context.Background(), 0, sink))
		_, ok := sink.value(gpu0, fieldid.GPUTemp)
		assert.True(t, ok, "round %d: the GPU is read while its process list hangs", round)
		assert.Empty(t, sink.fails, "round %d", round)
	}
	release()
	testwait.For(t, "the process list once released", func() bool {
		require.NoError(t, s.Collect(context.Background(), 0, newSink()))
		return len(s.Processes()) == 1
	})
}

// nvml.h: "The interval between two nvmlGpmSampleGet() calls should be
// greater than 100ms due to the internal sample refresh rate." A 100 ms
// group whose collection comes early would measure counters that have not
// moved, 0 or NaN, which the window statistics and insight would show as a
// stall. Such a sample is not taken: the field has no value that round,
// and the next measures over the longer span.
func TestGPMSamplesCloserThan100msAreSkipped(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	clk := timesource.NewFake(time.Unix(1_750_000_000, 0))
	f.SetGPMRefresh(clk, 100*time.Millisecond)
	s, err := New(Config{Lib: f, Logger: quietLogger(), EventWait: 20 * time.Millisecond, Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Watch([]source.Group{{Interval: 100 * time.Millisecond, Fields: fields(fieldid.ProfSMActive)}}))
	gpu0 := gpuEntity(t, s, 0)
	steps := []struct {
		after time.Duration
		want  bool
	}{
		{0, false},                     // the baseline
		{100 * time.Millisecond, true}, // 100 ms apart
		{60 * time.Millisecond, false}, // too early: skipped
		{40 * time.Millisecond, true},  // 100 ms after the last sample taken
		{95 * time.Millisecond, false}, // jitter below the refresh period
		{105 * time.Millisecond, true}, // 200 ms span
		{150 * time.Millisecond, true}, // a late tick is fine
		{time.Millisecond, false},      // back to back
		{99 * time.Millisecond, true},  // 100 ms since the last taken
		{100 * time.Millisecond, true}, // and steady again
		{50 * time.Millisecond, false}, // half a period
		{49 * time.Millisecond, false}, // 99 ms since the last taken
		{time.Millisecond, true},       // 100 ms exactly
		{200 * time.Millisecond, true}, // a missed tick
		{100 * time.Millisecond, true}, // steady
		{100 * time.Millisecond, true}, // steady
		{10 * time.Millisecond, false}, // early
		{100 * time.Millisecond, true}, // 110 ms span
	}
	for i, st := range steps {
		clk.Add(st.after)
		sink := newSink()
		require.NoError(t, s.Collect(context.Background(), 0, sink))
		v, ok := sink.value(gpu0, fieldid.ProfSMActive)
		require.Equal(t, st.want, ok, "step %d (+%s)", i, st.after)
		if ok {
			assert.InDelta(t, 0.8, v, 1e-9, "step %d: a real reading, never the 0 of an unmoved counter", i)
		}
		assert.Empty(t, sink.fails, "step %d: a skipped sample is no failure", i)
	}
}
