package rulevocab

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/gpuscope/gpuscope/internal/testkit/compattest"
	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

// defaultFieldsFile is the field list of dcgm-exporter's default counters
// file, kept in the repository so that the test runs without ../shared.
const defaultFieldsFile = "testdata/dcgm-exporter-default-fields.txt"

// defaultFields reads defaultFieldsFile: one field a line, # comments.
func defaultFields(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open(defaultFieldsFile)
	require.NoError(t, err)
	defer f.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		require.Regexp(t, `^DCGM_FI_[A-Z0-9_]+$`, line, "%s:%d", defaultFieldsFile, n)
		out[line] = true
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, out, defaultFieldsFile)
	return out
}

// TestDefaultFieldListIsDCGMExporters keeps the list equal to the series
// fields of dcgm-exporter's etc/default-counters.csv (commit d5e5f51, in
// ../shared/compat/dcgm-exporter/): every line but comments, blank lines
// and fields of type label, which become labels, not series.
func TestDefaultFieldListIsDCGMExporters(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(compattest.Dir(t), "default-counters.csv"))
	require.NoError(t, err)
	want := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		c := strings.Split(line, ",")
		require.GreaterOrEqual(t, len(c), 2, "default-counters.csv: %q", line)
		if strings.TrimSpace(c[1]) != "label" {
			want[strings.TrimSpace(c[0])] = true
		}
	}
	assert.Equal(t, want, defaultFields(t), "%s against dcgm-exporter's default-counters.csv", defaultFieldsFile)
}

// gpuscopeOnly says whether a series name is one that only gpuscope writes:
// its own families, and the window statistics and distributions of a field.
func gpuscopeOnly(name string) bool {
	return strings.HasPrefix(name, "gpuscope_") || strings.HasSuffix(name, "_window") || strings.HasSuffix(name, "_distribution")
}

// behindDCGMExporter says whether a Prometheus scraping dcgm-exporter with
// its default counters file holds series of the name: the file's fields,
// and the series of other exporters (up, kube-state-metrics), but no other
// DCGM field and nothing of gpuscope's own.
func behindDCGMExporter(fields map[string]bool) func(string) bool {
	return func(name string) bool {
		if strings.HasPrefix(name, "DCGM_FI_") && !strings.HasSuffix(name, "_window") && !strings.HasSuffix(name, "_distribution") {
			return fields[name]
		}
		return !gpuscopeOnly(name)
	}
}

var (
	alertnameRE   = regexp.MustCompile(`alertname="([A-Za-z0-9_]+)"`)
	failedAlertRE = regexp.MustCompile(`(?m)^\s*alertname: ([A-Za-z0-9_]+), time:`)
	failedExprRE  = regexp.MustCompile(`(?m)^\s*expr: "(.*)", time:`)
)

// keepSeries rewrites one promtool test file to the input series keep
// accepts. Only the tests of alerts stay: every alert_rule_test, and the
// expression tests of ALERTS that name one alert; the other expression
// tests check recording rules or raw data. It returns the file and the
// number of input series dropped; no file (nil) where no test group is
// left to run.
func keepSeries(t *testing.T, src, rulesDir string, keep func(string) bool) ([]byte, int) {
	t.Helper()
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal(b, &doc), src)
	files, _ := doc["rule_files"].([]any)
	for i, f := range files {
		files[i] = filepath.Join(rulesDir, filepath.Base(f.(string)))
	}
	dropped := 0
	tests, _ := doc["tests"].([]any)
	keptGroups := tests[:0]
	for _, tg := range tests {
		g := tg.(map[string]any)
		in, _ := g["input_series"].([]any)
		kept := in[:0]
		droppedHere := 0
		for _, s := range in {
			series := s.(map[string]any)["series"].(string)
			if name := nameRE.FindString(series); keep(name) {
				kept = append(kept, s)
			} else {
				droppedHere++
			}
		}
		dropped += droppedHere
		g["input_series"] = kept
		if exprs, ok := g["promql_expr_test"].([]any); ok {
			keptExprs := exprs[:0]
			for _, e := range exprs {
				expr := e.(map[string]any)["expr"].(string)
				if names := alertnameRE.FindAllStringSubmatch(expr, -1); strings.Contains(expr, "ALERTS") && len(names) == 1 {
					keptExprs = append(keptExprs, e)
				}
			}
			g["promql_expr_test"] = keptExprs
		}
		// A group that lost no series is the group scripts/test.sh runs
		// as it is, and one left with no alert to check checks nothing
		// here: neither can name an alert that needs more fields.
		alerts, _ := g["alert_rule_test"].([]any)
		exprs, _ := g["promql_expr_test"].([]any)
		if droppedHere > 0 && len(alerts)+len(exprs) > 0 {
			keptGroups = append(keptGroups, g)
		}
	}
	doc["tests"] = keptGroups
	if len(keptGroups) == 0 {
		return nil, dropped
	}
	out, err := yaml.Marshal(doc)
	require.NoError(t, err)
	return out, dropped
}

// failedAlerts are the alerts whose cases promtool's output reports failed.
func failedAlerts(out string) []string {
	var names []string
	for _, m := range failedAlertRE.FindAllStringSubmatch(out, -1) {
		names = append(names, m[1])
	}
	for _, m := range failedExprRE.FindAllStringSubmatch(out, -1) {
		if a := alertnameRE.FindStringSubmatch(strings.ReplaceAll(m[1], `\"`, `"`)); a != nil {
			names = append(names, a[1])
		}
	}
	return names
}

