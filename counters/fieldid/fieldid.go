// Package fieldid names every DCGM field ID and gpuscope's exporter-side
// fields, and holds the facts about each field that do not depend on who
// reads it: the entity level DCGM reads it at, its unit, whether DCGM's
// profiling module samples it, and the base field of a derived field.
//
// It imports nothing, so that every source, the catalog and the engine can
// share one set of IDs without cgo and without the counters CSV parser.
package fieldid

//go:generate go run ./internal/gen -o fieldid_gen.go

// Level is the kind of entity DCGM reads a field at (dcgm_fields.h,
// dcgm_field_entity_group_t).
type Level uint8

const (
	// LevelUnknown marks fields DCGM's field table does not list.
	LevelUnknown Level = iota
	// LevelNone fields have one value per host, such as the driver version.
	LevelNone
	LevelGPU
	LevelVGPU
	LevelNvSwitch
	LevelGPUInstance
	LevelComputeInstance
	// LevelLink fields are read on one NVLink of a GPU or an NvSwitch.
	LevelLink
	LevelCPU
	LevelCPUCore
	LevelConnectX
)

func (l Level) String() string {
	switch l {
	case LevelNone:
		return "none"
	case LevelGPU:
		return "gpu"
	case LevelVGPU:
		return "vgpu"
	case LevelNvSwitch:
		return "nvswitch"
	case LevelGPUInstance:
		return "gpu_instance"
	case LevelComputeInstance:
		return "compute_instance"
	case LevelLink:
		return "link"
	case LevelCPU:
		return "cpu"
	case LevelCPUCore:
		return "cpu_core"
	case LevelConnectX:
		return "connectx"
	}
	return "unknown"
}

// Facts is what is known about a field whoever reads it.
type Facts struct {
	Level Level
	// Unit is the unit DCGM's field table gives, empty when it gives none.
	Unit string
	// Profiling fields are sampled by DCGM's profiling module (DCP), which
	// supports them per GPU according to its metric groups and can be paused.
	Profiling bool
	// Base is the field a derived exporter-side field is computed from, 0
	// when there is none.
	Base uint16
}

// Entry is one field name with its ID.
type Entry struct {
	Name string
	ID   uint16
}

// Of returns the facts about the field with this ID; the zero Facts for an
// unknown ID.
func Of(id uint16) Facts { return facts[id] }

// IsProfiling reports whether DCGM's profiling module samples the field.
func IsProfiling(id uint16) bool { return facts[id].Profiling }

// IsExporter reports whether the field is derived by gpuscope rather than
// read from DCGM.
func IsExporter(id uint16) bool { return id >= FirstExporter }

// BaseOf returns the field a derived exporter-side field is computed from:
// the field a source must read for the derived one to have values.
func BaseOf(id uint16) (uint16, bool) {
	b := facts[id].Base
	return b, b != 0
}

// Current returns every current DCGM field name with its ID, sorted by name.
func Current() []Entry { return append([]Entry(nil), current...) }

// Legacy returns the lower-case names of dcgm-exporter 1.x, sorted by name.
func Legacy() []Entry { return append([]Entry(nil), legacy...) }

// Exporter returns the exporter-side fields, in ID order.
func Exporter() []Entry { return append([]Entry(nil), exporter...) }

// Alias is a deprecated DCGM field name: DCGM 4.6 renamed the field and
// keeps the old name for the same ID.
type Alias struct {
	Name string
	ID   uint16
	// Current is the name DCGM gives the ID now.
	Current string
}

// BaseUnit is a field DCGM 4.6.1 added under a new ID in a base unit (Hz,
// bytes, joules, a 0-1 ratio) beside the legacy field it supersedes.
type BaseUnit struct {
	ID         uint16
	Name       string
	Unit       string
	Legacy     uint16
	LegacyName string
	LegacyUnit string
	// Scale multiplies a legacy value into Unit.
	Scale float64
	// Renames is set on a DCGM 4.7 field (dcgm47.go) that dcgm-exporter 4.9
	// writes in place of its legacy field; every DCGM 4.6.1 one is.
	Renames bool
}

// Deprecated returns DCGM's deprecated field names, sorted by name.
func Deprecated() []Alias { return append([]Alias(nil), deprecated...) }

// BaseUnits returns the base-unit fields, in ID order.
func BaseUnits() []BaseUnit { return append([]BaseUnit(nil), baseUnits...) }

// BaseUnitOf returns the base-unit field with this ID.
func BaseUnitOf(id uint16) (BaseUnit, bool) {
	for _, u := range allBaseUnits {
		if u.ID == id {
			return u, true
		}
	}
	return BaseUnit{}, false
}

// SupersededBy returns the base-unit field that supersedes the legacy field
// with this ID.
func SupersededBy(legacy uint16) (BaseUnit, bool) {
	for _, u := range allBaseUnits {
		if u.Legacy == legacy && u.Renames {
			return u, true
		}
	}
	return BaseUnit{}, false
}
