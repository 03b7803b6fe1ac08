package verify

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/grafana/dash"
)

const capabilitiesSection = "### Without capabilities"

// The bold labels of the section's list, which the test reads.
const (
	bulletFields      = "Fields"
	bulletRecording   = "Recording rules"
	bulletAlertsLost  = "Alerts that can no longer fire"
	bulletAlertsFewer = "Alerts that judge from fewer fields"
)

// capabilitiesDoc is what docs/kubernetes.md says an install with
// counters.profiling=false loses.
type capabilitiesDoc struct {
	fields map[string]bool // the DCGM_FI_PROF_* fields of the Fields bullet
	groups map[string]bool // the rule groups the Recording rules bullet names
	// alerts that can no longer fire, and alerts that judge from fewer
	// fields: the backticked alert names of each bullet (an alert named
	// in passing is written without backticks).
	lost, fewer map[string]bool
	panels      map[string]map[string]bool // dashboard file -> the quoted titles of its table row
}

var (
	bulletStart = regexp.MustCompile(`^- \*\*([^*]+)\*\*`)
	backticked  = regexp.MustCompile("`([A-Za-z_][A-Za-z0-9_.]*)`")
	panelRow    = regexp.MustCompile("^\\| `(gpuscope-[a-z]+\\.json)` \\|(.*)$")
	quoted      = regexp.MustCompile(`"([^"]+)"`)
)

// readCapabilitiesDoc reads the section of docs/kubernetes.md: its bullets,
// each from "- **Label**" to the next line that does not continue it, and
// its table of panels.
func readCapabilitiesDoc(t *testing.T, alertNames map[string]bool) capabilitiesDoc {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs/kubernetes.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(b), "\n"+capabilitiesSection+"\n")
	require.True(t, ok, "docs/kubernetes.md has no section %q", capabilitiesSection)
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	bullets := map[string]string{}
	label := ""
	d := capabilitiesDoc{fields: map[string]bool{}, groups: map[string]bool{}, lost: map[string]bool{},
		fewer: map[string]bool{}, panels: map[string]map[string]bool{}}
	for _, line := range strings.Split(section, "\n") {
		if m := bulletStart.FindStringSubmatch(line); m != nil {
			label = m[1]
		} else if !strings.HasPrefix(line, "  ") {
			label = ""
		}
		if label != "" {
			bullets[label] += line + "\n"
		}
		if m := panelRow.FindStringSubmatch(line); m != nil {
			d.panels[m[1]] = map[string]bool{}
			for _, tm := range quoted.FindAllStringSubmatch(m[2], -1) {
				d.panels[m[1]][tm[1]] = true
			}
		}
	}
	for _, l := range []string{bulletFields, bulletRecording, bulletAlertsLost, bulletAlertsFewer} {
		require.Contains(t, bullets, l, "docs/kubernetes.md, %q: no bullet \"- **%s**\"", capabilitiesSection, l)
	}
	names := func(label string, keep func(string) bool, into map[string]bool) {
		for _, m := range backticked.FindAllStringSubmatch(bullets[label], -1) {
			if keep(m[1]) {
				into[m[1]] = true
			}
		}
	}
	names(bulletFields, func(n string) bool { return strings.HasPrefix(n, "DCGM_FI_PROF_") }, d.fields)
	names(bulletRecording, func(n string) bool { return strings.HasPrefix(n, "gpuscope.") }, d.groups)
	names(bulletAlertsLost, func(n string) bool { return alertNames[n] }, d.lost)
	names(bulletAlertsFewer, func(n string) bool { return alertNames[n] }, d.fewer)
	return d
}

// insightFamilies are the series of --insight (docs/insight.md).
var insightFamilies = map[string]bool{
	"gpuscope_gpu_step_period_seconds": true, "gpuscope_gpu_step_period_confidence": true, "gpuscope_gpu_stall_ratio": true,
	"gpuscope_gpu_stalls_total": true, "gpuscope_gpu_bound_ratio": true, "gpuscope_insight_supported": true,
}

// lostWithoutProfiling tells the series an install without capabilities
// does not serve: the profiling fields, with their window statistics and
// histograms, and the insight series.
func lostWithoutProfiling(name string) bool {
	return strings.HasPrefix(name, "DCGM_FI_PROF_") || insightFamilies[name]
}

// ruleIndex is the rules of a set of files as the analysis reads them.
type ruleIndex struct {
	records map[string][]string // recorded name -> the expressions that record it
	groupOf map[string]string   // recorded name -> its group
	alerts  map[string]string   // alert -> its expression
}

func readRuleIndex(t *testing.T, files []string) ruleIndex {
	t.Helper()
	ri := ruleIndex{records: map[string][]string{}, groupOf: map[string]string{}, alerts: map[string]string{}}
	for _, f := range files {
		groups, err := ruleFileGroups(f)
		require.NoError(t, err)
		for _, g := range groups {
			rules, _ := g["rules"].([]any)
			for _, ru := range rules {
				m, _ := ru.(map[string]any)
				expr := fmt.Sprint(m["expr"])
				if rec, ok := m["record"].(string); ok {
					ri.records[rec] = append(ri.records[rec], expr)
					ri.groupOf[rec] = fmt.Sprint(g["name"])
				} else {
					ri.alerts[fmt.Sprint(m["alert"])] = expr
				}
			}
		}
	}
	return ri
}

