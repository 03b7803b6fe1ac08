package dash

import (
	_ "embed"
	"fmt"
	"regexp"
	"strings"
)

// vocabularyTSV maps each legacy field name the queries are written in to
// its DCGM 4.6 name and the conversion back to the legacy unit. It is data
// so that the rules' tests (test/rulevocab) read the very same table.
//
//go:embed vocabulary.tsv
var vocabularyTSV string

// Term is one row of vocabulary.tsv.
type Term struct {
	Legacy, Current string
	// ToLegacy is PromQL appended to a current-name value to give the
	// legacy unit ("* 100", "/ 1e6"), empty where the unit is the same.
	ToLegacy                string
	LegacyUnit, CurrentUnit string
	Kind                    string
}

// Vocabulary is the parsed vocabulary.tsv, in file order.
var Vocabulary = mustParseVocabulary(vocabularyTSV)

// derivedSuffixes name gpuscope's own families of a field, which take the
// field's name as the counters file writes it (docs/metrics.md): the
// window statistics and the native-histogram distribution.
var derivedSuffixes = []string{"_window", "_distribution"}

// Terms is Vocabulary with, for each field of an unchanged unit, its
// derived families (DCGM_FI_PROF_SM_ACTIVE_window beside
// DCGM_FI_PROF_SM_UTIL_RATIO_window). A field whose unit changes has none:
// its window statistics do not all scale (a sample count does not), so a
// query must not read them in both vocabularies.
func Terms() []Term {
	out := append([]Term{}, Vocabulary...)
	for _, t := range Vocabulary {
		if t.ToLegacy != "" {
			continue
		}
		for _, suf := range derivedSuffixes {
			d := t
			d.Legacy, d.Current, d.Kind = t.Legacy+suf, t.Current+suf, "derived"
			out = append(out, d)
		}
	}
	return out
}

func mustParseVocabulary(text string) []Term {
	terms, err := ParseVocabulary(text)
	if err != nil {
		panic(err)
	}
	return terms
}

// ParseVocabulary reads vocabulary.tsv's format: '#' comments, six
// tab-separated columns.
func ParseVocabulary(text string) ([]Term, error) {
	var out []Term
	seen := map[string]int{}
	for i, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 6 {
			return nil, fmt.Errorf("vocabulary.tsv:%d: %d columns, want 6 (legacy, current, to_legacy, legacy_unit, current_unit, kind)", i+1, len(f))
		}
		t := Term{Legacy: f[0], Current: f[1], ToLegacy: f[2], LegacyUnit: f[3], CurrentUnit: f[4], Kind: f[5]}
		if t.Kind != "alias" && t.Kind != "base-unit" {
			return nil, fmt.Errorf("vocabulary.tsv:%d: kind %q, want alias or base-unit", i+1, t.Kind)
		}
		if (t.ToLegacy == "") != (t.LegacyUnit == t.CurrentUnit) {
			return nil, fmt.Errorf("vocabulary.tsv:%d: %s: units %s and %s but conversion %q", i+1, t.Legacy, t.LegacyUnit, t.CurrentUnit, t.ToLegacy)
		}
		for _, n := range []string{t.Legacy, t.Current} {
			if j, dup := seen[n]; dup {
				return nil, fmt.Errorf("vocabulary.tsv:%d: %s already on line %d", i+1, n, j)
			}
			seen[n] = i + 1
		}
		out = append(out, t)
	}
	return out, nil
}

// scaled are the range functions whose result scales with their input, so
// f(current[r]) ToLegacy == f(legacy[r]); unscaled count samples, not values.
var (
	scaled   = []string{"avg_over_time", "min_over_time", "max_over_time", "sum_over_time", "last_over_time", "stddev_over_time", "rate", "irate", "increase", "delta", "idelta", "deriv"}
	unscaled = []string{"count_over_time", "changes", "resets", "present_over_time"}
)

// selectorRE finds a legacy name (not part of a longer name or a recorded
// series' name), with its matchers and, inside a range function, its range.
func selectorRE(name string) *regexp.Regexp {
	fns := strings.Join(append(append([]string{}, scaled...), unscaled...), "|")
	return regexp.MustCompile(`(?:\b(` + fns + `)\(` + name + `(\{[^{}]*\})?(\[[^\]]*\](?:\s+offset\s+-?[0-9a-z]+)?)\))|` + name + `(\{[^{}]*\})?`)
}

