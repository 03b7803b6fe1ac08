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
// greater than 100ms due to the internal sample refresh rate." Two samples
// inside one refresh period hold the same counters, and the metrics come
// back 0 (or NaN), which the window statistics and insight would show as a
// stall. Such a pair is skipped: the field has no value that round, and
// the next measures over the longer span from the same baseline. A tick a
// little early whose counters moved is read, so a 100 ms group keeps its
// rate despite its ticks' jitter, and an idle GPU still reads 0.
func TestGPMSamplesOfOneRefreshPeriodAreSkipped(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	clk := timesource.NewFake(time.Unix(1_750_000_000, 0))
	f.SetGPMRefresh(clk, 100*time.Millisecond)
	s, err := New(Config{Lib: f, Logger: quietLogger(), EventWait: 20 * time.Millisecond, Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	// The group's interval sets the reads' real-time deadline (3/4 of it);
	// what is tested here runs on the fake clock, so the interval is one
	// that a loaded machine's eight reads under the race detector meet.
	require.NoError(t, s.Watch([]source.Group{{Interval: time.Second, Fields: fields(fieldid.ProfSMActive)}}))
	gpu0 := gpuEntity(t, s, 0)
	start := clk.Now()
	steps := []struct {
		at   time.Duration // since start; the counters refresh at each 100 ms
		idle bool
		want float64 // -1: no value
	}{
		{0, false, -1},                        // the baseline
		{100 * time.Millisecond, false, 0.8},  // next refresh period
		{160 * time.Millisecond, false, -1},   // same period as the last sample: skipped
		{200 * time.Millisecond, false, 0.8},  // measured from the sample at 100 ms
		{299 * time.Millisecond, false, -1},   // 99 ms later, same period
		{301 * time.Millisecond, false, 0.8},  // from 200 ms
		{400 * time.Millisecond, false, 0.8},  // 99 ms later, but the counters moved
		{500 * time.Millisecond, true, 0},     // an idle GPU reads 0
		{550 * time.Millisecond, true, -1},    // and a same-period pair is still skipped
		{600 * time.Millisecond, false, 0.8},  // busy again
		{1000 * time.Millisecond, false, 0.8}, // missed ticks
	}
	for i, st := range steps {
		clk.Set(start.Add(st.at))
		f.Update(0, func(g *nvmlfake.GPU) {
			g.R.GPM[gonvml.GPM_METRIC_SM_UTIL] = 80
			if st.idle {
				g.R.GPM[gonvml.GPM_METRIC_SM_UTIL] = 0
			}
		})
		sink := newSink()
		require.NoError(t, s.Collect(context.Background(), 0, sink))
		v, ok := sink.value(gpu0, fieldid.ProfSMActive)
		if st.want < 0 {
			assert.False(t, ok, "step %d (%s): skipped, not %v", i, st.at, v)
		} else if assert.True(t, ok, "step %d (%s)", i, st.at) {
			assert.InDelta(t, st.want, v, 1e-9, "step %d (%s)", i, st.at)
		}
		assert.Empty(t, sink.fails, "step %d: a skipped pair is no failure", i)
	}
}