// reads lists the metric names expr reads, and, through the recording
// rules it reads, the names those read, to the series the exporter serves.
func (ri ruleIndex) reads(expr string) map[string]bool {
	out := map[string]bool{}
	var walk func(string)
	walk = func(e string) {
		for _, s := range scanExpr(e).selectors {
			if out[s] {
				continue
			}
			out[s] = true
			for _, re := range ri.records[s] {
				walk(re)
			}
		}
	}
	walk(expr)
	return out
}

// served gives, for canHaveSeries, whether a name has series: a recorded
// name when one of its rules can have series, any other when has says so.
func (ri ruleIndex) served(t *testing.T, has func(string) bool) func(string) bool {
	memo := map[string]bool{}
	var served func(string) bool
	served = func(name string) bool {
		if v, ok := memo[name]; ok {
			return v
		}
		exprs, recorded := ri.records[name]
		if !recorded {
			memo[name] = has(name)
			return memo[name]
		}
		memo[name] = false // the rules form no cycle; this ends one if they did
		for _, e := range exprs {
			ok, err := canHaveSeries(e, served)
			require.NoError(t, err, "the rule recording %s", name)
			memo[name] = memo[name] || ok
		}
		return memo[name]
	}
	return served
}

// alertsWithout sorts the alerts by what served leaves them: lost, when
// the expression can have no series; fewer, when it can but reads,
// directly or through a recording rule, a name that has none.
func (ri ruleIndex) alertsWithout(t *testing.T, served func(string) bool) (lost, fewer map[string]bool) {
	t.Helper()
	lost, fewer = map[string]bool{}, map[string]bool{}
	for alert, expr := range ri.alerts {
		ok, err := canHaveSeries(expr, served)
		require.NoError(t, err, alert)
		if !ok {
			lost[alert] = true
			continue
		}
		for name := range ri.reads(expr) {
			if !served(name) {
				fewer[alert] = true
			}
		}
	}
	return lost, fewer
}

// TestChartWithoutCapabilities renders the chart with the one value that
// grants no capability, counters.profiling=false, runs it as
// TestChartDefaultsGiveEveryPanelData does, and checks that what it loses
// is exactly what the "Without capabilities" section of docs/kubernetes.md
// lists: the profiling fields, the recording rules that then record nothing
// (worked out from the rules, and found empty), the dashboard panels that
// then have no data, and, from the series Prometheus then holds, the alerts
// that can no longer fire and those that judge from fewer fields.
func TestChartWithoutCapabilities(t *testing.T) {
	if testing.Short() {
		t.Skip("live check starts gpuscope and Prometheus; skipped with -short")
	}
	t.Parallel()
	servers := promServers(t)
	srv := servers[len(servers)-1]
	r := renderChart(t, "counters.profiling=false")
	c := r.container(t, "gpuscope")
	require.Empty(t, c.SecurityContext.Capabilities.Add, "no capability")
	require.NotContains(t, c.Args, "--insight")

	rules := prepareRules(t, t.TempDir(), r.ruleFilesFrom(t, "gpuscope-rules", t.TempDir()))
	ri := readRuleIndex(t, rules.files)
	alertNames := map[string]bool{}
	for a := range ri.alerts {
		alertNames[a] = true
	}
	doc := readCapabilitiesDoc(t, alertNames)
	assert.Equal(t, profilingFieldsLeftOut(t, r), doc.fields, "the profiling fields docs/kubernetes.md lists as lost")
	dashboards := r.dashboards(t)
	requirePanelsExist(t, dashboards, doc.panels)

	// The recording rules that cannot record without the profiling fields
	// and insight, from their expressions.
	staticServed := ri.served(t, func(n string) bool { return !lostWithoutProfiling(n) })
	lostRecords, lostGroups := map[string]bool{}, map[string]bool{}
	for name := range ri.records {
		if !staticServed(name) {
			lostRecords[name] = true
			lostGroups[ri.groupOf[name]] = true
		}
	}
	assert.Equal(t, lostGroups, doc.groups, "the rule groups docs/kubernetes.md names as losing recording rules")

	exporter := startExporter(t, r)
	lc := liveCheck{c: startPrometheus(t, srv, rules, scrapeTarget{addr: exporter}), srv: srv, rules: rules, dashboards: dashboards,
		allowedRule: func(name string) string {
			if why := allowChartEmptyRule(name); why != "" {
				return why
			}
			if lostRecords[name] {
				return "cannot record without the profiling fields or insight"
			}
			return ""
		},
		allowed: func(d string, q dash.Query) string {
			if why := allowChartEmpty(d, q); why != "" {
				return why
			}
			if doc.panels[d][q.Panel] {
				return "lost without capabilities"
			}
			return ""
		}}
	// Every other rule and query has data; then each listed panel must
	// still lack some (a panel may lose one series of several), and each
	// rule the analysis calls lost must have recorded nothing.
	lc.untilClean(t, 150*time.Second)
	checkPanelsLackData(t, lc, doc.panels)
	for name := range lostRecords {
		res, err := lc.c.query(name)
		require.NoError(t, err)
		assert.Empty(t, res, "recording rule %s records without the profiling fields, which the analysis says it cannot", name)
	}
	lost, fewer := ri.alertsWithout(t, ri.served(t, liveHas(t, lc.c)))
	assert.Equal(t, lost, doc.lost, "the alerts docs/kubernetes.md lists as no longer firing: those that can have no series")
	assert.Equal(t, fewer, doc.fewer, "the alerts docs/kubernetes.md lists as judging from fewer fields: "+
		"those that read a name Prometheus holds no series of, and can fire without it")
}

