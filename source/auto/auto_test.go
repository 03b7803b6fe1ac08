package auto_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/clock"
	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/auto"
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/dcgm/dcgmfake"
)

// nvmlValue marks samples from the NVML stand-in, so tests can tell the
// backends apart; dcgmfake numbers its samples from 1.
const nvmlValue = 1e6

// fakeNVML is a pull source that sees the same GPUs as dcgmfake's default.
type fakeNVML struct {
	clk      clock.Clock
	mu       sync.Mutex
	entities []*source.Entity
	watched  []source.Group
	closed   bool
}

func newFakeNVML(clk clock.Clock) *fakeNVML {
	g0 := source.NewGPU(0, "GPU-00000000-0000-0000-0000-000000000000", "00000000:07:00.0", "NVIDIA H100 80GB HBM3")
	g1 := source.NewGPU(1, "GPU-11111111-1111-1111-1111-111111111111", "00000000:0F:00.0", "NVIDIA H100 80GB HBM3")
	return &fakeNVML{clk: clock.Or(clk), entities: []*source.Entity{&g0, &g1}}
}

func (n *fakeNVML) Name() string { return "nvml" }
func (n *fakeNVML) Watch(g []source.Group) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.watched = g
	return nil
}
func (n *fakeNVML) Entities() []*source.Entity { return n.entities }
func (n *fakeNVML) Collect(_ context.Context, group int, sink source.Sink) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return errors.New("nvml: closed")
	}
	if group >= len(n.watched) {
		return errors.New("nvml: group not watched")
	}
	now := n.clk.Now().UnixNano()
	for _, e := range n.entities {
		for _, f := range n.watched[group].Fields {
			sink.Value(e, f.ID, now, nvmlValue)
		}
	}
	return nil
}
func (n *fakeNVML) Status() source.Status { return source.Status{Up: true} }
func (n *fakeNVML) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	return nil
}

type ctors struct {
	// clk drives the fake host engine, the DCGM source's reconnect
	// backoff and the auto source's probes.
	clk       *clock.Fake
	fake      *dcgmfake.Fake
	nvmlErr   error
	nvmlOpens atomic.Int32
	// procs, when set, is the process list DCGM's reader beside it gives.
	procs []source.Process
}

func newCtors() *ctors {
	clk := clock.NewFake(time.Unix(1_750_000_000, 0))
	return &ctors{clk: clk, fake: dcgmfake.New(dcgmfake.WithClock(clk))}
}

func (c *ctors) dcgm() (source.Source, error) {
	l, _ := test.NewNullLogger()
	cfg := dcgm.Config{Window: time.Second, BackoffInitial: 2 * time.Millisecond, BackoffMax: 10 * time.Millisecond, Log: l, Clock: c.clk}
	if c.procs != nil {
		cfg.Processes.Open = func() (dcgm.ProcessReader, error) { return listedReader(c.procs), nil }
	}
	return dcgm.New(c.fake, cfg)
}

func (c *ctors) nvml() (source.Source, error) {
	if c.nvmlErr != nil {
		return nil, c.nvmlErr
	}
	c.nvmlOpens.Add(1)
	return newFakeNVML(c.clk), nil
}

var groups = []source.Group{{Interval: 10 * time.Millisecond, Fields: []counters.Field{{ID: fieldid.GPUTemp, Name: "DCGM_FI_DEV_GPU_TEMP", Type: counters.Gauge}}}}

func newAuto(t *testing.T, c *ctors) (*auto.Auto, *test.Hook) {
	t.Helper()
	l, hook := test.NewNullLogger()
	a, err := auto.New(c.dcgm, c.nvml, l, auto.WithProbe(5*time.Millisecond, 20*time.Millisecond), auto.WithClock(c.clk))
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	require.NoError(t, a.Watch(groups))
	return a, hook
}

// collectFrom collects, moving the clock 2 ms between reads, until a sample
// from the wanted backend arrives and returns the keys of the entities it
// came from. Switches happen on the auto source's probe goroutine, which
// the clock wakes; collectFrom waits for them.
func collectFrom(t *testing.T, c *ctors, a *auto.Auto, fromNVML bool) map[string]bool {
	t.Helper()
	var keys map[string]bool
	testwait.For(t, fmt.Sprintf("a sample from the wanted backend (nvml=%v)", fromNVML), func() bool {
		rec := &dcgmfake.Recorder{}
		err := a.Collect(context.Background(), 0, rec)
		keys = map[string]bool{}
		for _, v := range rec.Values(fieldid.GPUTemp) {
			if (v.V == nvmlValue) == fromNVML {
				keys[v.Key] = true
			}
		}
		if err == nil && len(keys) == 2 {
			return true
		}
		c.clk.Add(2 * time.Millisecond)
		return false
	})
	return keys
}

