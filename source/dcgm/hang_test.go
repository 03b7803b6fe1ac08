package dcgm_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/auto"
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/dcgm/dcgmfake"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

// callTimeout is the deadline of each host-engine call in these tests: the
// wall time a hung call holds before the source gives up on it.
const callTimeout = 200 * time.Millisecond

// answers runs f and reports whether it returned within the test's wait.
func answers(f func()) bool {
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	return testwait.Until(testwait.Timeout, func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
}

// TestHungHostEngineFreezesNothing: while a read hangs in a host engine that
// stopped answering (but did not refuse), Status answers at once; the read
// fails at its deadline with ErrConnectionLost and the source counts as
// down, and when the host engine answers again the source reconnects.
func TestHungHostEngineFreezesNothing(t *testing.T) {
	f, clk := newFake()
	l, _ := quietLog()
	cfg := testConfig(l, clk)
	cfg.CallTimeout = callTimeout
	s, err := dcgm.New(f, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { f.Unhang(); _ = s.Close() })
	require.NoError(t, s.Watch([]source.Group{group(100*time.Millisecond, 150)}))

	f.Hang()
	collected := make(chan error, 1)
	go func() { collected <- s.Collect(context.Background(), 0, &dcgmfake.Recorder{}) }()
	testwait.For(t, "the read to hang in the host engine", func() bool { return f.Hanging() == 1 })

	var st source.Status
	require.True(t, answers(func() { st = s.Status() }), "Status waits for the hung read")
	assert.True(t, st.Up, "still up until the deadline")
	require.True(t, answers(func() { s.Entities() }), "Entities waits for the hung read")

	var cerr error
	require.True(t, answers(func() { cerr = <-collected }), "the read has a deadline")
	require.Error(t, cerr)
	assert.True(t, errors.Is(cerr, dcgm.ErrConnectionLost), "%v", cerr)
	assert.Contains(t, cerr.Error(), "did not answer LatestValues within 200ms")
	assert.False(t, s.Status().Up)

	// While the hung call is still inside the host engine, no other joins it.
	cerr = s.Collect(context.Background(), 0, &dcgmfake.Recorder{})
	require.Error(t, cerr)
	assert.Equal(t, 1, f.Hanging(), "one goroutine at most is stuck in the host engine")

	f.Unhang()
	testwait.For(t, "the reconnect", func() bool {
		clk.Add(10 * time.Millisecond)
		return s.Status().Up
	})
}

// TestHungHostEngineFreezesNothingInAutoMode: a host engine that hangs at
// connect does not hold auto mode: DCGM fails at the deadline and NVML
// serves.
func TestHungHostEngineFreezesNothingInAutoMode(t *testing.T) {
	f, clk := newFake()
	f.Hang()
	t.Cleanup(f.Unhang)
	l, _ := quietLog()
	cfg := testConfig(l, clk)
	cfg.CallTimeout, cfg.ConnectTimeout = callTimeout, callTimeout
	nvml := sourcetest.NewGPUs(2, nil)
	nvml.NameValue = "nvml"
	var a *auto.Auto
	var err error
	require.True(t, answers(func() {
		a, err = auto.New(
			func() (source.Source, error) { return dcgm.New(f, cfg) },
			func() (source.Source, error) { return nvml, nil },
			l, auto.WithClock(clk))
	}), "auto mode waits for a hung host engine")
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	assert.Equal(t, auto.NVML, a.Status().Active)
	assert.Len(t, a.Entities(), 2)
}

// TestConnectHasItsOwnDeadline: an embedded host engine that takes longer
// to start than one call may take (GPUs without persistence mode) still
// connects within the connect deadline; one that takes longer than that
// fails with a message naming it. The deadline is wall time, as a hung cgo
// call is, so the test waits on it.
func TestConnectHasItsOwnDeadline(t *testing.T) {
	for _, tc := range []struct {
		name    string
		connect time.Duration
		ok      bool
	}{
		{"slow start within the connect deadline", 10 * callTimeout, true},
		{"past the connect deadline", callTimeout, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, clk := newFake()
			f.Hang()
			t.Cleanup(f.Unhang)
			l, _ := quietLog()
			cfg := testConfig(l, clk)
			cfg.CallTimeout, cfg.ConnectTimeout = callTimeout/4, tc.connect
			done := make(chan error, 1)
			go func() {
				s, err := dcgm.New(f, cfg)
				if err == nil {
					t.Cleanup(func() { _ = s.Close() })
				}
				done <- err
			}()
			testwait.For(t, "Connect to reach the host engine", func() bool { return f.Hanging() == 1 })
			// Longer than a call may take, shorter than the slow start's
			// connect deadline.
			<-time.After(2 * callTimeout)
			f.Unhang()
			var err error
			require.True(t, answers(func() { err = <-done }))
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.True(t, errors.Is(err, dcgm.ErrConnectionLost), "%v", err)
			assert.Contains(t, err.Error(), "did not answer Connect within 200ms")
		})
	}
}

func TestDefaultConnectTimeout(t *testing.T) {
	for _, tc := range []struct {
		mode dcgm.Mode
		want time.Duration
	}{
		{dcgm.ModeEmbedded, 2 * time.Minute},
		{dcgm.ModeStart, 2 * time.Minute},
		{dcgm.ModeRemote, 10 * time.Second},
	} {
		assert.Equal(t, tc.want, dcgm.DefaultConnectTimeout(tc.mode), tc.mode)
	}
}
