package source

import (
	"math"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
)

// BaseUnits is the one derivation of DCGM 4.6.1's base-unit fields (new IDs
// in hertz, bytes, joules and 0-1 ratios: fieldid.BaseUnits) for a source
// that cannot read them itself: the source reads the legacy field instead
// and hands both the legacy sample, when the counters file asks for it, and
// the scaled one to the sink. NVML and the sim derive every base-unit field;
// DCGM derives them only from a host engine older than 4.6.1.
type BaseUnits struct {
	groups  []derivedGroup
	derived map[uint16]bool
}

type derivedGroup struct {
	// from maps a legacy field read for the group to the base-unit fields
	// derived from it.
	from map[uint16][]fieldid.BaseUnit
	// legacy holds the legacy fields the group asked for itself.
	legacy map[uint16]bool
}

// DeriveBaseUnits returns the groups a source reads, with every base-unit
// field that native says the source cannot read replaced by its legacy
// field (read once per group), and the derivation that turns the legacy
// samples back into what the groups asked for.
func DeriveBaseUnits(groups []Group, native func(id uint16) bool) ([]Group, *BaseUnits) {
	b := &BaseUnits{groups: make([]derivedGroup, len(groups)), derived: map[uint16]bool{}}
	out := make([]Group, len(groups))
	for i, g := range groups {
		out[i] = g
		var d derivedGroup
		for _, f := range g.Fields {
			if u, ok := fieldid.BaseUnitOf(f.ID); ok && !native(f.ID) {
				if d.from == nil {
					d.from = map[uint16][]fieldid.BaseUnit{}
				}
				d.from[u.Legacy] = append(d.from[u.Legacy], u)
				b.derived[f.ID] = true
			}
		}
		if d.from == nil {
			continue
		}
		d.legacy = map[uint16]bool{}
		fields := make([]counters.Field, 0, len(g.Fields))
		seen := map[uint16]bool{}
		for _, f := range g.Fields {
			read := f.ID
			if b.derived[f.ID] {
				// The legacy field takes the derived one's place.
				u, _ := fieldid.BaseUnitOf(f.ID)
				read = u.Legacy
			} else if d.from[f.ID] != nil {
				d.legacy[f.ID] = true
			}
			if seen[read] {
				continue
			}
			seen[read] = true
			fields = append(fields, FieldFor(g.Fields, read))
		}
		out[i].Fields = fields
		b.groups[i] = d
	}
	return out, b
}

// Derived reports whether the source derives the base-unit field from its
// legacy field rather than reading it (for /fields and the logs).
func (b *BaseUnits) Derived(id uint16) bool { return b != nil && b.derived[id] }

// Sink returns the sink a source hands the samples of group to: sink
// itself where the group derives nothing.
func (b *BaseUnits) Sink(group int, sink Sink) Sink {
	if b == nil || group < 0 || group >= len(b.groups) || b.groups[group].from == nil {
		return sink
	}
	return derivingSink{Sink: sink, d: &b.groups[group]}
}

// derivingSink passes everything through, and fans each legacy field out
// to the base-unit fields derived from it.
type derivingSink struct {
	Sink
	d *derivedGroup
}

func (s derivingSink) Value(e *Entity, field uint16, ts int64, v float64) {
	if s.passes(field) {
		s.Sink.Value(e, field, ts, v)
	}
	for _, u := range s.d.from[field] {
		s.Sink.Value(e, u.ID, ts, Scale(u, v))
	}
}

func (s derivingSink) Unsupported(e *Entity, field uint16, reason string) {
	if s.passes(field) {
		s.Sink.Unsupported(e, field, reason)
	}
	for _, u := range s.d.from[field] {
		s.Sink.Unsupported(e, u.ID, reason)
	}
}

func (s derivingSink) Fail(e *Entity, field uint16, err error) {
	if s.passes(field) {
		s.Sink.Fail(e, field, err)
	}
	for _, u := range s.d.from[field] {
		s.Sink.Fail(e, u.ID, err)
	}
}

// passes says whether a sample of field goes to the sink as it is: every
// field but a legacy one read only to derive from.
func (s derivingSink) passes(field uint16) bool {
	return s.d.from[field] == nil || s.d.legacy[field]
}

// Scale turns a legacy value into the base unit of u. A fractional factor
// divides by its inverse, so that 37 percent is exactly the float 0.37.
func Scale(u fieldid.BaseUnit, v float64) float64 {
	if u.Scale < 1 {
		return v / math.Round(1/u.Scale)
	}
	return v * u.Scale
}
