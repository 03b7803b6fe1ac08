package verify

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// version is a Prometheus release, major.minor.
type version struct{ major, minor int }

func (v version) less(o version) bool {
	return v.major < o.major || v.major == o.major && v.minor < o.minor
}

func (v version) String() string { return fmt.Sprintf("%d.%d", v.major, v.minor) }

var versionRE = regexp.MustCompile(`(\d+)\.(\d+)`)

// parseVersion reads the first major.minor of s ("2.42.0+ds", "3.10").
func parseVersion(s string) (version, error) {
	m := versionRE.FindStringSubmatch(s)
	if m == nil {
		return version{}, fmt.Errorf("no version in %q", s)
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	return version{major, minor}, nil
}

// binaryVersion asks a prometheus or promtool binary for its version.
func binaryVersion(bin string) (version, error) {
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		return version{}, fmt.Errorf("%s --version: %w: %s", bin, err, out)
	}
	// "prometheus, version 2.42.0+ds (branch: ...)"
	_, rest, ok := strings.Cut(string(out), "version ")
	if !ok {
		return version{}, fmt.Errorf("%s --version printed no version: %s", bin, out)
	}
	return parseVersion(rest)
}

// groupNeed is what one rule group needs of Prometheus.
type groupNeed struct {
	file, group string
	min         version
	flags       []string // feature flags, sorted
	limiting    []need   // the needs that set min
}

// tokens of PromQL: strings, comments, numbers and durations, identifiers,
// and single characters.
var promqlToken = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`|#[^\\n]*|[0-9][0-9a-zA-Z_.]*|[a-zA-Z_:][a-zA-Z0-9_:]*|\\s+|.")

type token struct {
	text string
	pos  int
}

// lex splits an expression into tokens, leaving out spaces and comments.
func lex(expr string) []token {
	var out []token
	for _, loc := range promqlToken.FindAllStringIndex(expr, -1) {
		s := expr[loc[0]:loc[1]]
		if strings.TrimSpace(s) == "" || strings.HasPrefix(s, "#") {
			continue
		}
		out = append(out, token{s, loc[0]})
	}
	return out
}

func isIdent(s string) bool {
	c := s[0]
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// exprShape is what a scan of one expression finds.
type exprShape struct {
	calls []string
	// selectors are the metric names the expression reads.
	selectors []string
	// unconverted are the selectors that reach the result outside any call
	// that turns histograms into floats.
	unconverted []string
}

// scanExpr finds the calls and the metric names of a PromQL expression.
// Label matchers, grouping lists and ranges are skipped.
func scanExpr(expr string) exprShape {
	var sh exprShape
	toks := lex(expr)
	// stack of open parentheses: the call each belongs to ("" for none).
	var stack []string
	skipList := false
	for i := 0; i < len(toks); i++ {
		t := toks[i].text
		next := ""
		if i+1 < len(toks) {
			next = toks[i+1].text
		}
		switch {
		case t == "{":
			for i < len(toks) && toks[i].text != "}" {
				i++
			}
		case t == "[":
			for i < len(toks) && toks[i].text != "]" {
				i++
			}
		case t == "(":
			if skipList {
				for i < len(toks) && toks[i].text != ")" {
					i++
				}
				skipList = false
				continue
			}
			stack = append(stack, "")
		case t == ")":
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case !isIdent(t):
		case promqlKeywords[t]:
			switch t {
			case "by", "without", "on", "ignoring", "group_left", "group_right":
				skipList = next == "("
			}
		case next == "(":
			sh.calls = append(sh.calls, t)
			stack = append(stack, t)
			i++
		case next == "by" || next == "without":
			// An aggregation with its grouping first: sum by (a) (x).
			sh.calls = append(sh.calls, t)
		default:
			sh.selectors = append(sh.selectors, t)
			converted := false
			for _, c := range stack {
				converted = converted || histogramToFloat[c]
			}
			if !converted {
				sh.unconverted = append(sh.unconverted, t)
			}
		}
	}
	return sh
}

var templateAction = regexp.MustCompile(`\{\{(.*?)\}\}`)

// templateCalls finds the function names of the template actions of s.
func templateCalls(s string) []string {
	var out []string
	for _, m := range templateAction.FindAllStringSubmatch(s, -1) {
		for _, tok := range lex(strings.Trim(m[1], "- ")) {
			w := tok.text
			if !isIdent(w) || strings.HasPrefix(w, "$") || goTemplateWords[w] {
				continue
			}
			// .Labels and $labels.x are fields, not calls.
			if tok.pos > 0 {
				if prev := strings.Trim(m[1], "- ")[tok.pos-1]; prev == '.' || prev == '$' {
					continue
				}
			}
			out = append(out, w)
		}
	}
	return out
}

// ruleFileGroups reads the rule groups of a file as plain maps, so that
// every key is seen.
func ruleFileGroups(path string) ([]map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Groups []map[string]any `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	return doc.Groups, nil
}

