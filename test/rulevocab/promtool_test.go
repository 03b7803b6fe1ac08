package rulevocab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
	"github.com/gpuscope/gpuscope/internal/testkit/rulesubset"
)

// fromLegacy converts a legacy-unit value to the current unit: the inverse
// of the term's to_legacy ("* 100" divides, "/ 1e6" multiplies).
func fromLegacy(v term, x float64) (float64, error) {
	if v.toLegacy == "" {
		return x, nil
	}
	f := strings.Fields(v.toLegacy)
	if len(f) != 2 {
		return 0, fmt.Errorf("%s: to_legacy %q: want an operator and a number", v.legacy, v.toLegacy)
	}
	k, err := strconv.ParseFloat(f[1], 64)
	if err != nil {
		return 0, fmt.Errorf("%s: to_legacy %q: %w", v.legacy, v.toLegacy, err)
	}
	switch f[0] {
	case "*":
		return x / k, nil
	case "/":
		return x * k, nil
	}
	return 0, fmt.Errorf("%s: to_legacy %q: operator %q", v.legacy, v.toLegacy, f[0])
}

// valueRE is one item of promtool's expanding notation: a, axN, a+bxN, a-bxN.
var valueRE = regexp.MustCompile(`^(-?[0-9.]+(?:e[+-]?[0-9]+)?)(?:([+-])([0-9.]+(?:e[+-]?[0-9]+)?))?(x[0-9]+)?$`)

func num(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// convertValues rewrites an input series' values into the current unit.
func convertValues(v term, values string) (string, error) {
	if v.toLegacy == "" {
		return values, nil // same unit; native-histogram notation stays as it is
	}
	items := strings.Fields(values)
	for i, it := range items {
		if it == "stale" || strings.HasPrefix(it, "_") {
			continue
		}
		m := valueRE.FindStringSubmatch(it)
		if m == nil {
			return "", fmt.Errorf("value %q: not promtool's expanding notation", it)
		}
		a, _ := strconv.ParseFloat(m[1], 64)
		ca, err := fromLegacy(v, a)
		if err != nil {
			return "", err
		}
		out := num(ca)
		if m[2] != "" {
			b, _ := strconv.ParseFloat(m[3], 64)
			cb, _ := fromLegacy(v, b)
			out += m[2] + num(cb)
		}
		items[i] = out + m[4]
	}
	return strings.Join(items, " "), nil
}

// rename replaces every legacy name in s, as a whole name, by the current one.
func rename(vocab []term, s string) string {
	return nameRE.ReplaceAllStringFunc(s, func(n string) string {
		for _, v := range vocab {
			if n == v.legacy {
				return v.current
			}
		}
		return n
	})
}

// translate rewrites one promtool test file into the current vocabulary:
// each input series of a renamed field that pick chooses gets the current
// name and its values the current unit, and a label value naming a field
// (the field label of gpuscope_field_supported) the current name, in the
// expected alerts too. An expression test that reads a renamed field
// directly tests the data, not the rules, and is dropped. rule_files
// become absolute paths into rulesDir.
//
// A test group that comes out as it was, with no series renamed, is left
// out: scripts/test.sh runs it as it is, with both promtools. So is, where
// mixed, a group whose every renamable series pick chose: it is the group
// of the new vocabulary's run. groups is how many are left.
func translate(t *testing.T, vocab []term, src, rulesDir string, pick func(i int) bool, mixed bool) (out []byte, series, dropped, groups int) {
	t.Helper()
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal(b, &doc), src)
	files, _ := doc["rule_files"].([]any)
	for i, f := range files {
		files[i] = filepath.Join(rulesDir, filepath.Base(f.(string)))
	}
	tests, _ := doc["tests"].([]any)
	keptGroups := tests[:0]
	for _, tg := range tests {
		g := tg.(map[string]any)
		// The GPUs whose field label was renamed in the input, UUID/field.
		renamedFields := map[string]bool{}
		renamable, renamed := 0, 0
		in, _ := g["input_series"].([]any)
		for i, s := range in {
			is := s.(map[string]any)
			name := is["series"].(string)
			current := rename(vocab, name)
			if current == name {
				continue
			}
			renamable++
			if !pick(i) {
				continue
			}
			renamed++
			for _, v := range vocab {
				if strings.HasPrefix(name, v.legacy+"{") || name == v.legacy {
					vals, err := convertValues(v, fmt.Sprint(is["values"]))
					require.NoError(t, err, "%s: %s", src, name)
					is["values"] = vals
					series++
				}
			}
			is["series"] = current
			if f := fieldLabelRE.FindStringSubmatch(name); f != nil && rename(vocab, f[1]) != f[1] {
				u := uuidLabelRE.FindStringSubmatch(name)
				require.NotNil(t, u, "%s: %s has a field label and no UUID", src, name)
				renamedFields[u[1]+"/"+f[1]] = true
			}
		}
		if exprs, ok := g["promql_expr_test"].([]any); ok {
			kept := exprs[:0]
			for _, e := range exprs {
				if expr := e.(map[string]any)["expr"].(string); rename(vocab, code(expr)) != code(expr) {
					dropped++
					continue
				}
				kept = append(kept, e)
			}
			g["promql_expr_test"] = kept
		}
		if alerts, ok := g["alert_rule_test"].([]any); ok {
			for _, a := range alerts {
				exp, _ := a.(map[string]any)["exp_alerts"].([]any)
				for _, x := range exp {
					renameFieldLabel(vocab, x.(map[string]any), renamedFields)
				}
			}
		}
		if renamed > 0 && (!mixed || renamed < renamable) {
			keptGroups = append(keptGroups, g)
		}
	}
	doc["tests"] = keptGroups
	out, err = yaml.Marshal(doc)
	require.NoError(t, err)
	return out, series, dropped, len(keptGroups)
}

