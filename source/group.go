package source

import (
	"time"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
)

// ReadFor is the one place that decides what a source reads for a field of
// the counters file. A derived exporter-side field (the XID and clock-event
// window counts) is computed by the engine from its base field, which the
// source reads instead; DCGM_EXP_GPU_HEALTH_STATUS is no field at all but
// the health checks, asked for with Group.Health. Every other field is read
// as it is.
func ReadFor(id uint16) (read uint16, health bool) {
	if id == fieldid.ExpGPUHealthStatus {
		return 0, true
	}
	if base, derived := fieldid.BaseOf(id); derived {
		return base, false
	}
	return id, false
}

// GroupOf is the group a source is asked to read for fields of a counters
// file at one interval, as ReadFor says: each field read once, under its
// line in fields or, for a base field the file does not list, under the
// catalog's name.
func GroupOf(interval time.Duration, fields []counters.Field) Group {
	g := Group{Interval: interval}
	seen := map[uint16]bool{}
	for _, f := range fields {
		read, health := ReadFor(f.ID)
		if health {
			g.Health = true
			continue
		}
		if seen[read] {
			continue
		}
		seen[read] = true
		g.Fields = append(g.Fields, FieldFor(fields, read))
	}
	return g
}

// FieldFor is the line of fields that lists id, or a bare field named by
// the catalog for one that no line lists (a base field read for a derived
// one, a field the engine watches of its own).
func FieldFor(fields []counters.Field, id uint16) counters.Field {
	for _, f := range fields {
		if f.ID == id {
			return f
		}
	}
	f := counters.Field{ID: id, Type: counters.Gauge}
	if info, ok := counters.ByID(id); ok {
		f.Name = info.Name
	}
	return f
}