// ruleFiles lists the shipped rule files, whatever they are named.
func ruleFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "deploy/prometheus/*.yml"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no rule files in deploy/prometheus")
	return files
}

// groupNeeds works out what each rule group of the files needs. A feature
// the tables above do not know is an error that names it, so that a rule
// using something new is looked up before it ships.
func groupNeeds(files []string) ([]groupNeed, error) {
	var out []groupNeed
	var problems []string
	// Recorded names whose value is a native histogram; rules of a group
	// run in order, and groups are read in order, so a reader comes after
	// its writer.
	histograms := map[string]bool{}
	for _, f := range files {
		groups, err := ruleFileGroups(f)
		if err != nil {
			return nil, err
		}
		for _, g := range groups {
			gn := groupNeed{file: filepath.Base(f), group: fmt.Sprint(g["name"])}
			var needs []need
			where := func(s string) string { return fmt.Sprintf("%s, group %s: %s", gn.file, gn.group, s) }
			for k := range g {
				n, ok := groupFields[k]
				if !ok {
					problems = append(problems, where(fmt.Sprintf("group field %q is not in groupFields", k)))
					continue
				}
				n.what = k
				needs = append(needs, n)
			}
			rules, _ := g["rules"].([]any)
			for _, r := range rules {
				rule, _ := r.(map[string]any)
				rn, rp := ruleNeeds(rule, histograms)
				needs = append(needs, rn...)
				for _, p := range rp {
					problems = append(problems, where(p))
				}
			}
			gn.min, gn.flags, gn.limiting = combine(needs)
			out = append(out, gn)
		}
	}
	if len(problems) > 0 {
		return out, fmt.Errorf("features of unknown Prometheus version (look each up in Prometheus' CHANGELOG.md and add it to grafana/verify/promversion_test.go):\n%s",
			strings.Join(problems, "\n"))
	}
	return out, nil
}

// ruleNeeds lists what one rule needs, and the names it uses that no table
// knows. histograms gains the rule's name when it records a histogram.
func ruleNeeds(rule map[string]any, histograms map[string]bool) ([]need, []string) {
	var needs []need
	var problems []string
	name := fmt.Sprint(rule["alert"], rule["record"])
	for k := range rule {
		n, ok := ruleFields[k]
		if !ok {
			problems = append(problems, fmt.Sprintf("rule %s: field %q is not in ruleFields", name, k))
			continue
		}
		n.what = k
		needs = append(needs, n)
	}
	expr := fmt.Sprint(rule["expr"])
	sh := scanExpr(expr)
	for _, c := range sh.calls {
		n, ok := promqlCalls[c]
		if !ok {
			problems = append(problems, fmt.Sprintf("rule %s: PromQL call %s is not in promqlCalls", name, c))
			continue
		}
		n.what = c
		needs = append(needs, n)
	}
	for _, s := range syntaxNeeds {
		if s.re.MatchString(expr) {
			needs = append(needs, s.need)
		}
	}
	isHist := func(sel string) bool { return strings.HasSuffix(sel, "_distribution") || histograms[sel] }
	for _, sel := range sh.selectors {
		if isHist(sel) {
			needs = append(needs, readsNativeHistograms)
			break
		}
	}
	if rec, ok := rule["record"].(string); ok {
		for _, sel := range sh.unconverted {
			if isHist(sel) {
				histograms[rec] = true
				needs = append(needs, recordsNativeHistograms)
				break
			}
		}
	}
	for _, field := range []string{"annotations", "labels"} {
		m, _ := rule[field].(map[string]any)
		for _, v := range m {
			for _, c := range templateCalls(fmt.Sprint(v)) {
				n, ok := templateFuncs[c]
				if !ok {
					problems = append(problems, fmt.Sprintf("rule %s: template function %s is not in templateFuncs", name, c))
					continue
				}
				n.what = c
				needs = append(needs, n)
			}
		}
	}
	return needs, problems
}

