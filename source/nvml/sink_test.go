package nvml

import (
	"io"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	timesource "github.com/gpuscope/gpuscope/internal/clock"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/nvml/nvmlfake"
)

type sample struct {
	key   string
	field uint16
}

type xidRecord struct {
	key string
	xid uint64
}

// recordingSink keeps everything a source hands over, for assertions.
type recordingSink struct {
	mu          sync.Mutex
	values      map[sample]float64
	texts       map[sample]string
	unsupported map[sample][]string
	fails       map[sample][]error
	xids        []xidRecord
	p2p         map[string][]source.P2PLink
}

func newSink() *recordingSink {
	return &recordingSink{values: map[sample]float64{}, texts: map[sample]string{},
		unsupported: map[sample][]string{}, fails: map[sample][]error{}}
}

func (s *recordingSink) Value(e *source.Entity, f uint16, _ int64, v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.values[sample{e.Key(), f}] = v
}

func (s *recordingSink) Text(e *source.Entity, f uint16, v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.texts[sample{e.Key(), f}] = v
}

func (s *recordingSink) Unsupported(e *source.Entity, f uint16, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := sample{e.Key(), f}
	s.unsupported[k] = append(s.unsupported[k], reason)
}

func (s *recordingSink) Fail(e *source.Entity, f uint16, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := sample{e.Key(), f}
	s.fails[k] = append(s.fails[k], err)
}

func (s *recordingSink) XID(e *source.Entity, xid uint64, _ int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.xids = append(s.xids, xidRecord{e.Key(), xid})
}

func (s *recordingSink) Health(*source.Entity, int64, []source.HealthResult) {}

func (s *recordingSink) P2P(e *source.Entity, _ int64, links []source.P2PLink) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p2p == nil {
		s.p2p = map[string][]source.P2PLink{}
	}
	s.p2p[e.Key()] = links
}

func (s *recordingSink) value(e *source.Entity, f uint16) (float64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.values[sample{e.Key(), f}]
	return v, ok
}

func fields(ids ...uint16) []counters.Field {
	out := make([]counters.Field, len(ids))
	for i, id := range ids {
		out[i] = counters.Field{Name: "field", ID: id, Type: counters.Gauge, Line: i + 1}
	}
	return out
}

func quietLogger() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return logrus.NewEntry(l)
}

// steppingClock moves a second forward at each reading, so that
// collections a test makes back to back are a second apart, as a 1 s
// group's are: GPM measures only between samples at least 100 ms apart.
type steppingClock struct {
	mu  sync.Mutex
	now time.Time
}

func newSteppingClock() *steppingClock { return &steppingClock{now: time.Unix(1_750_000_000, 0)} }

func (c *steppingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Second)
	return c.now
}

func (c *steppingClock) NewTimer(d time.Duration) timesource.Timer {
	return timesource.Real.NewTimer(d)
}

// open starts a source on the fake, watching one group of ids, and closes
// it at the end of the test.
func open(t *testing.T, f *nvmlfake.Fake, interval time.Duration, ids ...uint16) *Source {
	t.Helper()
	s, err := New(Config{Lib: f, Logger: quietLogger(), RetryBackoff: 20 * time.Millisecond,
		ProcessInterval: time.Millisecond, EventWait: 20 * time.Millisecond, Clock: newSteppingClock()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Watch([]source.Group{source.GroupOf(interval, fields(ids...))}))
	return s
}

func gpuEntity(t *testing.T, s *Source, i int) *source.Entity {
	t.Helper()
	for _, e := range s.Entities() {
		if e.Kind == source.GPU && e.GPU == i {
			return e
		}
	}
	t.Fatalf("GPU %d not among the entities", i)
	return nil
}
