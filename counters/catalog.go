package counters

import (
	"sort"
	"strings"
	"sync"

	"github.com/gpuscope/gpuscope/counters/fieldid"
)

// ValueKind is the type of value a field holds.
type ValueKind uint8

const (
	// KindUnknown marks fields the catalog has a name and ID for but no
	// description; they can still be exported.
	KindUnknown ValueKind = iota
	KindInt
	KindFloat
	KindString
)

func (k ValueKind) String() string {
	switch k {
	case KindInt:
		return "int"
	case KindFloat:
		return "float"
	case KindString:
		return "string"
	}
	return "unknown"
}

// FieldInfo describes one field name the counters file may use.
type FieldInfo struct {
	// Name is the DCGM (or exporter-side) field name.
	Name string
	ID   uint16
	// Legacy names are not the name ByID gives their ID: the lower-case
	// ones of dcgm-exporter 1.x, and the other DCGM names of an ID. The
	// canonical name of a field DCGM 4.6 renamed stays the name gpuscope's
	// own metrics, rules and shipped files have always used (the curated
	// one); Current then names the field as DCGM 4.6 does.
	Legacy bool
	// Deprecated is true for a name DCGM deprecates in favour of another
	// name of the same ID: Current is the name dcgm_fields.h gives it now.
	Deprecated bool
	Current    string
	// curated is true when the curated table describes the field by this
	// very name: the name the catalog used before DCGM 4.6.
	curated bool
	// Replaces lists the deprecated names of the same ID, for a current name.
	Replaces []string
	// SupersededBy is the base-unit field (another ID) DCGM says to use
	// instead of this one, and SupersededUnit its unit.
	SupersededBy   string
	SupersededUnit string
	// Kind is KindUnknown for fields the catalog does not describe.
	Kind ValueKind
	// Type is the natural Prometheus type of the field.
	Type MetricType
	// Unit is the unit DCGM reports the value in, empty for text, states
	// and bitmasks.
	Unit string
	Help string
	// Level is the entity level DCGM reads the field at.
	Level fieldid.Level
	// Default is true for the fields of the shipped default counters file.
	Default bool
}

// Exporter reports whether the field is derived by gpuscope rather than
// read from DCGM.
func (f FieldInfo) Exporter() bool { return fieldid.IsExporter(f.ID) }

// IsDeprecated reports whether DCGM deprecates the name: renamed, or
// superseded by a field in a base unit.
func (f FieldInfo) IsDeprecated() bool { return f.Deprecated || f.SupersededBy != "" }

// Described reports whether the catalog knows the field's kind, unit and help.
func (f FieldInfo) Described() bool { return f.Kind != KindUnknown }

type catalog struct {
	all    []FieldInfo
	byName map[string]int
	byID   map[uint16]int
}

var (
	catalogOnce sync.Once
	theCatalog  *catalog
)

// theFields builds the catalog on first use: most commands never need it.
func theFields() *catalog {
	catalogOnce.Do(func() { theCatalog = buildCatalog() })
	return theCatalog
}

func buildCatalog() *catalog {
	current, legacy, exporter := fieldid.ServedCurrent(), fieldid.Legacy(), fieldid.Exporter()
	deprecated := fieldid.ServedDeprecated()
	c := &catalog{
		byName: make(map[string]int, len(current)+len(legacy)+len(deprecated)+len(exporter)),
		byID:   make(map[uint16]int, len(current)+len(exporter)),
	}
	add := func(f FieldInfo) {
		f.Level = fieldid.Of(f.ID).Level
		c.byName[f.Name] = len(c.all)
		c.all = append(c.all, f)
	}
	replaces := map[string][]string{}
	for _, d := range deprecated {
		replaces[d.Current] = append(replaces[d.Current], d.Name)
	}
	for _, g := range current {
		f := FieldInfo{Name: g.Name, ID: g.ID, Replaces: replaces[g.Name]}
		_, f.curated = lookupMeta(g.Name)
		describeAny(&f, deprecated)
		if u, ok := fieldid.SupersededBy(g.ID); ok {
			f.SupersededBy, f.SupersededUnit = u.Name, u.Unit
		}
		add(f)
	}
	// Legacy and deprecated names share the description of the current
	// name with their ID: the field is read by its ID and exported under
	// the name the counters file uses.
	for _, g := range legacy {
		f := FieldInfo{Name: g.Name, ID: g.ID, Legacy: true}
		if cur, ok := currentDescribed(current, deprecated, g.ID); ok {
			f.Kind, f.Type, f.Unit, f.Help = cur.kind, cur.typ, cur.unit, cur.help
		}
		add(f)
	}
	for _, d := range deprecated {
		f := FieldInfo{Name: d.Name, ID: d.ID, Deprecated: true, Current: d.Current}
		_, f.curated = lookupMeta(d.Name)
		describe(&f)
		if m, ok := currentDescribed(current, deprecated, d.ID); ok && !f.curated {
			f.Kind, f.Type, f.Unit, f.Help = m.kind, m.typ, m.unit, m.help
		}
		add(f)
	}
	for _, e := range exporter {
		f := FieldInfo{Name: e.Name, ID: e.ID}
		describe(&f)
		add(f)
	}
	for i, f := range c.all {
		if prev, ok := c.byID[f.ID]; !ok || canonicalBefore(f, c.all[prev]) {
			c.byID[f.ID] = i
		}
	}
	for i := range c.all {
		c.all[i].Legacy = c.byID[c.all[i].ID] != i
	}
	return c
}

// canonicalBefore says whether a names an ID better than b: DCGM names
// before dcgm-exporter 1.x ones, the curated (pre-4.6) name before DCGM
// 4.6's new one, described before undescribed, real fields before the
// FIRST/LAST range markers DCGM also lists, then by name.
func canonicalBefore(a, b FieldInfo) bool {
	if a.Legacy != b.Legacy {
		return !a.Legacy
	}
	if a.curated != b.curated {
		return a.curated
	}
	if a.Described() != b.Described() {
		return a.Described()
	}
	if a.Deprecated != b.Deprecated {
		return !a.Deprecated
	}
	if ma, mb := isRangeMarker(a.Name), isRangeMarker(b.Name); ma != mb {
		return !ma
	}
	return a.Name < b.Name
}

func isRangeMarker(name string) bool {
	return strings.Contains(name, "_FIRST_") || strings.Contains(name, "_LAST_") ||
		strings.HasSuffix(name, "_START") || strings.HasSuffix(name, "_END")
}

// Lookup returns the field with exactly this name (names are case-sensitive,
// as in dcgm-exporter).
func Lookup(name string) (FieldInfo, bool) {
	c := theFields()
	i, ok := c.byName[name]
	if !ok {
		return FieldInfo{}, false
	}
	return c.all[i], true
}

// ByID returns the field with this ID under its canonical current name.
func ByID(id uint16) (FieldInfo, bool) {
	c := theFields()
	i, ok := c.byID[id]
	if !ok {
		return FieldInfo{}, false
	}
	return c.all[i], true
}

// All returns every field, current names first, sorted by ID then name.
func All() []FieldInfo {
	out := append([]FieldInfo(nil), theFields().all...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Legacy != out[j].Legacy {
			return !out[i].Legacy
		}
		if out[i].ID != out[j].ID {
			return out[i].ID < out[j].ID
		}
		return out[i].Name < out[j].Name
	})
	return out
}
