package counters

//go:generate go run ./internal/gen -o fields_gen.go

import (
	"sort"
	"strings"
	"sync"
)

// fieldID is one row of the generated name tables.
type fieldID struct {
	name string
	id   uint16
}

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

// EntityLevel is the kind of entity a field is read on.
type EntityLevel uint8

const (
	EntityUnknown EntityLevel = iota
	// EntityHost fields have one value per host, such as the driver version;
	// they are still read through a GPU.
	EntityHost
	EntityGPU
	EntityGPUInstance
	EntityNVLink
	EntityNvSwitch
	EntityCPU
)

func (l EntityLevel) String() string {
	switch l {
	case EntityHost:
		return "host"
	case EntityGPU:
		return "gpu"
	case EntityGPUInstance:
		return "gpu_instance"
	case EntityNVLink:
		return "nvlink"
	case EntityNvSwitch:
		return "nvswitch"
	case EntityCPU:
		return "cpu"
	}
	return "unknown"
}

// SourceSet is a set of sources that can read a field.
type SourceSet uint8

const (
	SourceDCGM SourceSet = 1 << iota
	SourceNVML
	SourceSim
)

// sourceNames is in bit order, for String and ParseSource.
var sourceNames = []struct {
	bit  SourceSet
	name string
}{{SourceDCGM, "dcgm"}, {SourceNVML, "nvml"}, {SourceSim, "sim"}}

// Has reports whether every source of o is in s.
func (s SourceSet) Has(o SourceSet) bool { return s&o == o }

func (s SourceSet) String() string {
	var names []string
	for _, n := range sourceNames {
		if s.Has(n.bit) {
			names = append(names, n.name)
		}
	}
	if len(names) == 0 {
		return "-"
	}
	return strings.Join(names, ",")
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
	Unit   string
	Help   string
	Entity EntityLevel
	// Sources are the sources that can read the field.
	Sources SourceSet
	// NVMLNote says why the NVML source cannot read the field, when it
	// says so.
	NVMLNote string
	// Default is true for the fields of the shipped default counters file.
	Default bool
}

// Exporter reports whether the field is derived by gpuscope rather than
// read from DCGM.
func (f FieldInfo) Exporter() bool { return f.ID >= FirstExporterFieldID }

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

// cat builds the catalog on first use, so that the support tables of the
// nvml and sim sources are complete by then.
func cat() *catalog {
	catalogOnce.Do(func() { theCatalog = buildCatalog() })
	return theCatalog
}

func buildCatalog() *catalog {
	c := &catalog{
		byName: make(map[string]int, len(dcgmFieldIDs)+len(legacyFieldIDs)+len(exporterFields)),
		byID:   make(map[uint16]int, len(dcgmFieldIDs)+len(exporterFields)),
	}
	add := func(f FieldInfo) {
		c.byName[f.Name] = len(c.all)
		c.all = append(c.all, f)
	}
	for _, g := range dcgmFieldIDs {
		f := FieldInfo{Name: g.name, ID: g.id, Sources: SourceDCGM}
		describe(&f)
		add(f)
	}
	// Legacy names share the description of the current name with their ID.
	for _, g := range legacyFieldIDs {
		f := FieldInfo{Name: g.name, ID: g.id, Legacy: true, Sources: SourceDCGM}
		if cur, ok := currentDescribed(g.id); ok {
			f.Kind, f.Type, f.Unit, f.Help, f.Entity = cur.kind, cur.typ, cur.unit, cur.help, cur.entity
		}
		add(f)
	}
	for _, e := range exporterFields {
		add(e)
	}
	for i := range c.all {
		f := &c.all[i]
		f.Sources |= otherSources(f.ID)
		if base, ok := exporterBase[f.ID]; ok {
			f.Sources |= otherSources(base)
		}
		f.NVMLNote = nvmlSupport[f.ID]
	}
	for i, f := range c.all {
		if prev, ok := c.byID[f.ID]; !ok || canonicalBefore(f, c.all[prev]) {
			c.byID[f.ID] = i
		}
	}
	return c
}

func otherSources(id uint16) SourceSet {
	var s SourceSet
	if reason, ok := nvmlSupport[id]; ok && reason == "" {
		s |= SourceNVML
	}
	if simSupport[id] {
		s |= SourceSim
	}
	return s
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
	c := cat()
	i, ok := c.byName[name]
	if !ok {
		return FieldInfo{}, false
	}
	return c.all[i], true
}

// ByID returns the field with this ID under its canonical current name.
func ByID(id uint16) (FieldInfo, bool) {
	c := cat()
	i, ok := c.byID[id]
	if !ok {
		return FieldInfo{}, false
	}
	return c.all[i], true
}

// All returns every field, current names first, sorted by ID then name.
func All() []FieldInfo {
	out := append([]FieldInfo(nil), cat().all...)
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
