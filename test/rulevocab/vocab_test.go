// Package rulevocab checks that the shipped alert and recording rules give
// the same answers whether the exporter writes dcgm-exporter's legacy field
// names and units or DCGM 4.6/4.7's names and base units: the vocabulary
// (grafana/dash/vocabulary.tsv) against DCGM's own header, every selector
// of the rules against the vocabulary, and every promtool test of the
// rules run again with its input series rewritten to the new names.
package rulevocab

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

// term is one row of grafana/dash/vocabulary.tsv.
type term struct {
	legacy, current, toLegacy, legacyUnit, currentUnit, kind string
}

func vocabulary(t *testing.T) []term {
	t.Helper()
	path := filepath.Join(e2etest.RepoRoot(), "grafana", "dash", "vocabulary.tsv")
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []term
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		c := strings.Split(line, "\t")
		require.Len(t, c, 6, "%s:%d", path, n)
		out = append(out, term{c[0], c[1], c[2], c[3], c[4], c[5]})
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, out)
	return out
}

// terms is the vocabulary with gpuscope's own families of each field whose
// unit does not change, which take the field's name as the counters file
// writes it (<FIELD>_window, <FIELD>_distribution: docs/metrics.md), as
// grafana/dash's Terms gives them to the dashboards.
func terms(t *testing.T) []term {
	t.Helper()
	out := vocabulary(t)
	for _, v := range out {
		if v.toLegacy != "" {
			continue
		}
		for _, suf := range []string{"_window", "_distribution"} {
			d := v
			d.legacy, d.current, d.kind = v.legacy+suf, v.current+suf, "derived"
			out = append(out, d)
		}
	}
	return out
}

// goDCGMVersion is the go-dcgm release whose dcgm_fields.h (DCGM 4.6.1) the
// vocabulary is checked against: the newest the module proxy serves.
const goDCGMVersion = "v1.4611.0"

// fieldsHeader reads pkg/dcgm/dcgm_fields.h of go-dcgm from the module
// cache (`go mod download github.com/NVIDIA/go-dcgm@v1.4611.0` puts it
// there); it skips where the cache lacks it, and fails under CI=true.
func fieldsHeader(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	require.NoError(t, err)
	path := filepath.Join(strings.TrimSpace(string(out)), "github.com", "!n!v!i!d!i!a", "go-dcgm@"+goDCGMVersion, "pkg", "dcgm", "dcgm_fields.h")
	b, err := os.ReadFile(path)
	if err != nil {
		msg := fmt.Sprintf("%s: %v (go mod download github.com/NVIDIA/go-dcgm@%s)", path, err, goDCGMVersion)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return string(b)
}

var defineRE = regexp.MustCompile(`(?m)^#define\s+(DCGM_FI_[A-Z0-9_]+)\s+([A-Z0-9_]+)`)

// header is what dcgm_fields.h defines: field IDs, and the deprecated
// aliases of its DCGM_DEPRECATED block (old name -> current name).
type header struct {
	ids        map[string]int
	deprecated map[string]string
}

func parseHeader(t *testing.T, text string) header {
	t.Helper()
	start := strings.Index(text, "#if DCGM_DEPRECATED")
	require.Positive(t, start, "dcgm_fields.h: no DCGM_DEPRECATED block")
	h := header{ids: map[string]int{}, deprecated: map[string]string{}}
	for _, m := range defineRE.FindAllStringSubmatchIndex(text, -1) {
		name, val := text[m[2]:m[3]], text[m[4]:m[5]]
		if id, err := strconv.Atoi(val); err == nil {
			h.ids[name] = id
		} else if m[0] > start && strings.HasPrefix(val, "DCGM_FI_") {
			h.deprecated[name] = val
		}
	}
	require.NotEmpty(t, h.ids)
	require.NotEmpty(t, h.deprecated)
	return h
}

// TestVocabularyMatchesDCGMHeader: an alias row is the header's deprecated
// alias (same field ID), a base-unit row two fields with IDs of their own,
// the current one among the base-unit IDs DCGM 4.6 added (1600 and up).
func TestVocabularyMatchesDCGMHeader(t *testing.T) {
	h := parseHeader(t, fieldsHeader(t))
	for _, v := range vocabulary(t) {
		t.Run(v.legacy, func(t *testing.T) {
			switch v.kind {
			case "alias":
				require.Equal(t, v.current, h.deprecated[v.legacy], "dcgm_fields.h's DCGM_DEPRECATED block maps %s to", v.legacy)
				require.Contains(t, h.ids, v.current)
			case "base-unit":
				require.NotContains(t, h.deprecated, v.legacy, "%s is a deprecated alias, not a field of its own", v.legacy)
				require.Contains(t, h.ids, v.legacy)
				require.Contains(t, h.ids, v.current)
				require.GreaterOrEqual(t, h.ids[v.current], 1600, "%s: a base-unit field under a new ID", v.current)
				require.NotEmpty(t, v.toLegacy, "%s and %s differ in unit", v.legacy, v.current)
			default:
				t.Fatalf("kind %q", v.kind)
			}
		})
	}
}

// TestRulesNameNoUnmappedDeprecatedField: a field the rules or dashboards
// read under a name DCGM deprecates is in the vocabulary, so that a new
// rule on, say, DCGM_FI_DEV_ENC_UTIL cannot miss its other name.
func TestRulesNameNoUnmappedDeprecatedField(t *testing.T) {
	h := parseHeader(t, fieldsHeader(t))
	mapped := map[string]bool{}
	for _, v := range vocabulary(t) {
		mapped[v.legacy] = true
	}
	for _, r := range shippedRules(t) {
		for _, n := range seriesNames(r.expr) {
			if cur, ok := h.deprecated[n]; ok && !mapped[n] {
				t.Errorf("%s: %s reads %s, which DCGM 4.6 renames to %s: add it to grafana/dash/vocabulary.tsv", r.file, r.name, n, cur)
			}
		}
	}
}
