package dcgm

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
)

// Reading with a status per value. DCGM's dcgmGetValuesSince_v2 fails a
// whole read when one (entity, field) pair of the group has a status other
// than OK or NO_DATA (dcgmlib/src/DcgmApi.cpp, helperGetValuesSince), and
// some fields answer with an error rather than a blank on some entities:
// NVLink bandwidth on a GPU without NVLink, vGPU fields. So most fields are
// read as latest values (dcgmEntitiesGetLatestValues, as dcgm-exporter
// reads them), where a refused pair fails alone, in batches of at most
// MaxLatestValues pairs; the event fields, each of whose samples counts,
// are read with every sample since the last read, and a failed read of
// them is retried as latest values to find the refused pairs. Refused
// pairs are reported unsupported, logged once, and left out of the watches
// from then on.

// pairKey is one (entity, field) pair.
type pairKey struct {
	e     EntityRef
	field uint16
}

// refusal is a pair the host engine refused, with its status.
type refusal struct {
	pairKey
	status int
}

// isEvent says whether each sample of the field is an event that must not
// be lost between reads: an XID, or the clock-event reasons that
// DCGM_EXP_CLOCK_EVENTS_COUNT counts sample by sample.
func isEvent(id uint16) bool {
	return id == fieldid.XIDErrors || id == fieldid.ClocksEventReasons
}

// splitEvents splits fields into the event fields and the others.
func splitEvents(fields []uint16) (events, others []uint16) {
	for _, id := range fields {
		if isEvent(id) {
			events = append(events, id)
		} else {
			others = append(others, id)
		}
	}
	return events, others
}

// withoutRefused splits members into parts that watch the same fields,
// each member's fields without the pairs the host engine refused, in the
// members' order.
func withoutRefused(refused map[pairKey]string, fields []uint16, members []EntityRef) []watchPart {
	if len(refused) == 0 {
		return []watchPart{{fields, members}}
	}
	var parts []watchPart
	byKey := map[string]int{}
	for _, m := range members {
		own := make([]uint16, 0, len(fields))
		for _, id := range fields {
			if _, ok := refused[pairKey{m, id}]; !ok {
				own = append(own, id)
			}
		}
		key := fieldsKey(own)
		i, ok := byKey[key]
		if !ok {
			i = len(parts)
			byKey[key] = i
			parts = append(parts, watchPart{fields: own})
		}
		parts[i].members = append(parts[i].members, m)
	}
	return parts
}

// refusedPending lists the refused pairs of fields, to be told to the sink
// again by every new plan: the engine may have forgotten them with the
// entities it refreshed.
func (c *connState) refusedPending(fields map[uint16]bool) []pendingUnsupported {
	var out []pendingUnsupported
	for k, reason := range c.refused {
		if e := c.byRef[k.e]; e != nil && fields[k.field] {
			out = append(out, pendingUnsupported{e, k.field, reason})
		}
	}
	return out
}

// pruneLatest forgets the latest-sample times of pairs no longer read as
// latest values, so that the map stays bounded by the watched pairs.
func (s *Source) pruneLatest(watched map[time.Duration][]*watchedGroup) {
	keep := map[pairKey]bool{}
	for _, gs := range watched {
		for _, g := range gs {
			if g.events {
				continue
			}
			for _, m := range g.members {
				for _, id := range g.fields {
					keep[pairKey{m, id}] = true
				}
			}
		}
	}
	maps.DeleteFunc(s.lastTS, func(k pairKey, _ int64) bool { return !keep[k] })
}

// readLatest reads the latest value of every pair of g, in batches of at
// most MaxLatestValues pairs, and hands the samples not handed over yet
// (and not older than floor) to sink; a nil sink only looks for refused
// pairs. It returns the pairs the host engine refused.
func (s *Source) readLatest(p *groupPlan, g *watchedGroup, floor int64, sink source.Sink) ([]refusal, error) {
	var refused []refusal
	for fields := range slices.Chunk(g.fields, MaxLatestValues) {
		per := max(1, MaxLatestValues/len(fields))
		for ents := range slices.Chunk(g.members, per) {
			vals, err := s.client.LatestValues(ents, fields)
			if err != nil {
				return nil, err
			}
			fresh := vals[:0]
			for _, v := range vals {
				k := pairKey{v.Entity, v.FieldID}
				switch {
				case v.Status != StatusOK && v.Status != StatusNoData:
					refused = append(refused, refusal{k, v.Status})
				case v.Status != StatusOK, v.TS <= s.lastTS[k], v.TS < floor:
					// No sample yet, or none since the last read.
				default:
					s.lastTS[k] = v.TS
					fresh = append(fresh, v)
				}
			}
			if sink != nil {
				s.deliver(p, fresh, sink)
			}
		}
	}
	return refused, nil
}

// findRefused looks, after a failed since-read of g, for the pairs the
// host engine refuses. A read that failed for another reason finds none.
func (s *Source) findRefused(p *groupPlan, g *watchedGroup, readErr error) []refusal {
	if errors.Is(readErr, ErrConnectionLost) {
		return nil
	}
	refused, err := s.readLatest(p, g, 0, nil)
	if err != nil {
		return nil
	}
	return refused
}

// dropRefused reports each newly refused pair unsupported, logs them once,
// and watches again without them.
func (s *Source) dropRefused(refused []refusal, sink source.Sink) error {
	c := s.conn
	var names []string
	added := 0
	for _, r := range refused {
		if _, seen := c.refused[r.pairKey]; seen {
			continue
		}
		reason := "DCGM refuses the field on this entity (status " + strconv.Itoa(r.status) + ")"
		c.refused[r.pairKey] = reason
		added++
		if e := c.byRef[r.e]; e != nil {
			sink.Unsupported(e, r.field, reason)
			if len(names) < 16 {
				names = append(names, e.Key()+"/"+strconv.Itoa(int(r.field))+": "+strconv.Itoa(r.status))
			}
		}
	}
	if added == 0 {
		return nil
	}
	s.log.WithFields(logrus.Fields{"refused": added, "pairs": names}).Warn("DCGM refuses fields on some entities; reading on without them")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.teardown(c)
	plans, err := s.plan(c, s.groups)
	if err != nil {
		s.handleErr(err)
		return fmt.Errorf("dcgm: watching again without the refused fields: %w", err)
	}
	s.plans = plans
	return nil
}
