package dcgm_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/clock"
	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/dcgm/dcgmfake"
)

// group is the group the engine would watch for these fields of a counters
// file.
func group(iv time.Duration, ids ...uint16) source.Group {
	var fields []counters.Field
	for _, id := range ids {
		fields = append(fields, counters.Field{ID: id, Name: fmt.Sprint(id), Type: counters.Gauge})
	}
	return source.GroupOf(iv, fields)
}

// epoch is where the tests' fake clocks start.
var epoch = time.Unix(1_750_000_000, 0)

// newFake returns a fake host engine sampling on a fake clock; the source
// under test gets the same clock (testConfig), so a test decides when
// samples are taken and when backoffs end by moving it.
func newFake(opts ...dcgmfake.Option) (*dcgmfake.Fake, *clock.Fake) {
	clk := clock.NewFake(epoch)
	return dcgmfake.New(append([]dcgmfake.Option{dcgmfake.WithClock(clk)}, opts...)...), clk
}

func testConfig(log logrus.FieldLogger, clk clock.Clock) dcgm.Config {
	return dcgm.Config{
		Mode: dcgm.ModeEmbedded, Window: time.Second,
		BackoffInitial: 2 * time.Millisecond, BackoffMax: 10 * time.Millisecond, Log: log, Clock: clk,
	}
}

func quietLog() (*logrus.Logger, *test.Hook) {
	l, h := test.NewNullLogger()
	l.SetLevel(logrus.DebugLevel)
	return l, h
}

func newSource(t *testing.T, f *dcgmfake.Fake, groups ...source.Group) *dcgm.Source {
	t.Helper()
	l, _ := quietLog()
	s, err := dcgm.New(f, testConfig(l, f.Clock()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Watch(groups))
	return s
}

// collectUntil collects group, moving clk 5 ms between reads, until cond
// holds. Reads that depend only on the clock finish at once; a reconnect,
// which runs on the source's own goroutine, is waited for.
func collectUntil(t *testing.T, clk *clock.Fake, s *dcgm.Source, g int, sink source.Sink, cond func() bool) {
	t.Helper()
	testwait.For(t, "the collected samples", func() bool {
		if cond() {
			return true
		}
		err := s.Collect(context.Background(), g, sink)
		if err != nil && !errors.Is(err, source.ErrEntitiesChanged) {
			t.Logf("collect: %v", err)
		}
		if cond() {
			return true
		}
		clk.Add(5 * time.Millisecond)
		return false
	})
}

func TestConnectErrorsNameModeAndCause(t *testing.T) {
	tests := []struct {
		name  string
		cfg   dcgm.Config
		setup func(f *dcgmfake.Fake)
		want  []string
		is    error
	}{
		{"library missing", dcgm.Config{Mode: dcgm.ModeEmbedded},
			func(f *dcgmfake.Fake) { f.Refuse(dcgm.ErrLibraryMissing) }, []string{"embedded mode", "libdcgm.so.4"}, dcgm.ErrLibraryMissing},
		{"host engine not listening", dcgm.Config{RemoteHostengine: "gpu-node-3"},
			func(f *dcgmfake.Fake) { f.Kill() }, []string{"remote mode (host engine at gpu-node-3:5555)", "not listening"}, dcgm.ErrNotListening},
		{"unix socket", dcgm.Config{RemoteHostengine: "unix:///run/nvidia/he.sock"},
			func(f *dcgmfake.Fake) { f.Kill() }, []string{"host engine socket /run/nvidia/he.sock"}, dcgm.ErrNotListening},
		{"version mismatch", dcgm.Config{Mode: dcgm.ModeStart},
			func(f *dcgmfake.Fake) { f.Refuse(dcgm.ErrVersionMismatch) }, []string{"start mode", "version mismatch"}, dcgm.ErrVersionMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := newFake()
			tt.setup(f)
			l, _ := quietLog()
			tt.cfg.Log = l
			_, err := dcgm.New(f, tt.cfg)
			require.Error(t, err)
			require.ErrorIs(t, err, tt.is)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		cfg  dcgm.Config
		want string
	}{
		{dcgm.Config{Mode: "cloud"}, `mode "cloud": want one of embedded, remote, start`},
		{dcgm.Config{Mode: dcgm.ModeRemote}, "remote mode needs a host engine address"},
		{dcgm.Config{Mode: dcgm.ModeEmbedded, RemoteHostengine: "h:5555"}, `only used in remote mode, not embedded mode (address "h:5555")`},
		{dcgm.Config{RemoteHostengine: "h:1:2"}, `host engine address "h:1:2"`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			_, err := dcgm.New(dcgmfake.New(), tt.cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// idStr is a field ID as the recorder's keys spell it.
func idStr(id uint16) string { return strconv.Itoa(int(id)) }
