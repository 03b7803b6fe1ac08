package autosource_test

import (
	"context"
	"errors"
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
	"github.com/gpuscope/gpuscope/dcgm"
	"github.com/gpuscope/gpuscope/dcgm/dcgmfake"
	"github.com/gpuscope/gpuscope/dcgm/godcgm"
	"github.com/gpuscope/gpuscope/internal/autosource"
	"github.com/gpuscope/gpuscope/source"
)

// nvmlValue marks samples from the NVML stand-in, so tests can tell the
// backends apart; dcgmfake numbers its samples from 1.
const nvmlValue = 1e6

// fakeNVML is a pull source that sees the same GPUs as dcgmfake's default.
type fakeNVML struct {
	mu       sync.Mutex
	entities []*source.Entity
	watched  []source.Group
	closed   bool
}

func newFakeNVML() *fakeNVML {
	g0 := source.NewGPU(0, "GPU-00000000-0000-0000-0000-000000000000", "00000000:07:00.0", "NVIDIA H100 80GB HBM3")
	g1 := source.NewGPU(1, "GPU-11111111-1111-1111-1111-111111111111", "00000000:0F:00.0", "NVIDIA H100 80GB HBM3")
	return &fakeNVML{entities: []*source.Entity{&g0, &g1}}
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
	now := time.Now().UnixNano()
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
	fake      *dcgmfake.Fake
	nvmlErr   error
	nvmlOpens atomic.Int32
}

func (c *ctors) dcgm() (source.Source, error) {
	l, _ := test.NewNullLogger()
	return dcgm.New(c.fake, dcgm.Config{Window: time.Second, BackoffInitial: 2 * time.Millisecond, BackoffMax: 10 * time.Millisecond, Log: l})
}

func (c *ctors) nvml() (source.Source, error) {
	if c.nvmlErr != nil {
		return nil, c.nvmlErr
	}
	c.nvmlOpens.Add(1)
	return newFakeNVML(), nil
}

var groups = []source.Group{{Interval: 10 * time.Millisecond, Fields: []counters.Field{{ID: fieldid.GPUTemp, Name: "DCGM_FI_DEV_GPU_TEMP", Type: counters.Gauge}}}}