func TestDCGMPreferredAtStart(t *testing.T) {
	c := newCtors()
	a, hook := newAuto(t, c)
	assert.Equal(t, "auto", a.Name())
	st := a.Status()
	assert.Equal(t, auto.DCGM, st.Active)
	assert.True(t, st.Up)
	collectFrom(t, c, a, false)
	assert.Zero(t, c.nvmlOpens.Load(), "NVML is opened only when needed")
	assert.Contains(t, hook.AllEntries()[0].Message, "using DCGM")
}

func TestNVMLAtStartThenDCGMWhenItAnswers(t *testing.T) {
	c := newCtors()
	c.fake.Refuse(dcgm.ErrLibraryMissing)
	a, hook := newAuto(t, c)
	assert.Equal(t, auto.NVML, a.Status().Active)
	assert.True(t, a.Status().Up)
	entry := hook.AllEntries()[0]
	assert.Equal(t, logrus.WarnLevel, entry.Level)
	assert.Contains(t, entry.Message, "using NVML")
	assert.ErrorIs(t, entry.Data[logrus.ErrorKey].(error), dcgm.ErrLibraryMissing, "the log says why")
	nvmlKeys := collectFrom(t, c, a, true)
	require.Error(t, a.PauseProfiling(), "no profiling lock without DCGM")

	c.fake.Refuse(nil)
	dcgmKeys := collectFrom(t, c, a, false)
	assert.Equal(t, auto.DCGM, a.Status().Active)
	assert.Equal(t, nvmlKeys, dcgmKeys, "the same series across the switch")
	require.NoError(t, a.PauseProfiling())
}

func TestNeitherBackendIsAClearError(t *testing.T) {
	c := newCtors()
	c.nvmlErr = errors.New("nvml: ERROR_LIBRARY_NOT_FOUND")
	c.fake.Refuse(dcgm.ErrLibraryMissing)
	_, err := auto.New(c.dcgm, c.nvml, nil)
	require.Error(t, err)
	assert.ErrorIs(t, err, dcgm.ErrLibraryMissing)
	assert.Contains(t, err.Error(), "libdcgm.so.4")
	assert.Contains(t, err.Error(), "ERROR_LIBRARY_NOT_FOUND")
}

func TestNVMLWhileDCGMDownAndBack(t *testing.T) {
	before := runtime.NumGoroutine()
	c := newCtors()
	l, _ := test.NewNullLogger()
	a, err := auto.New(c.dcgm, c.nvml, l, auto.WithProbe(5*time.Millisecond, 20*time.Millisecond), auto.WithClock(c.clk))
	require.NoError(t, err)
	require.NoError(t, a.Watch(groups))
	first := collectFrom(t, c, a, false)

	for i := range 3 {
		c.fake.Kill()
		assert.Equal(t, first, collectFrom(t, c, a, true), "outage %d: NVML serves the same GPUs", i)
		st := a.Status()
		assert.Equal(t, auto.NVML, st.Active)
		assert.True(t, st.Up, "NVML answers")

		c.fake.Restart()
		assert.Equal(t, first, collectFrom(t, c, a, false), "outage %d: DCGM serves again", i)
		assert.Equal(t, auto.DCGM, a.Status().Active)
	}
	assert.Equal(t, int32(3), c.nvmlOpens.Load(), "NVML opened once per outage")

	require.NoError(t, a.Close())
	assert.True(t, testwait.Until(5*time.Second, func() bool { return runtime.NumGoroutine() <= before }), "no goroutine leaked")
}

func TestSwitchReportsEntitiesChangedOnce(t *testing.T) {
	c := newCtors()
	a, _ := newAuto(t, c)
	collectFrom(t, c, a, false)
	c.fake.Kill()
	rec := &dcgmfake.Recorder{}
	var changed int
	testwait.For(t, "the switch to NVML", func() bool {
		if err := a.Collect(context.Background(), 0, rec); errors.Is(err, source.ErrEntitiesChanged) {
			changed++
		}
		if a.Status().Active == auto.NVML && changed > 0 {
			return true
		}
		c.clk.Add(time.Millisecond)
		return false
	})
	require.NoError(t, a.Collect(context.Background(), 0, rec))
	assert.Equal(t, 1, changed)
	assert.Len(t, a.Entities(), 2)
}