// liveHas says whether Prometheus holds series of a name; a name the
// default install may lack for a reason of its own (alertMetricsAbsent)
// counts as held, since capabilities do not decide it.
func liveHas(t *testing.T, c promClient) func(string) bool {
	return func(name string) bool {
		if absentReason(name) != "" {
			return true
		}
		res, err := c.query(fmt.Sprintf("count({__name__=~%q})", eitherVocabulary(name)))
		require.NoError(t, err, name)
		return len(res) > 0
	}
}

// profilingFieldsLeftOut are the profiling fields of etc/dcp-metrics.csv
// that the rendered counters file does not list.
func profilingFieldsLeftOut(t *testing.T, r renderedChart) map[string]bool {
	t.Helper()
	dcp, err := os.ReadFile(filepath.Join(repoRoot, "etc/dcp-metrics.csv"))
	require.NoError(t, err)
	csv := r.configMaps["gpuscope-counters"].Data["counters.csv"]
	out := map[string]bool{}
	for _, l := range strings.Split(string(dcp), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(l), ",")
		if strings.HasPrefix(name, "DCGM_FI_PROF_") && !strings.Contains(csv, name) {
			out[name] = true
		}
	}
	return out
}

// requirePanelsExist fails on a panel the docs name that no dashboard has.
func requirePanelsExist(t *testing.T, dashboards map[string][]byte, panels map[string]map[string]bool) {
	t.Helper()
	for file, titles := range panels {
		qs, _, err := dash.Extract(dashboards[file])
		require.NoError(t, err, "docs/kubernetes.md names dashboard %s", file)
		for title := range titles {
			found := false
			for _, q := range qs {
				found = found || q.Panel == title
			}
			assert.True(t, found, "docs/kubernetes.md names panel %q of %s, which does not exist", title, file)
		}
	}
}

// checkPanelsLackData: each panel of panels has a query without data.
func checkPanelsLackData(t *testing.T, lc liveCheck, panels map[string]map[string]bool) {
	t.Helper()
	for file, titles := range panels {
		qs, vs, err := dash.Extract(lc.dashboards[file])
		require.NoError(t, err)
		vars := lc.variables(vs)
		empty := map[string]bool{}
		for _, q := range qs {
			if !titles[q.Panel] {
				continue
			}
			res, err := lc.c.query(substitute(q.Expr, vars))
			require.NoError(t, err)
			empty[q.Panel] = empty[q.Panel] || len(res) == 0
		}
		for title := range titles {
			assert.True(t, empty[title], "%s: panel %q has all its data without capabilities; docs/kubernetes.md lists it as lost", file, title)
		}
	}
}

// TestAlertsWithout works the classification out on made-up rules.
func TestAlertsWithout(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rules.yml")
	require.NoError(t, os.WriteFile(file, []byte(`groups:
  - name: rec
    rules:
      - record: r:active
        expr: max_over_time(prof_active[2m]) or util / 100
      - record: r:prof
        expr: sum(prof_active)
  - name: alerts
    rules:
      - alert: Idle
        expr: r:active < 0.05
      - alert: Busy
        expr: r:prof > 0.9 and util > 90
      - alert: Hang
        expr: util >= 90 unless prof_active >= 0.1
      - alert: Hot
        expr: temp > 85
`), 0o600))
	ri := readRuleIndex(t, []string{file})
	lost, fewer := ri.alertsWithout(t, ri.served(t, func(n string) bool { return n != "prof_active" }))
	require.Equal(t, map[string]bool{"Busy": true}, lost)
	require.Equal(t, map[string]bool{"Idle": true, "Hang": true}, fewer)
	lost, fewer = ri.alertsWithout(t, ri.served(t, func(n string) bool { return n != "prof_active" && n != "util" }))
	require.Equal(t, map[string]bool{"Busy": true, "Idle": true, "Hang": true}, lost)
	require.Empty(t, fewer)
	keys := func(m map[string]bool) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	require.Equal(t, []string{"prof_active", "r:active", "util"}, keys(ri.reads(ri.alerts["Idle"])))
}
