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
	// Name is the DCGM (or exporter-side) field name; legacy names are the
	// lower-case ones of dcgm-exporter 1.x.
	Name   string
	ID     uint16
	Legacy bool
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

// deprecatedNames are DCGM field names that newer go-dcgm releases keep as
// aliases of a renamed field (go-dcgm pkg/dcgm/const_fields.go, "Deprecated
// DCGM field aliases retained for source compatibility"), and that the
// go-dcgm gpuscope builds with no longer lists; dcgm-exporter accepts them in
// a counters file. Only the aliases of names this catalog knows are listed.
var deprecatedNames = map[string]string{
	"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
}

func buildCatalog() *catalog {
	current, legacy, exporter := fieldid.Current(), fieldid.Legacy(), fieldid.Exporter()
	c := &catalog{
		byName: make(map[string]int, len(current)+len(legacy)+len(exporter)),
		byID:   make(map[uint16]int, len(current)+len(exporter)),
	}
	add := func(f FieldInfo) {
		f.Level = fieldid.Of(f.ID).Level
		c.byName[f.Name] = len(c.all)
		c.all = append(c.all, f)
	}
	for _, g := range current {
		f := FieldInfo{Name: g.Name, ID: g.ID}
		describe(&f)
		add(f)
	}
	// Legacy names share the description of the current name with their ID.
	for _, g := range legacy {
		f := FieldInfo{Name: g.Name, ID: g.ID, Legacy: true}
		if cur, ok := currentDescribed(current, g.ID); ok {
			f.Kind, f.Type, f.Unit, f.Help = cur.kind, cur.typ, cur.unit, cur.help
		}
		add(f)
	}
	// Deprecated DCGM names that dcgm-exporter still accepts through
	// go-dcgm's aliases: the field is read by its ID and exported under the
	// name the counters file uses.
	for old, cur := range deprecatedNames {
		for _, g := range current {
			if g.Name != cur {
				continue
			}
			f := FieldInfo{Name: old, ID: g.ID, Legacy: true}
			if m, ok := currentDescribed(current, g.ID); ok {
				f.Kind, f.Type, f.Unit, f.Help = m.kind, m.typ, m.unit, m.help
			}
			add(f)
		}
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
	return c
}

// canonicalBefore says whether a names an ID better than b: current names
// before legacy ones, described before undescribed, real fields before the
// FIRST/LAST range markers DCGM also lists, then by name.
func canonicalBefore(a, b FieldInfo) bool {
	if a.Legacy != b.Legacy {
		return !a.Legacy
	}
	if a.Described() != b.Described() {
		return a.Described()
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