// combine gives the release every need is met by, the feature flags they
// ask for, and the needs that set that release.
func combine(needs []need) (version, []string, []need) {
	min := classic.since
	flags := map[string]bool{}
	for _, n := range needs {
		if min.less(n.since) {
			min = n.since
		}
		if n.flag != "" {
			flags[n.flag] = true
		}
	}
	var limiting []need
	seen := map[string]bool{}
	for _, n := range needs {
		if n.since == min && !seen[n.what] {
			seen[n.what] = true
			limiting = append(limiting, n)
		}
	}
	sort.Slice(limiting, func(i, j int) bool { return limiting[i].what < limiting[j].what })
	var fl []string
	for f := range flags {
		fl = append(fl, f)
	}
	sort.Strings(fl)
	return min, fl, limiting
}

func TestScanExpr(t *testing.T) {
	tests := []struct {
		expr                          string
		calls, selectors, unconverted []string
	}{
		{`sum by (cluster, Hostname) (rate(X_distribution[5m]))`,
			[]string{"sum", "rate"}, []string{"X_distribution"}, []string{"X_distribution"}},
		{`histogram_quantile(0.99, sum by (pod) (a:b:rate5m{pod!=""}))`,
			[]string{"histogram_quantile", "sum"}, []string{"a:b:rate5m"}, nil},
		{"time() - x{xid=~\"13|31\"} < 900 # a comment (not a call)",
			[]string{"time"}, []string{"x"}, []string{"x"}},
		{`a - a offset 30m > 1024 and on (cluster) group_left () b > bool 0`,
			nil, []string{"a", "a", "b"}, []string{"a", "a", "b"}},
		{`absent(up{job=~".*gpuscope.*"}) or vector(1) > Inf`,
			[]string{"absent", "vector"}, []string{"up"}, []string{"up"}},
		{`max by (x) (m[5m:1m]) unless count without (gpu) (n) @ start()`,
			[]string{"max", "count", "start"}, []string{"m", "n"}, []string{"m", "n"}},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			sh := scanExpr(tt.expr)
			require.Equal(t, tt.calls, sh.calls, "calls")
			require.Equal(t, tt.selectors, sh.selectors, "selectors")
			require.Equal(t, tt.unconverted, sh.unconverted, "unconverted")
		})
	}
}

func TestTemplateCalls(t *testing.T) {
	got := templateCalls(`{{ $value | humanizePercentage }} on {{ $labels.Hostname }}{{ if $labels.pod }} ({{ .Labels.pod | toUpper }}){{ end }} {{ printf "%.0f" $value }} {{- or $labels.a $labels.b -}}`)
	require.Equal(t, []string{"humanizePercentage", "toUpper"}, got)
}

