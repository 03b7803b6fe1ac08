package dcgm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
)

// Collect implements source.Source: it hands every sample kept since the
// previous Collect of the group to sink.
func (s *Source) Collect(ctx context.Context, group int, sink source.Sink) error {
	s.mu.Lock()
	if err := s.precheck(group); err != nil {
		s.mu.Unlock()
		return err
	}
	gen := s.gen
	s.mu.Unlock()

	// Plans, cursors and the connection change only under clientMu, so
	// the reads below need no mu: Status and Entities answer while a read
	// is outstanding.
	s.clientMu.Lock()
	defer s.clientMu.Unlock()
	if s.cfg.BindUnbindPoll > 0 && s.pollGPUs() {
		return fmt.Errorf("dcgm: GPUs bound or unbound: %w", source.ErrEntitiesChanged)
	}
	s.mu.Lock()
	if s.gen != gen {
		if err := s.precheck(group); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	p := s.plans[group]
	s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	sink = p.derive.Sink(group, sink)
	s.refreshProcesses()
	for _, pu := range p.pending {
		sink.Unsupported(pu.e, pu.field, pu.reason)
	}
	p.pending = nil

	refused, skipped, err := s.readCursors(p, sink)
	if err != nil {
		return err
	}
	if len(refused) > 0 {
		if err := s.dropRefused(refused, sink); err != nil {
			return err
		}
	}
	if p.health {
		if err := s.collectHealth(sink); err != nil {
			return err
		}
	}
	if p.p2p {
		if err := s.collectP2P(sink); err != nil {
			return err
		}
	}
	return skipped
}

// readCursors reads every watched group of the plan: the latest values of
// most fields, every sample since the last read of the event fields. It
// returns the pairs the host engine refused, and an error that says the
// samples until now were skipped, or one that ends the collection.
func (s *Source) readCursors(p *groupPlan, sink source.Sink) (refused []refusal, skipped, err error) {
	for i := range p.cursors {
		cur := &p.cursors[i]
		if !cur.g.events {
			r, err := s.readLatest(p, cur.g, cur.since, sink)
			if err != nil {
				s.mu.Lock()
				s.handleErr(err)
				s.mu.Unlock()
				return nil, nil, fmt.Errorf("dcgm: reading fields every %s: %w", p.interval, err)
			}
			refused = append(refused, r...)
			continue
		}
		vals, next, err := s.client.ValuesSince(cur.g.group, cur.g.fieldGroup, cur.since)
		if err != nil && !errors.Is(err, ErrTooManyValues) {
			// DCGM fails the whole read for one refused pair: find them
			// and read on without them.
			if r := s.findRefused(p, cur.g, err); len(r) > 0 {
				refused = append(refused, r...)
				continue
			}
		}
		if errors.Is(err, ErrTooManyValues) {
			// The host engine holds more samples since the read position
			// than one read returns, and reading from there would fail
			// every time: skip the backlog and read on from now.
			// Positions are inclusive, as the ones the host engine hands out
			// (the last sample's time + 1).
			now := s.cfg.Clock.Now().UnixMicro() + 1
			cur.since = max(cur.since, now)
			s.since[p.interval] = max(s.since[p.interval], cur.since)
			skipped = fmt.Errorf("dcgm: reading fields every %s: %w; the samples until now are skipped", p.interval, err)
			continue
		}
		if err != nil {
			s.mu.Lock()
			s.handleErr(err)
			s.mu.Unlock()
			return nil, nil, fmt.Errorf("dcgm: reading fields every %s: %w", p.interval, err)
		}
		s.deliver(p, vals, sink)
		if next > cur.since {
			cur.since = next
			s.since[p.interval] = max(s.since[p.interval], next)
		}
	}
	return refused, skipped, nil
}

// failGPUs handles a failed per-GPU call (what) of an exporter field: an
// error that took the host engine away ends the collection; otherwise every
// GPU's field is reported failed and the collection goes on.
func (s *Source) failGPUs(sink source.Sink, field uint16, what string, err error) error {
	s.mu.Lock()
	s.handleErr(err)
	up := s.up
	s.mu.Unlock()
	if !up {
		return fmt.Errorf("dcgm: %s: %w", what, err)
	}
	for _, g := range s.conn.gpus {
		sink.Fail(s.conn.gpuEnt[g.ID], field, err)
	}
	return nil
}

// collectP2P reads the NVLink P2P matrix and hands each GPU its row, as
// dcgm-exporter does (internal/pkg/collector/p2p_status_collector.go): row
// i is GPU i, column j the peer GPU j, the diagonal left out.
func (s *Source) collectP2P(sink source.Sink) error {
	c := s.conn
	m, err := s.client.NvLinkP2PStatus()
	if err != nil {
		return s.failGPUs(sink, fieldid.ExpP2PStatus, "NVLink P2P status", err)
	}
	now := s.cfg.Clock.Now().UnixNano()
	for i, row := range m {
		e := c.gpuEnt[uint(i)]
		if e == nil {
			continue
		}
		links := make([]source.P2PLink, 0, len(row))
		for j, st := range row {
			if j != i {
				links = append(links, source.P2PLink{Peer: j, Status: st})
			}
		}
		sink.P2P(e, now, links)
	}
	return nil
}

// precheck says whether Collect can read now. Called with mu held.
func (s *Source) precheck(group int) error {
	switch {
	case s.closed:
		return errors.New("dcgm: source is closed")
	case !s.up:
		return fmt.Errorf("dcgm: host engine unavailable: %w", s.err)
	case s.changed:
		s.changed = false
		return fmt.Errorf("dcgm: reconnected to the host engine: %w", source.ErrEntitiesChanged)
	case group < 0 || group >= len(s.plans):
		return fmt.Errorf("dcgm: no watched group %d (have %d)", group, len(s.plans))
	}
	return nil
}

// deliver hands the values of the plan's fields to the sink, each on the
// entities its level applies to, leaving out DCGM's blanks.
func (s *Source) deliver(p *groupPlan, vals []Value, sink source.Sink) {
	for i := range vals {
		v := &vals[i]
		if !p.fields[v.FieldID] {
			continue
		}
		e := s.conn.byRef[v.Entity]
		if e == nil || !applies(fieldLevel(v.FieldID), e.Kind) {
			continue
		}
		switch classify(v) {
		case valueBlank:
			continue
		case valueUnsupported:
			// DCGM keeps saying so every sample; the engine reports it once.
			sink.Unsupported(e, v.FieldID, "DCGM reports the field as not supported")
			continue
		}
		ts := v.TS * int64(time.Microsecond)
		if v.Kind == KindString {
			sink.Text(e, v.FieldID, v.Str)
			continue
		}
		if v.FieldID == fieldid.XIDErrors && v.Int > 0 {
			// Each sample of the XID errors field is one XID event, repeats included.
			sink.XID(e, uint64(v.Int), ts)
		}
		sink.Value(e, v.FieldID, ts, v.number())
	}
}

func (s *Source) collectHealth(sink source.Sink) error {
	c := s.conn
	incidents, err := s.client.HealthCheck(c.healthGroup)
	if err != nil {
		return s.failGPUs(sink, fieldid.ExpGPUHealthStatus, "health check", err)
	}
	// dcgm-exporter (internal/pkg/collector/gpu_health_collector.go) starts
	// every GPU with a passing result per watch and lays each incident over
	// the entry of its watch.
	results := make(map[uint][]source.HealthResult, len(c.gpus))
	for _, g := range c.gpus {
		results[g.ID] = source.PassingHealth()
	}
	for _, in := range incidents {
		r, ok := results[in.Entity.ID]
		if in.Entity.Group != EntityGPU || !ok {
			continue
		}
		source.SetHealth(r, source.HealthResult{Watch: HealthWatchName(in.System), ErrorCode: HealthErrorName(in.Code), Result: in.Result})
	}
	now := s.cfg.Clock.Now().UnixNano()
	for _, g := range c.gpus {
		sink.Health(c.gpuEnt[g.ID], now, results[g.ID])
	}
	return nil
}
