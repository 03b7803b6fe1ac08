package rulevocab

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

type rule struct {
	file, name, expr string
}

func shippedRules(t *testing.T) []rule {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(e2etest.RepoRoot(), "deploy", "prometheus", "*.yml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var out []rule
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var doc struct {
			Groups []struct {
				Rules []struct{ Alert, Record, Expr string }
			}
		}
		require.NoError(t, yaml.Unmarshal(b, &doc), f)
		for _, g := range doc.Groups {
			for _, r := range g.Rules {
				out = append(out, rule{file: filepath.Base(f), name: r.Alert + r.Record, expr: r.Expr})
			}
		}
	}
	require.NotEmpty(t, out)
	return out
}

var (
	commentRE = regexp.MustCompile(`(?m)#.*$`)
	stringRE  = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	nameRE    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
)

// code is expr without its comments and string literals (label values),
// which name fields without reading them.
func code(expr string) string {
	expr = stringRE.ReplaceAllStringFunc(expr, func(s string) string { return `""` })
	return commentRE.ReplaceAllString(expr, "")
}

// seriesNames are the DCGM series names expr reads (not recorded series,
// whose names contain colons).
func seriesNames(expr string) []string {
	var out []string
	for _, n := range nameRE.FindAllString(code(expr), -1) {
		if strings.HasPrefix(n, "DCGM_FI_") {
			out = append(out, n)
		}
	}
	return out
}

// pairRE matches one selector read in both vocabularies, as the header of
// the rule files describes it: (s or s' conv), or inside a range function
// (f(s[r]) or f(s'[r]) conv). Groups: 1, 2 the matchers of s and s', 3 the
// conversion; 4, 5, 6 the function, matchers and range of s, 7, 8, 9 of s',
// 10 the conversion.
func pairRE(v term) *regexp.Regexp {
	sel := `(\{[^{}]*\})?`
	rng := `(\[[^\]]*\](?:\s+offset\s+[0-9a-z]+)?)`
	conv := `(\s*[*/]\s*[0-9.e]+)?`
	return regexp.MustCompile(`\((?:` +
		v.legacy + sel + ` or ` + v.current + sel + conv + `|` +
		`([a-z_]+)\(` + v.legacy + sel + rng + `\) or ([a-z_]+)\(` + v.current + sel + rng + `\)` + conv + `)\)`)
}

// checkPair says what is wrong with one match of pairRE, or "".
func checkPair(v term, s []string) string {
	want := v.toLegacy
	if s[4] != "" && unscaled[s[4]] {
		want = ""
	}
	conv := strings.Join(strings.Fields(s[3]+s[10]), " ")
	switch {
	case s[4] != s[7]:
		return "reads the two names through different functions"
	case s[1] != s[2] || s[5] != s[8]:
		return "reads the two names with different matchers"
	case s[6] != s[9]:
		return "reads the two names over different ranges or offsets"
	case conv != want:
		return "converts " + v.current + " by " + strconv.Quote(conv) + ", want " + strconv.Quote(want) + " (vocabulary.tsv)"
	}
	return ""
}

// unscaled are the range functions that count samples: their result does
// not change with the unit.
var unscaled = map[string]bool{"count_over_time": true, "changes": true, "resets": true, "present_over_time": true}

// TestEverySelectorReadsBothVocabularies: every selector of a renamed field
// in every rule reads the legacy name or the current one converted to the
// legacy unit, with the same matchers, range and offset on both sides.
func TestEverySelectorReadsBothVocabularies(t *testing.T) {
	vocab := terms(t)
	checked := 0
	for _, r := range shippedRules(t) {
		rest := code(r.expr)
		for _, v := range vocab {
			re := pairRE(v)
			rest = re.ReplaceAllStringFunc(rest, func(m string) string {
				if msg := checkPair(v, re.FindStringSubmatch(m)); msg != "" {
					t.Errorf("%s: %s: %s %s", r.file, r.name, m, msg)
				}
				checked++
				return "PAIR"
			})
		}
		for _, n := range seriesNames(rest) {
			for _, v := range vocab {
				if n == v.legacy || n == v.current {
					t.Errorf("%s: %s reads %s in one vocabulary only: write (%s or %s%s) (grafana/dash/vocabulary.tsv)", r.file, r.name, n, v.legacy, v.current, " "+v.toLegacy)
				}
			}
		}
	}
	require.Positive(t, checked)
	t.Logf("%d selectors read in both vocabularies", checked)
}