// TestNeedsOfRuleGroups works the minimum release of made-up groups out
// from their rules: the facts are Prometheus' own release notes.
func TestNeedsOfRuleGroups(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "rules.yml")
	require.NoError(t, os.WriteFile(file, []byte(`groups:
  - name: plain
    rules:
      - alert: A
        expr: rate(x[5m]) > 0
        annotations: {summary: "{{ $value | humanize }}"}
  - name: keep
    rules:
      - alert: B
        expr: last_over_time(x[5m]) > 0
        keep_firing_for: 5m
  - name: hist
    rules:
      - record: h:rate5m
        expr: sum(rate(x_distribution[5m]))
      - record: h:p99
        expr: histogram_quantile(0.99, h:rate5m)
  - name: histread
    rules:
      - record: h:count
        expr: histogram_count(h:rate5m)
  - name: experimental
    query_offset: 1m
    rules:
      - record: s
        expr: sort_by_label(x, "a")
`), 0o600))
	got, err := groupNeeds([]string{file})
	require.NoError(t, err)
	summary := map[string]string{}
	for _, g := range got {
		var whats []string
		for _, n := range g.limiting {
			whats = append(whats, n.what)
		}
		summary[g.group] = fmt.Sprintf("%s %v %v", g.min, g.flags, whats)
	}
	require.Equal(t, map[string]string{
		"plain":        "2.0 [] [alert annotations expr humanize name rate rules]",
		"keep":         "2.42 [] [keep_firing_for]",
		"hist":         "2.47 [native-histograms] [records native histograms]",
		"histread":     "2.40 [native-histograms] [histogram_count reads native histograms]",
		"experimental": "2.53 [promql-experimental-functions] [query_offset]",
	}, summary)

	require.NoError(t, os.WriteFile(file, []byte("groups:\n  - name: new\n    rules:\n      - alert: C\n        expr: brand_new_function(x) > 0\n        annotations: {summary: \"{{ $value | shout }}\"}\n"), 0o600))
	_, err = groupNeeds([]string{file})
	require.ErrorContains(t, err, "PromQL call brand_new_function is not in promqlCalls")
	require.ErrorContains(t, err, "template function shout is not in templateFuncs")
}

// versionsDoc is where the minimum release of each rule group is written
// for operators.
const versionsDoc = "docs/kubernetes.md"

const versionsHeading = "## Prometheus versions the rules need"

// documentedVersions reads the table of versionsDoc's section: group ->
// the row's text.
func documentedVersions(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, versionsDoc))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(b), "\n"+versionsHeading+"\n")
	require.True(t, ok, "%s has no section %q", versionsDoc, versionsHeading)
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	rows := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		rows[strings.Trim(strings.TrimSpace(cells[1]), "`")] = line
	}
	return rows
}

// TestRuleGroupVersionsAreDocumented: every rule group shipped has a row
// in the versions table of docs/kubernetes.md giving the release its rules
// need, as worked out from Prometheus' release notes, with what sets it and
// the feature flags it needs; and the table names no group that is gone.
func TestRuleGroupVersionsAreDocumented(t *testing.T) {
	groups, err := groupNeeds(ruleFiles(t))
	require.NoError(t, err)
	rows := documentedVersions(t)
	var want []string
	for _, g := range groups {
		line := expectedRow(g)
		want = append(want, line)
		row, ok := rows[g.group]
		delete(rows, g.group)
		if !ok {
			t.Errorf("%s: no row for group %s", versionsDoc, g.group)
			continue
		}
		cells := strings.Split(row, "|")
		require.GreaterOrEqual(t, len(cells), 5, "%s: row %q", versionsDoc, row)
		v, err := parseVersion(cells[3])
		if err != nil || v != g.min {
			t.Errorf("%s: group %s needs Prometheus %s, the table says %q", versionsDoc, g.group, g.min, strings.TrimSpace(cells[3]))
		}
		if g.min != classic.since {
			for _, n := range g.limiting {
				if !strings.Contains(row, n.what) {
					t.Errorf("%s: group %s: the row does not name %q, which needs %s (%s)", versionsDoc, g.group, n.what, n.since, n.source)
				}
			}
		}
		for _, f := range g.flags {
			if !strings.Contains(row, f) {
				t.Errorf("%s: group %s: the row does not name the feature %q it needs", versionsDoc, g.group, f)
			}
		}
	}
	for g := range rows {
		t.Errorf("%s: group %s is in the table but in no rule file", versionsDoc, g)
	}
	if t.Failed() {
		t.Logf("rows as the rules need them (the last column is to be written):\n%s", strings.Join(want, "\n"))
	}
}

func expectedRow(g groupNeed) string {
	var why []string
	if g.min != classic.since {
		for _, n := range g.limiting {
			why = append(why, fmt.Sprintf("%s (%s)", n.what, n.source))
		}
	}
	for _, f := range g.flags {
		why = append(why, "feature "+f)
	}
	return fmt.Sprintf("| `%s` | `%s` | %s | %s |", g.group, g.file, g.min, strings.Join(why, "; "))
}
