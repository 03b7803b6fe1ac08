package dcgm_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/dcgm/dcgmfake"
)

func TestProfilingSupportPerGPU(t *testing.T) {
	f, clk := newFake(dcgmfake.WithProfiling(map[uint][]uint16{0: {fieldid.ProfSMActive, fieldid.ProfPipeTensorActive}}))
	s := newSource(t, f, group(10*time.Millisecond, fieldid.GPUTemp, fieldid.ProfSMActive, fieldid.ProfPipeTensorActive))
	rec := &dcgmfake.Recorder{}
	g0, g1 := "gpu/GPU-00000000-0000-0000-0000-000000000000", "gpu/GPU-11111111-1111-1111-1111-111111111111"
	has := func(key string, field uint16) bool {
		for _, v := range rec.Values(field) {
			if v.Key == key {
				return true
			}
		}
		return false
	}
	collectUntil(t, clk, s, 0, rec, func() bool { return has(g0, fieldid.ProfSMActive) && has(g1, fieldid.GPUTemp) })
	assert.False(t, has(g1, fieldid.ProfSMActive), "GPU 1 has no profiling")
	assert.Equal(t, map[string]string{
		g1 + "/" + idStr(fieldid.ProfSMActive):         "profiling metric not supported by this GPU",
		g1 + "/" + idStr(fieldid.ProfPipeTensorActive): "profiling metric not supported by this GPU",
	}, rec.UnsupportedReasons())
	assert.Equal(t, 2, f.FieldGroupsCreated(), "the mixed node needs a second field group for the GPU without profiling")
}

func TestProfilingErrorsSayWhatToDo(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		reason   string
		logWords string
	}{
		{"module not loaded", fmt.Errorf("reading metric groups: %w", dcgm.ErrModuleNotLoaded), "DCGM profiling module not loaded", "libdcgmmoduleprofiling.so"},
		{"in use", fmt.Errorf("reading metric groups: %w", dcgm.ErrInUse), "profiling counters held by another profiler", "Nsight"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, clk := newFake(dcgmfake.WithProfiling(map[uint][]uint16{0: {fieldid.ProfSMActive}, 1: {fieldid.ProfSMActive}}))
			f.SetProfilingError(tt.err)
			l, hook := quietLog()
			s, err := dcgm.New(f, testConfig(l, clk))
			require.NoError(t, err)
			defer s.Close()
			require.NoError(t, s.Watch([]source.Group{group(10*time.Millisecond, fieldid.GPUTemp, fieldid.ProfSMActive)}))
			rec := &dcgmfake.Recorder{}
			collectUntil(t, clk, s, 0, rec, func() bool { return len(rec.Values(fieldid.GPUTemp)) >= 2 })
			assert.Empty(t, rec.Values(fieldid.ProfSMActive))
			reasons := rec.UnsupportedReasons()
			assert.Equal(t, tt.reason, reasons["gpu/GPU-00000000-0000-0000-0000-000000000000/"+idStr(fieldid.ProfSMActive)])
			var lines int
			for _, e := range hook.AllEntries() {
				if e.Level == logrus.ErrorLevel {
					lines++
					assert.Contains(t, e.Message, tt.logWords)
				}
			}
			assert.Equal(t, 2, lines, "one log line per GPU")
		})
	}
}

func TestPauseResumeProfiling(t *testing.T) {
	f, clk := newFake(dcgmfake.WithProfiling(map[uint][]uint16{0: {fieldid.ProfSMActive}, 1: {fieldid.ProfSMActive}}))
	s := newSource(t, f, group(10*time.Millisecond, fieldid.ProfSMActive, fieldid.GPUTemp))
	rec := &dcgmfake.Recorder{}
	collectUntil(t, clk, s, 0, rec, func() bool { return len(rec.Values(fieldid.ProfSMActive)) > 0 })

	require.NoError(t, s.PauseProfiling())
	assert.True(t, f.Paused())
	assert.True(t, s.Status().ProfilingPaused)
	require.NoError(t, s.Collect(context.Background(), 0, rec)) // drains samples taken before the pause
	n, temps := len(rec.Values(fieldid.ProfSMActive)), len(rec.Values(fieldid.GPUTemp))
	for range 3 {
		clk.Add(10 * time.Millisecond)
		require.NoError(t, s.Collect(context.Background(), 0, rec))
	}
	assert.Equal(t, temps+2*3, len(rec.Values(fieldid.GPUTemp)), "three intervals passed: three samples of the other field on each GPU")
	assert.Equal(t, n, len(rec.Values(fieldid.ProfSMActive)), "no profiling values while paused")

	// A host engine restart forgets the pause; the reconnect takes it again.
	f.Kill()
	require.Error(t, s.Collect(context.Background(), 0, rec))
	f.Restart()
	collectUntil(t, clk, s, 0, rec, func() bool { return s.Status().Up })
	assert.True(t, f.Paused(), "pause re-applied after reconnect")

	require.NoError(t, s.ResumeProfiling())
	assert.False(t, s.Status().ProfilingPaused)
	collectUntil(t, clk, s, 0, rec, func() bool { return len(rec.Values(fieldid.ProfSMActive)) > n })
}

func TestPauseWithoutProfilingModule(t *testing.T) {
	f, _ := newFake()
	f.SetPauseError(fmt.Errorf("dcgmProfPause: %w", dcgm.ErrModuleNotLoaded))
	s := newSource(t, f, group(10*time.Millisecond, fieldid.GPUTemp))
	err := s.PauseProfiling()
	require.ErrorIs(t, err, dcgm.ErrModuleNotLoaded)
	assert.Contains(t, err.Error(), "no profiling lock to release")
	assert.False(t, s.Status().ProfilingPaused)
}
