package counters

import (
	"math"

	"github.com/gpuscope/gpuscope/counters/fieldid"
)

// Alternative is another name a counters file may give a field, in the
// other DCGM vocabulary, and what turns its values into the unit of the
// name it stands in for.
type Alternative struct {
	Name string
	// Factor multiplies a value of Name into the first name's unit: 1 for
	// a rename of the same ID, 1e-6 for hertz read as MHz, 1000 for joules
	// read as mJ.
	Factor float64
}

// OtherNames lists the names a query must also read to find a field
// whatever the exporter's vocabulary: the other DCGM names of its ID, and
// the fields DCGM 4.6.1 and 4.7 serve it as under new IDs in base units. None
// for an unknown name.
func OtherNames(name string) []Alternative {
	f, ok := Lookup(name)
	if !ok {
		return nil
	}
	var out []Alternative
	seen := map[string]bool{name: true}
	add := func(n string, factor float64) {
		if !seen[n] {
			seen[n] = true
			out = append(out, Alternative{Name: n, Factor: factor})
		}
	}
	if f.Current != "" {
		add(f.Current, 1)
	}
	if cur, ok := Lookup(f.Current); ok {
		for _, r := range cur.Replaces {
			add(r, 1)
		}
	}
	for _, r := range f.Replaces {
		add(r, 1)
	}
	for _, u := range fieldid.DerivedFrom(f.ID) {
		add(u.Name, inverse(u.Scale))
	}
	if u, ok := fieldid.BaseUnitOf(f.ID); ok {
		add(u.LegacyName, u.Scale)
	}
	return out
}

// inverse of a scale, exact for the powers of ten and two the base units
// use.
func inverse(scale float64) float64 {
	if scale < 1 {
		return math.Round(1 / scale)
	}
	return 1 / scale
}