func newAuto(t *testing.T, c *ctors) (*autosource.Auto, *test.Hook) {
	t.Helper()
	l, hook := test.NewNullLogger()
	a, err := autosource.New(c.dcgm, c.nvml, l, autosource.WithProbe(5*time.Millisecond, 20*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	require.NoError(t, a.Watch(groups))
	return a, hook
}

// collectFrom collects until a sample from the wanted backend arrives and
// returns the keys of the entities it came from.
func collectFrom(t *testing.T, a *autosource.Auto, fromNVML bool) map[string]bool {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		require.True(t, time.Now().Before(deadline), "no sample from the wanted backend (nvml=%v); active %s", fromNVML, a.Status().Active)
		rec := &dcgmfake.Recorder{}
		err := a.Collect(context.Background(), 0, rec)
		keys := map[string]bool{}
		for _, v := range rec.Values(fieldid.GPUTemp) {
			if (v.V == nvmlValue) == fromNVML {
				keys[v.Key] = true
			}
		}
		if err == nil && len(keys) == 2 {
			return keys
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestDCGMPreferredAtStart(t *testing.T) {
	c := &ctors{fake: dcgmfake.New()}
	a, hook := newAuto(t, c)
	assert.Equal(t, "auto", a.Name())
	st := a.Status()
	assert.Equal(t, autosource.DCGM, st.Active)
	assert.True(t, st.Up)
	collectFrom(t, a, false)
	assert.Zero(t, c.nvmlOpens.Load(), "NVML is opened only when needed")
	assert.Contains(t, hook.AllEntries()[0].Message, "using DCGM")
}

func TestNVMLAtStartThenDCGMWhenItAnswers(t *testing.T) {
	c := &ctors{fake: dcgmfake.New()}
	c.fake.Refuse(dcgm.ErrLibraryMissing)
	a, hook := newAuto(t, c)
	assert.Equal(t, autosource.NVML, a.Status().Active)
	assert.True(t, a.Status().Up)
	entry := hook.AllEntries()[0]
	assert.Equal(t, logrus.WarnLevel, entry.Level)
	assert.Contains(t, entry.Message, "using NVML")
	assert.ErrorIs(t, entry.Data[logrus.ErrorKey].(error), dcgm.ErrLibraryMissing, "the log says why")
	nvmlKeys := collectFrom(t, a, true)
	require.Error(t, a.PauseProfiling(), "no profiling lock without DCGM")

	c.fake.Refuse(nil)
	dcgmKeys := collectFrom(t, a, false)
	assert.Equal(t, autosource.DCGM, a.Status().Active)
	assert.Equal(t, nvmlKeys, dcgmKeys, "the same series across the switch")
	require.NoError(t, a.PauseProfiling())
}

func TestNeitherBackendIsAClearError(t *testing.T) {
	c := &ctors{fake: dcgmfake.New(), nvmlErr: errors.New("nvml: ERROR_LIBRARY_NOT_FOUND")}
	c.fake.Refuse(dcgm.ErrLibraryMissing)
	_, err := autosource.New(c.dcgm, c.nvml, nil)
	require.Error(t, err)
	assert.ErrorIs(t, err, dcgm.ErrLibraryMissing)
	assert.Contains(t, err.Error(), "libdcgm.so.4")
	assert.Contains(t, err.Error(), "ERROR_LIBRARY_NOT_FOUND")
}

func TestRealAdapterWithoutLibraryFallsBack(t *testing.T) {
	real := func() (source.Source, error) { return dcgm.New(godcgm.New(), dcgm.Config{}) }
	probe := godcgm.New()
	if err := probe.Connect(dcgm.ConnectParams{Mode: dcgm.ModeEmbedded}); err == nil {
		_ = probe.Disconnect()
		t.Skip("libdcgm.so.4 is installed here; this test covers hosts without it")
	}
	l, _ := test.NewNullLogger()
	a, err := autosource.New(real, func() (source.Source, error) { return newFakeNVML(), nil }, l, autosource.WithProbe(time.Hour, time.Hour))
	require.NoError(t, err)
	assert.Equal(t, autosource.NVML, a.Status().Active)
	require.NoError(t, a.Close())

	_, err = autosource.New(real, func() (source.Source, error) { return nil, errors.New("nvml: ERROR_LIBRARY_NOT_FOUND") }, l)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "libdcgm.so.4 not found")
	assert.Contains(t, err.Error(), "ERROR_LIBRARY_NOT_FOUND")
}

func TestNVMLWhileDCGMDownAndBack(t *testing.T) {
	before := runtime.NumGoroutine()
	c := &ctors{fake: dcgmfake.New()}
	l, _ := test.NewNullLogger()
	a, err := autosource.New(c.dcgm, c.nvml, l, autosource.WithProbe(5*time.Millisecond, 20*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, a.Watch(groups))
	first := collectFrom(t, a, false)

	for i := range 3 {
		c.fake.Kill()
		assert.Equal(t, first, collectFrom(t, a, true), "outage %d: NVML serves the same GPUs", i)
		st := a.Status()
		assert.Equal(t, autosource.NVML, st.Active)
		assert.True(t, st.Up, "NVML answers")

		c.fake.Restart()
		assert.Equal(t, first, collectFrom(t, a, false), "outage %d: DCGM serves again", i)
		assert.Equal(t, autosource.DCGM, a.Status().Active)
	}
	assert.Equal(t, int32(3), c.nvmlOpens.Load(), "NVML opened once per outage")

	require.NoError(t, a.Close())
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), before, "no goroutine leaked")
}

func TestSwitchReportsEntitiesChangedOnce(t *testing.T) {
	c := &ctors{fake: dcgmfake.New()}
	a, _ := newAuto(t, c)
	collectFrom(t, a, false)
	c.fake.Kill()
	rec := &dcgmfake.Recorder{}
	var changed int
	deadline := time.Now().Add(10 * time.Second)
	for a.Status().Active != autosource.NVML || changed == 0 {
		require.True(t, time.Now().Before(deadline))
		if err := a.Collect(context.Background(), 0, rec); errors.Is(err, source.ErrEntitiesChanged) {
			changed++
		}
		time.Sleep(time.Millisecond)
	}
	require.NoError(t, a.Collect(context.Background(), 0, rec))
	assert.Equal(t, 1, changed)
	assert.Len(t, a.Entities(), 2)
}