// quotedSpans are the [start, end) byte ranges of expr's string literals.
func quotedSpans(expr string) [][2]int {
	var out [][2]int
	for i := 0; i < len(expr); i++ {
		q := expr[i]
		if q != '"' && q != '\'' && q != '`' {
			continue
		}
		j := i + 1
		for ; j < len(expr) && expr[j] != q; j++ {
			if expr[j] == '\\' && q != '`' {
				j++
			}
		}
		out = append(out, [2]int{i, j + 1})
		i = j
	}
	return out
}

func inSpans(spans [][2]int, at int) bool {
	for _, s := range spans {
		if at >= s[0] && at < s[1] {
			return true
		}
	}
	return false
}

// mentions says whether expr names the series name itself, not a longer
// name that starts with it (DCGM_FI_DEV_XID_ERROR in ..._XID_ERRORS).
func mentions(expr, name string) bool {
	quoted := quotedSpans(expr)
	for i := 0; ; {
		j := strings.Index(expr[i:], name)
		if j < 0 {
			return false
		}
		s, e := i+j, i+j+len(name)
		if (s == 0 || !nameChar(expr[s-1])) && (e == len(expr) || !nameChar(expr[e])) && !inSpans(quoted, s) {
			return true
		}
		i = e
	}
}

func nameChar(b byte) bool {
	return b == '_' || b == ':' || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9')
}

// Bilingual rewrites a query written in the legacy vocabulary so that it
// reads either: each legacy selector s becomes (s or s' ToLegacy), s' being
// the same selector on the current name, and a range function f(s[r])
// becomes (f(s[r]) or f(s'[r]) ToLegacy). Where both names are present (a
// file that asks for both) the legacy series wins and nothing is counted
// twice: `or` matches on the labels without the metric name.
func Bilingual(expr string) (string, error) {
	return bilingual(expr, Terms())
}

func bilingual(expr string, terms []Term) (string, error) {
	for _, t := range terms {
		if mentions(expr, t.Current) {
			return "", fmt.Errorf("query already names %s: write it in the legacy vocabulary only: %s", t.Current, expr)
		}
		re := selectorRE(t.Legacy)
		var b strings.Builder
		last := 0
		quoted := quotedSpans(expr)
		for _, m := range re.FindAllStringSubmatchIndex(expr, -1) {
			start, end := m[0], m[1]
			if inSpans(quoted, start) {
				continue // a label value naming the field, not a series
			}
			if (start > 0 && nameChar(expr[start-1])) || (end < len(expr) && nameChar(expr[end])) {
				continue // part of another name, e.g. cluster:DCGM_FI_PROF_SM_ACTIVE:sum
			}
			if m[2] < 0 && end < len(expr) && expr[end] == '[' {
				return "", fmt.Errorf("%s[...] inside a function the vocabulary cannot convert (absent_over_time and the like): %s", t.Legacy, expr)
			}
			old := expr[start:end]
			conv := t.ToLegacy
			if m[2] >= 0 {
				fn := expr[m[2]:m[3]]
				for _, u := range unscaled {
					if fn == u {
						conv = ""
					}
				}
			}
			neu := strings.Replace(old, t.Legacy, t.Current, 1)
			if conv != "" {
				neu += " " + conv
			}
			b.WriteString(expr[last:start])
			b.WriteString("(" + old + " or " + neu + ")")
			last = end
		}
		b.WriteString(expr[last:])
		expr = b.String()
	}
	return expr, nil
}

// MustBilingual is Bilingual for the queries written in this package,
// where a refusal is a programming error caught by the tests.
func MustBilingual(expr string) string {
	out, err := Bilingual(expr)
	if err != nil {
		panic(err)
	}
	return out
}

// EitherName is a regular expression for __name__ matching the legacy name
// and its current one, for the selectors that cannot take an `or`
// (label_values).
func EitherName(legacy string) string {
	for _, t := range Terms() {
		if t.Legacy == legacy {
			return legacy + "|" + t.Current
		}
	}
	panic(legacy + " is not in vocabulary.tsv")
}
