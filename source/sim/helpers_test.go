package sim

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/source"
)

// clock is a settable test clock.
type clock struct{ t time.Time }

func (c *clock) Now() time.Time      { return c.t }
func (c *clock) Add(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock               { return &clock{t: time.Unix(1_750_000_000, 0)} }
func fieldsOf(ids ...uint16) []counters.Field {
	out := make([]counters.Field, len(ids))
	for i, id := range ids {
		out[i] = counters.Field{Name: nameOf(id), ID: id, Type: counters.Gauge}
	}
	return out
}

func nameOf(id uint16) string {
	if f, ok := counters.ByID(id); ok {
		return f.Name
	}
	return "UNKNOWN"
}

type key struct {
	ent   string
	field uint16
}

type sample struct {
	ts int64
	v  float64
}

type xidRec struct {
	ent string
	xid uint64
	ts  int64
}

// recSink records everything a source hands over.
type recSink struct {
	values map[key][]sample
	texts  map[key]string
	unsup  map[key]int
	// reasons holds the latest reason given for each unsupported series.
	reasons map[key]string
	fails   int
	xids    []xidRec
	health  map[string][]source.HealthResult
	p2p     map[string][]source.P2PLink
}

func newRec() *recSink {
	return &recSink{values: map[key][]sample{}, texts: map[key]string{}, unsup: map[key]int{}}
}

func (r *recSink) Value(e *source.Entity, f uint16, ts int64, v float64) {
	k := key{e.Key(), f}
	r.values[k] = append(r.values[k], sample{ts, v})
}
func (r *recSink) Text(e *source.Entity, f uint16, s string) { r.texts[key{e.Key(), f}] = s }
func (r *recSink) Unsupported(e *source.Entity, f uint16, reason string) {
	r.unsup[key{e.Key(), f}]++
	if r.reasons == nil {
		r.reasons = map[key]string{}
	}
	r.reasons[key{e.Key(), f}] = reason
}
func (r *recSink) Fail(*source.Entity, uint16, error) { r.fails++ }
func (r *recSink) XID(e *source.Entity, x uint64, ts int64) {
	r.xids = append(r.xids, xidRec{e.Key(), x, ts})
}
func (r *recSink) P2P(e *source.Entity, _ int64, l []source.P2PLink) {
	if r.p2p == nil {
		r.p2p = map[string][]source.P2PLink{}
	}
	r.p2p[e.Key()] = l
}
func (r *recSink) Health(e *source.Entity, _ int64, h []source.HealthResult) {
	if r.health == nil {
		r.health = map[string][]source.HealthResult{}
	}
	r.health[e.Key()] = h
}

// last returns the latest value of a field on an entity.
func (r *recSink) last(t *testing.T, e *source.Entity, f uint16) float64 {
	t.Helper()
	s := r.values[key{e.Key(), f}]
	require.NotEmpty(t, s, "no value of %s on %s", nameOf(f), e.Key())
	return s[len(s)-1].v
}

// countSink counts samples without allocating.
type countSink struct{ n, text, unsup, xid, health int }

func (c *countSink) Value(*source.Entity, uint16, int64, float64) { c.n++ }
func (c *countSink) Text(*source.Entity, uint16, string)          { c.text++ }
func (c *countSink) Unsupported(*source.Entity, uint16, string)   { c.unsup++ }
func (c *countSink) Fail(*source.Entity, uint16, error)           {}
func (c *countSink) XID(*source.Entity, uint64, int64)            { c.xid++ }
func (c *countSink) P2P(*source.Entity, int64, []source.P2PLink)  { c.n++ }
func (c *countSink) Health(*source.Entity, int64, []source.HealthResult) {
	c.health++
}

// newSim builds a source on a test clock, watching one group of fields.
func newSim(t testing.TB, cfg Config, ids ...uint16) (*Source, *clock) {
	t.Helper()
	c := newClock()
	cfg.Now = c.Now
	s, err := New(cfg)
	require.NoError(t, err)
	require.NoError(t, s.Watch([]source.Group{source.GroupOf(time.Second, fieldsOf(ids...))}))
	return s, c
}

// run collects group 0 every step for the given duration.
func run(t testing.TB, s *Source, c *clock, sink source.Sink, step, total time.Duration) {
	t.Helper()
	for d := time.Duration(0); d <= total; d += step {
		require.NoError(t, s.Collect(context.Background(), 0, sink))
		c.Add(step)
	}
}

func gpuEntities(s *Source) []*source.Entity {
	var out []*source.Entity
	for _, e := range s.Entities() {
		if e.Kind == source.GPU {
			out = append(out, e)
		}
	}
	return out
}
