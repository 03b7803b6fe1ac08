package counters

import "github.com/gpuscope/gpuscope/counters/fieldid"

// Support is a source's own account of the catalog fields it reads. Each
// source package describes itself (dcgm.Support, nvml.Support,
// sim.Support); the program that wires the sources hands the tables to
// whoever needs them, such as `gpuscope counters list`, so that the catalog
// depends on no source.
type Support struct {
	// Source is the source's name, as --source spells it.
	Source string
	// Reads reports whether the source reads the field with this ID; when
	// it does not, note may say why (empty when there is nothing to say).
	Reads func(id uint16) (ok bool, note string)
	// Via names, for /fields, what reads a field the source serves (DCGM,
	// NVML, GPM); nil when the page names nothing for this source.
	Via func(fieldName string) string
}

// SupportTable builds a Support from a table that maps each field ID the
// source knows about to "" when it reads the field, or to why it does not.
// IDs absent from the table are not read.
func SupportTable(source string, table map[uint16]string) Support {
	return Support{Source: source, Reads: func(id uint16) (bool, string) {
		note, known := table[id]
		return known && note == "", note
	}}
}

// Serves reports whether the source serves the field: it reads it, or it
// reads the base field a derived exporter-side field is computed from, or
// the legacy field a base-unit field is scaled from (source.DeriveBaseUnits).
func (s Support) Serves(id uint16) (bool, string) {
	ok, note := s.Reads(id)
	if ok {
		return true, ""
	}
	if base, derived := fieldid.BaseOf(id); derived {
		if baseOK, _ := s.Reads(base); baseOK {
			return true, ""
		}
	}
	if u, ok := fieldid.BaseUnitOf(id); ok {
		if legacyOK, _ := s.Reads(u.Legacy); legacyOK {
			return true, ""
		}
	}
	return false, note
}
