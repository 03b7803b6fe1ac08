package dcgm_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/dcgm/dcgmfake"
)

func TestDroppedConnectionReconnects(t *testing.T) {
	f, clk := newFake()
	s := newSource(t, f, group(10*time.Millisecond, fieldid.GPUTemp))
	rec := &dcgmfake.Recorder{}
	collectUntil(t, clk, s, 0, rec, func() bool { return len(rec.Values(fieldid.GPUTemp)) > 0 })
	f.Refuse(errors.New("refused for the test"))
	f.DropConnection()

	start := time.Now()
	err := s.Collect(context.Background(), 0, rec)
	require.ErrorIs(t, err, dcgm.ErrConnectionLost)
	st := s.Status()
	assert.False(t, st.Up)
	require.Error(t, st.Err)
	err = s.Collect(context.Background(), 0, rec)
	require.Error(t, err, "while down, Collect fails")
	assert.Less(t, time.Since(start), time.Second, "Collect fails fast while down")

	f.Refuse(nil)
	var changed bool
	collectUntil(t, clk, s, 0, rec, func() bool {
		err := s.Collect(context.Background(), 0, rec)
		changed = changed || errors.Is(err, source.ErrEntitiesChanged)
		return s.Status().Up && changed
	})
	assert.Equal(t, 2, f.Connects())
	n := len(rec.Values(fieldid.GPUTemp))
	collectUntil(t, clk, s, 0, rec, func() bool { return len(rec.Values(fieldid.GPUTemp)) > n })
	require.NoError(t, s.Collect(context.Background(), 0, rec), "ErrEntitiesChanged comes once")
}

// TestHostEngineRestartLoop kills and restarts the host engine 20 times while
// the source is read as the engine reads it: every kill is noticed, every
// restart is survived, and the series return within two intervals of the
// reconnect, counted on the clock the source runs on.
func TestHostEngineRestartLoop(t *testing.T) {
	const interval = 50 * time.Millisecond
	before := runtime.NumGoroutine()
	f, clk := newFake()
	l, _ := quietLog()
	s, err := dcgm.New(f, testConfig(l, clk))
	require.NoError(t, err)
	require.NoError(t, s.Watch([]source.Group{group(interval, fieldid.GPUTemp)}))

	rec := &dcgmfake.Recorder{}
	ctx := context.Background()
	latest := func() int64 {
		v := rec.Values(fieldid.GPUTemp)
		if len(v) == 0 {
			return 0
		}
		return v[len(v)-1].TS
	}
	// Backoff is capped at 10ms (+20% jitter) in testConfig; a restart may
	// wait that long before the reconnect. The engine reads each interval;
	// reading every fifth of one only makes the measurement finer.
	const step = interval / 5
	const budget = 2*interval + 12*time.Millisecond + step
	for i := range 20 {
		f.Kill()
		require.ErrorIs(t, s.Collect(ctx, 0, rec), dcgm.ErrConnectionLost, "restart %d: the kill is noticed", i)
		require.False(t, s.Status().Up)
		restarted := clk.Now()
		f.Restart()
		var waited time.Duration
		testwait.For(t, "series to return", func() bool {
			if err := s.Collect(ctx, 0, rec); errors.Is(err, source.ErrEntitiesChanged) {
				assert.Len(t, s.Entities(), 2)
			}
			if latest() >= restarted.UnixNano() {
				return true
			}
			// Time moves only while the source waits on it: on its
			// backoff timer, or for the host engine's next sample.
			if s.Status().Up || clk.Timers() > 0 {
				clk.Add(step)
				waited += step
			}
			return false
		})
		assert.LessOrEqual(t, waited, budget, "restart %d: series back within two intervals", i)
	}
	assert.Equal(t, 21, f.Connects())
	require.NoError(t, s.Close())
	assert.True(t, testwait.Until(5*time.Second, func() bool { return runtime.NumGoroutine() <= before }), "no goroutine leaked")
}
