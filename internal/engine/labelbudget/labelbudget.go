// Package labelbudget bounds the number of labels a gpuscope series carries
// once stored. Mimir and Cortex refuse series with more than 30 labels by
// default (max_label_names_per_series, which counts __name__), and
// dcgm-exporter crossed that line with pod labels; gpuscope checks its bound
// at startup and on every counters reload instead of losing series in the
// remote store.
package labelbudget

import (
	"fmt"
	"regexp/syntax"
	"strings"
)

const (
	// Limit is the most labels a series may carry in the store, __name__
	// included: Mimir's and Cortex's default max_label_names_per_series.
	Limit = 30
	// Reserved counts the labels added after the exposition: __name__, the
	// job and instance target labels, and one more target or external
	// label (cluster, or a replica label of an HA pair).
	Reserved = 4
	// Identity counts the identity labels of the widest entity: gpu, UUID,
	// pci_bus_id, device, modelName and Hostname, plus GPU_I_PROFILE and
	// GPU_I_ID on a MIG instance.
	Identity = 8
	// FamilyLabels is the most labels one family adds of its own:
	// clock_event and window_size_in_ms on DCGM_EXP_CLOCK_EVENTS_COUNT
	// (stat, xid or field on the others).
	FamilyLabels = 2
)

// Shape is what, besides the fixed parts, decides how wide a series gets.
type Shape struct {
	// LabelFields is the number of distinct label-type fields of the
	// counters file; each is a label on every series of its entity.
	LabelFields int
	// EnricherLabels is the number of fixed enricher labels (pod,
	// namespace, container, pod_uid, hpc_job).
	EnricherLabels int
	// ExtraLabels is the most labels an enricher adds under names it learns
	// at run time (the pod labels of --kubernetes.pod-labels).
	ExtraLabels int
}

// Widest is the most labels any series of this shape carries once stored.
func (s Shape) Widest() int {
	return Identity + s.LabelFields + s.EnricherLabels + s.ExtraLabels + FamilyLabels + Reserved
}

// Check fails when a series of this shape could exceed Limit, and says
// where the labels come from.
func (s Shape) Check() error {
	if w := s.Widest(); w > Limit {
		return fmt.Errorf("series would carry up to %d labels, over the limit of %d that Mimir and Cortex enforce by default "+
			"(%d identity, %d label-type fields of the counters file, %d pod and job labels, %d pod labels, %d of a family, %d added by Prometheus and one external label)",
			w, Limit, Identity, s.LabelFields, s.EnricherLabels, s.ExtraLabels, FamilyLabels, Reserved)
	}
	return nil
}

// Room is how many run-time labels (pod labels) still fit on the widest
// series of this shape; ExtraLabels is ignored.
func (s Shape) Room() int {
	s.ExtraLabels = 0
	return Limit - s.Widest()
}

// maxCount stops counting the keys of a finite allowlist; anything larger
// is as good as unbounded for a budget of 30.
const maxCount = 1 << 20

// AllowlistKeys counts the label keys a whole-key allowlist can match. It
// returns finite=false when the expression matches unboundedly many keys
// (a star, a plus, any character, or more than a million combinations).
func AllowlistKeys(expr string) (n int, finite bool, err error) {
	re, err := syntax.Parse(`^(?:`+expr+`)$`, syntax.Perl)
	if err != nil {
		return 0, false, fmt.Errorf("allowlist %q: %w", expr, err)
	}
	n = count(re.Simplify())
	if n < 0 {
		return 0, false, nil
	}
	return n, true, nil
}

// count returns the number of distinct strings re matches, or -1 for too
// many. It may count a string twice when alternatives overlap, which only
// makes the bound stricter.
func count(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpNoMatch:
		return 0
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return 1
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return fold(string(re.Rune))
		}
		return 1
	case syntax.OpCharClass:
		n := 0
		for i := 0; i+1 < len(re.Rune); i += 2 {
			n += int(re.Rune[i+1]-re.Rune[i]) + 1
			if n > maxCount {
				return -1
			}
		}
		return n
	case syntax.OpCapture:
		return count(re.Sub[0])
	case syntax.OpQuest:
		c := count(re.Sub[0])
		if c < 0 {
			return -1
		}
		return c + 1
	case syntax.OpConcat:
		n := 1
		for _, s := range re.Sub {
			c := count(s)
			if c < 0 || (c > 0 && n > maxCount/c) {
				return -1
			}
			n *= c
		}
		return n
	case syntax.OpAlternate:
		n := 0
		for _, s := range re.Sub {
			c := count(s)
			if c < 0 || n+c > maxCount {
				return -1
			}
			n += c
		}
		return n
	case syntax.OpRepeat:
		// Simplify expands bounded repeats; an unbounded one (Max -1) is
		// infinite.
		if re.Max < 0 {
			return -1
		}
		c := count(re.Sub[0])
		if c < 0 {
			return -1
		}
		n, p := 0, 1
		for i := 0; i <= re.Max; i++ {
			if i >= re.Min {
				n += p
			}
			if n > maxCount || (c > 0 && p > maxCount/c) {
				return -1
			}
			p *= c
		}
		return n
	default: // star, plus, any character
		return -1
	}
}

// fold counts the case variants of a case-insensitive literal.
func fold(s string) int {
	n := 1
	for _, r := range s {
		if strings.ToUpper(string(r)) != strings.ToLower(string(r)) {
			n *= 2
			if n > maxCount {
				return -1
			}
		}
	}
	return n
}
