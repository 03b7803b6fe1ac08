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
	// ExtraOption is the key of Count.Options that names what adds the
	// labels learnt at run time (the pod labels).
	ExtraOption = "*"
)

// Count is the labels one series carries once stored, by where they come
// from. The engine fills it from the label names it writes
// (engine.SeriesShape.Count); this package only adds them up and explains.
type Count struct {
	// Kind names the entity kind of the series ("MIG compute instance").
	Kind string
	// Identity are the identity labels of the kind, the host label included.
	Identity []string
	// LabelFields are the label-type fields of the counters file File.
	LabelFields []string
	File        string
	// Enricher are the labels of the enrichers (pod, namespace, container,
	// vgpu, pod_uid, the DRA labels, hpc_job).
	Enricher []string
	// Extra is the most labels enrichers add under names learnt at run time
	// (the pod labels).
	Extra int
	// Family is the most labels a family adds of its own (stat, or
	// clock_event and window_size_in_ms, err_code and err_msg, ...).
	Family int
	// Options names, by label name (ExtraOption for the run-time labels),
	// the option that adds it, so that an error can say what to drop.
	Options map[string]string
}

// Stored is the number of labels the series carries in the store,
// __name__ and the target labels included.
func (c Count) Stored() int {
	return len(c.Identity) + len(c.LabelFields) + len(c.Enricher) + c.Extra + c.Family + Reserved
}

// Room is how many run-time labels (pod labels) still fit on this series;
// Extra is ignored.
func (c Count) Room() int { return Limit - (c.Stored() - c.Extra) }

// Check fails when the series exceeds Limit, saying where its labels come
// from and which options add the ones that could be dropped.
func (c Count) Check() error {
	if n := c.Stored(); n > Limit {
		return fmt.Errorf("a series of a %s would carry up to %d labels, over the limit of %d that Mimir and Cortex enforce by default (%s); %s",
			c.Kind, n, Limit, c.Breakdown(), c.Advice())
	}
	return nil
}

// Breakdown lists the labels by origin, naming each.
func (c Count) Breakdown() string {
	parts := []string{fmt.Sprintf("%d identity: %s", len(c.Identity), strings.Join(c.Identity, ", "))}
	if len(c.LabelFields) > 0 {
		parts = append(parts, fmt.Sprintf("%d label-type fields of %s: %s", len(c.LabelFields), c.File, strings.Join(c.LabelFields, ", ")))
	}
	if len(c.Enricher) > 0 {
		parts = append(parts, fmt.Sprintf("%d pod and job labels: %s", len(c.Enricher), strings.Join(c.Enricher, ", ")))
	}
	if c.Extra > 0 {
		parts = append(parts, fmt.Sprintf("up to %d pod labels", c.Extra))
	}
	if c.Family > 0 {
		parts = append(parts, fmt.Sprintf("%d of a family", c.Family))
	}
	parts = append(parts, fmt.Sprintf("%d added by Prometheus and one external label", Reserved))
	return strings.Join(parts, "; ")
}

// Advice says what to drop to lose labels: the options that add them (each
// once, in the order their labels are written), the run-time labels, then
// the counters file's label-type fields.
func (c Count) Advice() string {
	var ways []string
	seen := map[string]bool{}
	add := func(label string) {
		if o := c.Options[label]; o != "" && !seen[o] {
			seen[o] = true
			ways = append(ways, fmt.Sprintf("drop %s (%s)", o, label))
		}
	}
	for _, l := range c.Identity {
		add(l)
	}
	for _, l := range c.Enricher {
		add(l)
	}
	if o := c.Options[ExtraOption]; o != "" && c.Extra > 0 {
		ways = append(ways, fmt.Sprintf("let %s name fewer keys", o))
	}
	if len(c.LabelFields) > 0 {
		ways = append(ways, fmt.Sprintf("list fewer label-type fields in %s", c.File))
	}
	switch len(ways) {
	case 0:
		return "nothing can be dropped"
	case 1:
		return "to fit, " + ways[0]
	}
	return "to fit, " + strings.Join(ways[:len(ways)-1], ", ") + " or " + ways[len(ways)-1]
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