// TestAlertsOnDCGMExporterDefaultFields runs every alert's promtool cases
// (deploy/prometheus/tests) once more on exactly the series a Prometheus
// behind dcgm-exporter with its default counters file holds: every input
// series of another DCGM field, and of gpuscope's own families and window
// statistics, is dropped. The alerts whose cases then fail, firing where
// they should not or not where they should, need more than that file; the
// table of docs/answers.md, "Behind dcgm-exporter's default counters
// file", names exactly those, each with what it reads that the file lacks.
func TestAlertsOnDCGMExporterDefaultFields(t *testing.T) {
	tool := promtool(t)
	root := e2etest.RepoRoot()
	files, err := filepath.Glob(filepath.Join(root, "deploy", "prometheus", "tests", "*_test.yml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	keep := behindDCGMExporter(defaultFields(t))
	dir := t.TempDir()
	need := map[string]bool{}
	dropped := 0
	for _, f := range files {
		out, n := keepSeries(t, f, filepath.Join(root, "deploy", "prometheus"), keep)
		dropped += n
		if out == nil {
			continue
		}
		path := filepath.Join(dir, filepath.Base(f))
		out = withRulesItAsserts(t, out, strings.TrimSuffix(path, ".yml")+"-rules")
		require.NoError(t, os.WriteFile(path, out, 0o644))
		res, err := exec.Command(tool, "test", "rules", path).CombinedOutput()
		if err == nil {
			continue
		}
		failed := failedAlerts(string(res))
		require.NotEmpty(t, failed, "%s test rules %s (default fields only; kept in %s): %v, and no alert named failing:\n%s",
			tool, filepath.Base(f), path, err, res)
		for _, a := range failed {
			need[a] = true
		}
	}
	require.Positive(t, dropped, "no input series was dropped: the test would prove nothing")

	t.Logf("%d input series dropped; alerts that need more than the default fields: %s", dropped, strings.Join(sortedKeys(need), ", "))
	documented := documentedNeeds(t)
	assert.Equal(t, sortedKeys(need), sortedKeys(documented),
		"the alerts docs/answers.md lists as needing more than dcgm-exporter's default counters file: those whose promtool cases fail on it")
	reads := readsBeyond(t, keep)
	for a, fields := range documented {
		if need[a] {
			assert.Equal(t, reads[a], fields, "docs/answers.md: what %s reads that dcgm-exporter's default counters file lacks", a)
		}
	}
}

// readsBeyond gives, for every alert, the series it reads, directly or
// through recording rules, that a Prometheus behind dcgm-exporter with its
// default counters file lacks; a field read in both vocabularies counts
// once, by its legacy name.
func readsBeyond(t *testing.T, have func(string) bool) map[string][]string {
	t.Helper()
	legacy := map[string]string{}
	for _, v := range terms(t) {
		legacy[v.current] = v.legacy
	}
	rules := shippedRules(t)
	exprs := map[string][]string{}
	for _, r := range rules {
		exprs[r.name] = append(exprs[r.name], r.expr)
	}
	var walk func(name string, seen map[string]bool, into map[string]bool)
	walk = func(name string, seen map[string]bool, into map[string]bool) {
		for _, e := range exprs[name] {
			for _, n := range nameRE.FindAllString(code(e), -1) {
				if l, ok := legacy[n]; ok {
					n = l
				}
				switch {
				case seen[n]:
				case strings.Contains(n, ":"):
					seen[n] = true
					walk(n, seen, into)
				case (strings.HasPrefix(n, "DCGM_FI_") || gpuscopeOnly(n)) && !have(n):
					into[n] = true
				}
			}
		}
	}
	out := map[string][]string{}
	for _, r := range rules {
		if !strings.Contains(r.name, ":") && r.expr != "" {
			into := map[string]bool{}
			walk(r.name, map[string]bool{}, into)
			out[r.name] = sortedKeys(into)
		}
	}
	return out
}

const defaultFieldsSection = "## Behind dcgm-exporter's default counters file"

var (
	tableAlertRE = regexp.MustCompile(`^\| \[([A-Za-z0-9]+)\]\(runbooks\.md#[a-z0-9]+\) \|(.*)\|$`)
	backtickRE   = regexp.MustCompile("`([A-Za-z0-9_:]+)`")
)

// documentedNeeds reads the table of docs/answers.md's section: each row an
// alert and, in backticks, the series it reads that the file lacks.
func documentedNeeds(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e2etest.RepoRoot(), "docs", "answers.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(b), "\n"+defaultFieldsSection+"\n")
	require.True(t, ok, "docs/answers.md has no section %q", defaultFieldsSection)
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	out := map[string][]string{}
	for _, line := range strings.Split(section, "\n") {
		m := tableAlertRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var fields []string
		for _, f := range backtickRE.FindAllStringSubmatch(m[2], -1) {
			if !slices.Contains(fields, f[1]) {
				fields = append(fields, f[1])
			}
		}
		sort.Strings(fields)
		if fields == nil {
			fields = []string{}
		}
		out[m[1]] = fields
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
