package dcgmfake

import (
	"strconv"
	"sync"

	"github.com/gpuscope/gpuscope/source"
)

// Sample is one value a Recorder received.
type Sample struct {
	Key   string
	Field uint16
	TS    int64
	V     float64
}

// XIDEvent is one XID a Recorder received.
type XIDEvent struct {
	Key string
	XID uint64
	TS  int64
}

// Recorder is a source.Sink that keeps what it is handed, for tests. It
// keeps at most Limit values (default 1<<16), dropping the oldest.
type Recorder struct {
	mu          sync.Mutex
	Limit       int
	values      []Sample
	texts       map[string]string
	xids        []XIDEvent
	unsupported map[string]string
	fails       int
	health      map[string][]source.HealthResult
	p2p         map[string][]source.P2PLink
}

var _ source.Sink = (*Recorder)(nil)

func ukey(e *source.Entity, field uint16) string {
	return e.Key() + "/" + strconv.Itoa(int(field))
}

// Value implements source.Sink.
func (r *Recorder) Value(e *source.Entity, field uint16, ts int64, v float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	limit := r.Limit
	if limit <= 0 {
		limit = 1 << 16
	}
	if len(r.values) >= limit {
		r.values = append(r.values[:0], r.values[len(r.values)-limit/2:]...)
	}
	r.values = append(r.values, Sample{Key: e.Key(), Field: field, TS: ts, V: v})
}

// Text implements source.Sink.
func (r *Recorder) Text(e *source.Entity, field uint16, s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.texts == nil {
		r.texts = map[string]string{}
	}
	r.texts[ukey(e, field)] = s
}

// TextOf returns the last text of field on the entity with key.
func (r *Recorder) TextOf(key string, field uint16) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.texts[key+"/"+strconv.Itoa(int(field))]
}

// Unsupported implements source.Sink.
func (r *Recorder) Unsupported(e *source.Entity, field uint16, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unsupported == nil {
		r.unsupported = map[string]string{}
	}
	r.unsupported[ukey(e, field)] = reason
}

// Fail implements source.Sink.
func (r *Recorder) Fail(*source.Entity, uint16, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fails++
}

// XID implements source.Sink.
func (r *Recorder) XID(e *source.Entity, xid uint64, ts int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.xids = append(r.xids, XIDEvent{Key: e.Key(), XID: xid, TS: ts})
}

// Health implements source.Sink: it keeps the latest check per entity.
func (r *Recorder) Health(e *source.Entity, _ int64, results []source.HealthResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.health == nil {
		r.health = map[string][]source.HealthResult{}
	}
	r.health[e.Key()] = results
}

// P2P implements source.Sink: it keeps the latest status per entity.
func (r *Recorder) P2P(e *source.Entity, _ int64, links []source.P2PLink) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.p2p == nil {
		r.p2p = map[string][]source.P2PLink{}
	}
	r.p2p[e.Key()] = links
}

// P2POf returns the latest P2P status of the entity with key, and whether
// there is one.
func (r *Recorder) P2POf(key string) ([]source.P2PLink, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, ok := r.p2p[key]
	return l, ok
}

// HealthOf returns the latest health check of the entity with key.
func (r *Recorder) HealthOf(key string) []source.HealthResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.health[key]
}

// Values returns the values of field received so far, in order.
func (r *Recorder) Values(field uint16) []Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Sample
	for _, s := range r.values {
		if s.Field == field {
			out = append(out, s)
		}
	}
	return out
}

// All returns every value received so far.
func (r *Recorder) All() []Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Sample(nil), r.values...)
}

// XIDs returns the XID events received so far.
func (r *Recorder) XIDs() []XIDEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]XIDEvent(nil), r.xids...)
}

// UnsupportedReasons returns the reason each entity key/field was reported
// unsupported with, keyed "entitykey/field".
func (r *Recorder) UnsupportedReasons() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]string, len(r.unsupported))
	for k, v := range r.unsupported {
		out[k] = v
	}
	return out
}

// Fails counts Fail calls.
func (r *Recorder) Fails() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fails
}
