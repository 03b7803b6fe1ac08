// Package sourcetest provides a scripted source for tests and benchmarks of
// everything above the sources: values come from a function, so a test knows
// exactly what the engine must export.
package sourcetest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/clock"
	"github.com/gpuscope/gpuscope/source"
)

// ValueFunc returns the value of a field on an entity at a time, and whether
// the entity has the field at all.
type ValueFunc func(e *source.Entity, field uint16, ts time.Time) (float64, bool)

// Source is a scripted source. Its exported fields may be changed between
// Collect calls under Lock.
type Source struct {
	sync.Mutex
	NameValue string
	Ents      []*source.Entity
	Values    ValueFunc
	// Texts are the values of label-type fields, by field ID.
	Texts map[uint16]string
	// TextsEverywhere hands Texts to every entity, as DCGM does for a field
	// whose level applies to switches and links too; by default only GPUs
	// get them.
	TextsEverywhere bool
	// Now is the sample clock; time.Now when nil.
	Now func() time.Time
	// XIDs are handed to the sink at the next Collect of a group with
	// the XID errors field, then cleared.
	XIDs []XID
	// Health is the health check handed to the sink for each GPU at every
	// Collect of a group that asks for health checks; a GPU without an
	// entry passes every watch.
	Health map[*source.Entity][]source.HealthResult
	// Down makes Collect fail and Status report the source down.
	Down bool
	// WatchErr is returned by the next Watch calls.
	WatchErr error
	// ChangeEntities makes the next Collect return ErrEntitiesChanged.
	ChangeEntities bool
	// Procs is what Processes lists; nil says the source cannot list
	// processes now (source.ProcessLister).
	Procs []source.Process
	// ProcessCalls counts the calls of Processes.
	ProcessCalls int

	groups   []source.Group
	Watches  int
	Collects int
}

// XID is one scripted XID event.
type XID struct {
	Entity *source.Entity
	Code   uint64
	At     time.Time
}

// NewGPUs returns a source of n GPUs whose every field reads value().
func NewGPUs(n int, values ValueFunc) *Source {
	s := &Source{NameValue: "test", Values: values}
	for i := 0; i < n; i++ {
		e := source.NewGPU(i, fmt.Sprintf("GPU-%08d-0000-0000-0000-000000000000", i), fmt.Sprintf("00000000:%02X:00.0", i+1), "NVIDIA H100 80GB HBM3")
		s.Ents = append(s.Ents, &e)
	}
	return s
}

func (s *Source) Name() string { return s.NameValue }

func (s *Source) Watch(groups []source.Group) error {
	s.Lock()
	defer s.Unlock()
	s.Watches++
	if s.WatchErr != nil {
		return s.WatchErr
	}
	s.groups = groups
	return nil
}

func (s *Source) Entities() []*source.Entity {
	s.Lock()
	defer s.Unlock()
	return append([]*source.Entity(nil), s.Ents...)
}

// Groups returns the groups of the last accepted Watch.
func (s *Source) Groups() []source.Group {
	s.Lock()
	defer s.Unlock()
	return s.groups
}

func (s *Source) Collect(ctx context.Context, group int, sink source.Sink) error {
	s.Lock()
	defer s.Unlock()
	s.Collects++
	if s.Down {
		return fmt.Errorf("scripted source is down")
	}
	if group >= len(s.groups) {
		return fmt.Errorf("no group %d", group)
	}
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	ts := now.UnixNano()
	for _, f := range s.groups[group].Fields {
		for _, e := range s.Ents {
			if t, ok := s.Texts[f.ID]; ok {
				// Text fields describe the board, so only GPUs carry them.
				if e.Kind == source.GPU || s.TextsEverywhere {
					sink.Text(e, f.ID, t)
				}
				continue
			}
			if f.ID == fieldid.ExpP2PStatus {
				if e.Kind == source.GPU {
					sink.P2P(e, ts, s.p2pOf(e))
				}
				continue
			}
			if f.ID == fieldid.XIDErrors {
				for _, x := range s.XIDs {
					if x.Entity == e {
						sink.XID(e, x.Code, x.At.UnixNano())
						sink.Value(e, f.ID, x.At.UnixNano(), float64(x.Code))
					}
				}
				continue
			}
			v, ok := s.Values(e, f.ID, now)
			if !ok {
				sink.Unsupported(e, f.ID, "scripted as unsupported")
				continue
			}
			sink.Value(e, f.ID, ts, v)
		}
		if f.ID == fieldid.XIDErrors {
			s.XIDs = nil
		}
	}
	if s.groups[group].Health {
		for _, e := range s.Ents {
			if e.Kind != source.GPU {
				continue
			}
			h, ok := s.Health[e]
			if !ok {
				h = source.PassingHealth()
			}
			sink.Health(e, ts, h)
		}
	}
	if s.ChangeEntities {
		s.ChangeEntities = false
		return source.ErrEntitiesChanged
	}
	return nil
}

func (s *Source) Status() source.Status {
	s.Lock()
	defer s.Unlock()
	if s.Down {
		return source.Status{Up: false, Err: fmt.Errorf("scripted down")}
	}
	return source.Status{Up: true}
}

func (s *Source) Close() error { return nil }

// Processes implements source.ProcessLister with a copy of Procs.
func (s *Source) Processes() []source.Process {
	s.Lock()
	defer s.Unlock()
	s.ProcessCalls++
	if s.Procs == nil {
		return nil
	}
	return append([]source.Process{}, s.Procs...)
}

// Clock is a settable clock for tests that drive sampling by hand.
type Clock = clock.Fake

// NewClock returns a clock standing at start.
func NewClock(start time.Time) *Clock { return clock.NewFake(start) }

// p2pOf is a GPU's NVLink P2P status towards every other scripted GPU: OK.
func (s *Source) p2pOf(e *source.Entity) []source.P2PLink {
	var out []source.P2PLink
	for _, o := range s.Ents {
		if o.Kind == source.GPU && o != e {
			out = append(out, source.P2PLink{Peer: o.GPU, Status: source.P2POK})
		}
	}
	return out
}
