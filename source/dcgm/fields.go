package dcgm

import (
	"math"
	"strings"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
)

// level is the entity level a field is sampled at.
type level uint8

const (
	levelGPU level = iota
	levelSwitch
	levelLink
	levelCPU
	levelCPUCore
	// levelExporter fields are not DCGM fields: the source derives them.
	levelExporter
)

// fieldLevel follows the entity level DCGM's field table gives the field.
// Fields of a GPU, its MIG instances and the host are all watched on the
// GPUs and their instances.
func fieldLevel(id uint16) level {
	if fieldid.IsExporter(id) {
		return levelExporter
	}
	switch fieldid.Of(id).Level {
	case fieldid.LevelLink:
		return levelLink
	case fieldid.LevelNvSwitch:
		return levelSwitch
	case fieldid.LevelCPU:
		return levelCPU
	case fieldid.LevelCPUCore:
		return levelCPUCore
	}
	return levelGPU
}

// Name is the DCGM source's name, as --source spells it.
const Name = "dcgm"

// Support is the DCGM source's account of the fields it reads, for the
// catalog's users: every DCGM field, and the exporter-side fields it
// derives from DCGM's health watches and topology.
func Support() counters.Support {
	return counters.Support{Source: Name, Reads: func(uint16) (bool, string) { return true, "" },
		Via: func(name string) string {
			// The host engine's release decides, at connect: 4.6.1 and
			// later read the base-unit fields, older ones have them derived.
			if info, ok := counters.Lookup(name); ok {
				if u, ok := fieldid.BaseUnitOf(info.ID); ok {
					if fieldid.DerivedOnly(info.ID) {
						return "DCGM, derived from " + u.LegacyName
					}
					return "DCGM 4.6.1+; derived from " + u.LegacyName + " before"
				}
			}
			return "DCGM"
		}}
}

// applies says whether a field of the given level is read on an entity of
// the given kind. GPU-level fields are also read on MIG instances: DCGM
// samples profiling and memory fields per instance there.
func applies(l level, k source.EntityKind) bool {
	switch l {
	case levelGPU:
		return k == source.GPU || k == source.GPUInstance || k == source.ComputeInstance
	case levelSwitch:
		return k == source.NvSwitch
	case levelLink:
		return k == source.NVLink
	case levelCPU:
		return k == source.CPU
	case levelCPUCore:
		return k == source.CPUCore
	}
	return false
}

// DCGM's sentinels for "no value" (dcgm_structs.h): BLANK, NOT_FOUND,
// NOT_SUPPORTED and NOT_PERMISSIONED, in that order from the base value.
const (
	int32Blank = 0x7ffffff0
	int64Blank = 0x7ffffffffffffff0
	fp64Blank  = 140737488355328.0
	// notSupportedOffset is the offset of NOT_SUPPORTED from each base.
	notSupportedOffset = 2
)

// blankKind classifies a value: valueOK, valueBlank (no data now), or
// valueUnsupported (the entity cannot give this field).
type blankKind uint8

const (
	valueOK blankKind = iota
	valueBlank
	valueUnsupported
)

func classify(v *Value) blankKind {
	if v.Status != 0 {
		return valueBlank
	}
	switch v.Kind {
	case KindInt64:
		// 32-bit fields arrive widened to int64 with the 32-bit sentinels.
		switch {
		case v.Int >= int64Blank:
			if v.Int == int64Blank+notSupportedOffset {
				return valueUnsupported
			}
			return valueBlank
		case v.Int >= int32Blank && v.Int <= int32Blank+3:
			if v.Int == int32Blank+notSupportedOffset {
				return valueUnsupported
			}
			return valueBlank
		}
	case KindFloat64:
		if math.IsNaN(v.Float) {
			return valueBlank
		}
		if v.Float >= fp64Blank {
			if v.Float == fp64Blank+notSupportedOffset {
				return valueUnsupported
			}
			return valueBlank
		}
	case KindString:
		// "<<<NULL>>>", "<<<NOT_FOUND>>>", "<<<NOT_SUPPORTED>>>", "<<<NOT_PERM>>>".
		if strings.HasPrefix(v.Str, "<<<") && strings.HasSuffix(v.Str, ">>>") {
			if v.Str == "<<<NOT_SUPPORTED>>>" {
				return valueUnsupported
			}
			return valueBlank
		}
	default:
		return valueBlank
	}
	return valueOK
}

func (v *Value) number() float64 {
	if v.Kind == KindFloat64 {
		return v.Float
	}
	return float64(v.Int)
}
