package fieldid

// allBaseUnits is every field served in a new unit: DCGM 4.6.1's, read
// from its header, then DCGM 4.7's, kept by hand (dcgm47.go).
var allBaseUnits []BaseUnit

// dcgm47IDs are the IDs of dcgm47, which no source ever reads.
var dcgm47IDs = map[uint16]bool{}

func init() {
	// Every DCGM 4.6.1 base-unit field replaces its legacy field in
	// DCGM's header ("Deprecated: Use ... instead").
	for i := range baseUnits {
		baseUnits[i].Renames = true
	}
	allBaseUnits = append(append([]BaseUnit(nil), baseUnits...), dcgm47...)
	for _, u := range dcgm47 {
		dcgm47IDs[u.ID] = true
		legacy := facts[u.Legacy]
		facts[u.ID] = Facts{Level: legacy.Level, Unit: u.Unit, Profiling: legacy.Profiling}
	}
}

// DCGM47 returns DCGM 4.7's fields in new units (dcgm47.go), in ID order.
func DCGM47() []BaseUnit { return append([]BaseUnit(nil), dcgm47...) }

// DerivedOnly reports whether no host engine is ever asked for the field
// under its own ID: a DCGM 4.7 field, whose ID is documentation
// (dcgm47.go). Sources derive it from its legacy field, or compute it from
// what they read themselves (NVML's NVLink bytes per second).
func DerivedOnly(id uint16) bool { return dcgm47IDs[id] }

// DerivedFrom returns every field served in a new unit from this legacy
// field: the one SupersededBy names, and those only DCGM 4.7 adds.
func DerivedFrom(legacy uint16) []BaseUnit {
	var out []BaseUnit
	for _, u := range allBaseUnits {
		if u.Legacy == legacy {
			out = append(out, u)
		}
	}
	return out
}

// ServedCurrent returns the current DCGM field names gpuscope serves, sorted
// by name: go-dcgm's (Current) with DCGM 4.7's changes. A name DCGM 4.7
// moves to a new ID (DCGM_FI_DEV_GPU_UTIL_RATIO: DCGM 4.6.1 calls ID 203 so,
// DCGM 4.7 a new ratio field) leaves its old ID, whose deprecated name is
// current again; the DCGM 4.7 fields and the names dcgm-exporter 4.10
// renames to join, and the names they rename leave.
func ServedCurrent() []Entry {
	moved := movedNames()
	renamed := map[string]bool{}
	for _, a := range dcgm47Renames {
		renamed[a.Name] = true
	}
	var out []Entry
	for _, e := range current {
		if !moved[e.Name] && !renamed[e.Name] {
			out = append(out, e)
		}
	}
	for _, d := range deprecated {
		if moved[d.Current] {
			out = append(out, Entry{Name: d.Name, ID: d.ID})
		}
	}
	for _, u := range dcgm47 {
		out = append(out, Entry{Name: u.Name, ID: u.ID})
	}
	for _, a := range dcgm47Renames {
		out = append(out, Entry{Name: a.Current, ID: a.ID})
	}
	sortEntries(out)
	return out
}

// ServedDeprecated returns the deprecated DCGM names gpuscope serves,
// sorted by name: go-dcgm's (Deprecated) less those of a name DCGM 4.7
// moves to a new ID, and the profiling names dcgm-exporter 4.10 renames.
func ServedDeprecated() []Alias {
	moved := movedNames()
	var out []Alias
	for _, d := range deprecated {
		if !moved[d.Current] {
			out = append(out, d)
		}
	}
	out = append(out, dcgm47Renames...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Name < out[j-1].Name; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// movedNames are the DCGM 4.6.1 current names DCGM 4.7 gives a new ID.
func movedNames() map[string]bool {
	byName := map[string]uint16{}
	for _, e := range current {
		byName[e.Name] = e.ID
	}
	moved := map[string]bool{}
	for _, u := range dcgm47 {
		if id, ok := byName[u.Name]; ok && id != u.ID {
			moved[u.Name] = true
		}
	}
	return moved
}

func sortEntries(es []Entry) {
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && es[j].Name < es[j-1].Name; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
}

// DeprecatedInDCGM47 reports whether DCGM 4.7 (dcgm47.go), not go-dcgm's
// DCGM 4.6 header, deprecates the name: a profiling name dcgm-exporter 4.10
// renames, or a legacy field a DCGM 4.7 field replaces.
func DeprecatedInDCGM47(name string) bool {
	for _, a := range dcgm47Renames {
		if a.Name == name {
			return true
		}
	}
	for _, u := range dcgm47 {
		if u.Renames && u.LegacyName == name {
			return true
		}
	}
	return false
}
