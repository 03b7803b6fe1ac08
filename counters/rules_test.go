package counters

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// alternativePair is "(OLD or NEW op k)" in a rule, each side a bare
// selector or a function of one: "X{...} or Y{...} * 1000",
// "rate(X[5m]) or rate(Y[5m]) * 1000", "(A or B * 100) / 100".
var alternativePair = regexp.MustCompile(
	`([a-z_]+\()?(DCGM_FI_[A-Z0-9_]+)(?:\{[^}]*\})?(?:\[[^\]]*\](?: offset [0-9a-z]+)?\))?` +
		`\s+or\s+` +
		`(?:[a-z_]+\()?(DCGM_FI_[A-Z0-9_]+)(?:\{[^}]*\})?(?:\[[^\]]*\](?: offset [0-9a-z]+)?\))?` +
		`(\s*[*/]\s*[0-9][0-9.e+]*)?`)

// Every alternative the shipped rules read beside a field is one of the
// catalog's other names of it, with the catalog's factor: the rules and
// the catalog (go-dcgm v1.4611.0's dcgm_fields.h and DCGM 4.7's field
// reference, fieldid/dcgm47.go) cannot drift apart.
func TestRulesAlternativesAgreeWithTheCatalog(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "deploy", "prometheus", "*.yml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	pairs := 0
	for _, file := range files {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		for _, m := range alternativePair.FindAllStringSubmatch(string(b), -1) {
			fn, old, alt, op := m[1], m[2], m[3], strings.ReplaceAll(m[4], " ", "")
			if old == alt {
				continue // one field, two label selections
			}
			want := 1.0
			if op != "" {
				k, err := strconv.ParseFloat(op[1:], 64)
				require.NoError(t, err, m[0])
				want = k
				if op[0] == '/' {
					want = 1 / k
				}
			}
			pairs++
			got, ok := factorOf(old, alt)
			if assert.True(t, ok, "%s: %q: %s is not an other name of %s in the catalog", file, m[0], alt, old) {
				if fn == "count_over_time(" {
					got = 1 // a count of samples has no unit
				}
				assert.InDelta(t, want, got, want*1e-12, "%s: %q: the factor of %s into %s's unit", file, m[0], alt, old)
			}
		}
	}
	assert.Greater(t, pairs, 20, "the rules read renamed fields in both vocabularies")
}

func factorOf(name, alt string) (float64, bool) {
	for _, a := range OtherNames(name) {
		if a.Name == alt {
			return a.Factor, true
		}
	}
	return 0, false
}