var (
	fieldLabelRE = regexp.MustCompile(`\bfield="([^"]*)"`)
	uuidLabelRE  = regexp.MustCompile(`\bUUID="([^"]*)"`)
)

// renameFieldLabel renames the field label of an expected alert, and its
// echo in the annotations, where the input renamed it for that GPU.
func renameFieldLabel(vocab []term, alert map[string]any, renamed map[string]bool) {
	labels, _ := alert["exp_labels"].(map[string]any)
	field, _ := labels["field"].(string)
	uuid, _ := labels["UUID"].(string)
	if field == "" || !renamed[uuid+"/"+field] {
		return
	}
	renamedField := rename(vocab, field)
	labels["field"] = renamedField
	ann, _ := alert["exp_annotations"].(map[string]any)
	for k, v := range ann {
		if s, ok := v.(string); ok {
			ann[k] = strings.ReplaceAll(s, field, renamedField)
		}
	}
}

// withRulesItAsserts points a promtool test file's rule files at the part
// of them its tests assert, written into dir: the alerts its alert tests
// name and the rules its expression tests read, with the recording rules
// those read (rulesubset). The other rules cannot change what the tests
// check; scripts/test.sh runs the shipped tests against every rule.
func withRulesItAsserts(t *testing.T, test []byte, dir string) []byte {
	t.Helper()
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal(test, &doc))
	var files, alerts, exprs []string
	for _, f := range doc["rule_files"].([]any) {
		files = append(files, f.(string))
	}
	tests, _ := doc["tests"].([]any)
	for _, tg := range tests {
		g := tg.(map[string]any)
		at, _ := g["alert_rule_test"].([]any)
		for _, a := range at {
			alerts = append(alerts, a.(map[string]any)["alertname"].(string))
		}
		et, _ := g["promql_expr_test"].([]any)
		for _, e := range et {
			exprs = append(exprs, e.(map[string]any)["expr"].(string))
		}
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	subset, err := rulesubset.Write(files, alerts, exprs, dir)
	require.NoError(t, err)
	ruleFiles := make([]any, len(subset))
	for i, p := range subset {
		ruleFiles[i] = p
	}
	doc["rule_files"] = ruleFiles
	out, err := yaml.Marshal(doc)
	require.NoError(t, err)
	return out
}

func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("GPUSCOPE_PROMTOOL3"); p != "" {
		return p
	}
	return e2etest.RequireTool(t, "promtool")
}

// TestPromtoolTestsPassInTheNewVocabulary runs every promtool test of the
// rules (deploy/prometheus/tests: each alert's firing and quiet cases, and
// the controls) again on input written in DCGM 4.6/4.7's names and units.
// GPUSCOPE_RULES_DIR points it at other rule files (an older release's,
// to see the rewritten tests fail there).
func TestPromtoolTestsPassInTheNewVocabulary(t *testing.T) {
	runTranslated(t, func(int) bool { return true }, false)
}

// TestPromtoolTestsPassInAMixedFleet runs them on input where every other
// series is in the new vocabulary: GPUs and nodes whose counters files mix
// both, as a fleet upgrading node by node does.
func TestPromtoolTestsPassInAMixedFleet(t *testing.T) {
	runTranslated(t, func(i int) bool { return i%2 == 1 }, true)
}

func runTranslated(t *testing.T, pick func(i int) bool, mixed bool) {
	tool := promtool(t)
	vocab := terms(t)
	root := e2etest.RepoRoot()
	rulesDir := filepath.Join(root, "deploy", "prometheus")
	if d := os.Getenv("GPUSCOPE_RULES_DIR"); d != "" {
		rulesDir = d
	}
	files, err := filepath.Glob(filepath.Join(root, "deploy", "prometheus", "tests", "*_test.yml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	// Debian's promtool 2.42 cannot read native-histogram input series;
	// scripts/test.sh names a promtool 3 that can.
	if os.Getenv("GPUSCOPE_PROMTOOL3") != "" {
		nh, err := filepath.Glob(filepath.Join(root, "deploy", "prometheus", "tests", "native-histograms", "*_test.yml"))
		require.NoError(t, err)
		files = append(files, nh...)
	}
	dir := t.TempDir()
	total := 0
	for _, f := range files {
		out, series, dropped, groups := translate(t, vocab, f, rulesDir, pick, mixed)
		total += series
		if groups == 0 {
			t.Logf("%s: no test group changes in this vocabulary; scripts/test.sh runs them as they are", filepath.Base(f))
			continue
		}
		t.Run(strings.TrimSuffix(filepath.Base(f), "_test.yml"), func(t *testing.T) {
			path := filepath.Join(dir, filepath.Base(f))
			out := withRulesItAsserts(t, out, strings.TrimSuffix(path, ".yml")+"-rules")
			require.NoError(t, os.WriteFile(path, out, 0o644))
			t.Logf("%d test groups, %d input series in the new vocabulary, %d expression tests of raw fields left out", groups, series, dropped)
			res, err := exec.Command(tool, "test", "rules", path).CombinedOutput()
			if err != nil {
				t.Errorf("%s test rules %s (new vocabulary; kept in %s): %v\n%s", tool, filepath.Base(f), path, err, res)
			}
		})
	}
	require.Positive(t, total, "no test input names a renamed field")
}
