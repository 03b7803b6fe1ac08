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

// noBatchSystem is why the HPC job views are empty on a default install.
const noBatchSystem = "HPC job labels come from the batch system's mapping files (hpcJobMappingDir), off by default: a Kubernetes cluster runs no Slurm jobs"

// chartEmptyAllowed are the dashboard panels a default install on the sim
// may find empty, each with why; every other query must return data.
var chartEmptyAllowed = []struct{ dashboard, panel, reason string }{
	{"gpuscope-cluster.json", "GPUs by HPC job", noBatchSystem},
	{"gpuscope-cluster.json", "Busy GPUs by HPC job", noBatchSystem},
	{"gpuscope-cluster.json", "Power by HPC job", noBatchSystem},
	{"gpuscope-cluster.json", "Top stalled HPC jobs", noBatchSystem},
}

// chartEmptyRules are the recording rules, by the level their name starts
// with, that may record nothing on a default install, each with why.
var chartEmptyRules = []struct{ prefix, reason string }{
	{"hpc_job:", noBatchSystem},
	{"hpc_job_bound:", noBatchSystem},
}

func allowChartEmptyRule(name string) string {
	for _, a := range chartEmptyRules {
		if strings.HasPrefix(name, a.prefix) {
			return a.reason
		}
	}
	return ""
}

func allowChartEmpty(dashboard string, q dash.Query) string {
	for _, a := range chartEmptyAllowed {
		if a.dashboard == dashboard && a.panel == q.Panel {
			return a.reason
		}
	}
	return ""
}

// absentMetric is why a metric name the shipped alerts read may be missing
// from a default install on the sim.
type absentMetric struct {
	reason string
	// servedWith are sim flags under which the default install does serve
	// it; the test checks that it then does, on every GPU.
	servedWith []string
}

// alertMetricsAbsent are the metric names shipped alerts read that a
// default install on the sim need not serve, each with why.
var alertMetricsAbsent = map[string]absentMetric{
	"gpuscope_xid_last_seen_timestamp_seconds": {reason: "has a series only once a GPU reported an XID; the sim raises them at random " +
		"(--sim-event-rate), and a run of a minute may see none"},
	// nvml.h, nvmlDeviceGetFanSpeed: "For all discrete products with
	// dedicated fans", NVML_ERROR_NOT_SUPPORTED "if the device does not have
	// a fan". The sim's h100 answers so, gpuscope_field_supported says so,
	// and GPUFieldUnsupported leaves the fan out.
	"DCGM_FI_DEV_FAN_SPEED": {reason: "a data-center GPU such as the simulated H100 has no fan of its own (the server's fans " +
		"cool it) and reports the field unsupported; the field exists on cards with a fan of their own, such as the RTX 6000 Ada " +
		"and RTX A6000 workstation cards, which are what GPUFanFailing watches",
		servedWith: []string{"--sim-model=rtx6000ada"}},
}

// TestChartDefaultsGiveEveryPanelData renders the chart with its default
// values, runs the real exporter with exactly the arguments of the
// rendered DaemonSet (on the sim), loads the rendered rules into each real
// Prometheus, and finds data for every query of every dashboard the chart
// ships, except the explicit, reasoned chartEmptyAllowed; and every metric
// the shipped alerts read is scraped, except the reasoned
// alertMetricsAbsent; one absent for the sim's GPU model is found on every
// GPU of a model that has it (servedWith).
func TestChartDefaultsGiveEveryPanelData(t *testing.T) {
	if testing.Short() {
		t.Skip("live check starts gpuscope and Prometheus; skipped with -short")
	}
	t.Parallel()
	servers := promServers(t)
	r := renderChart(t)
	// The defaults ship the rules and the dashboards; without the
	// Operator's API the rules come as a ConfigMap.
	assert.NotContains(t, r.kinds, "PrometheusRule")
	assert.NotContains(t, r.kinds, "ServiceMonitor")
	dashboards := r.dashboards(t)
	require.Len(t, dashboards, 3)
	rules := prepareRules(t, t.TempDir(), r.ruleFilesFrom(t, "gpuscope-rules", t.TempDir()))
	exporter := startExporter(t, r)

	for _, a := range chartEmptyAllowed {
		qs, _, err := dash.Extract(dashboards[a.dashboard])
		require.NoError(t, err, a.dashboard)
		found := false
		for _, q := range qs {
			found = found || q.Panel == a.panel
		}
		assert.True(t, found, "chartEmptyAllowed names panel %q of %s, which does not exist", a.panel, a.dashboard)
	}
	for name, a := range alertMetricsAbsent {
		if len(a.servedWith) > 0 {
			t.Run(name+" with "+strings.Join(a.servedWith, " "), func(t *testing.T) {
				t.Parallel()
				checkServedWith(t, r, name, a.servedWith)
			})
		}
	}
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			lc := liveCheck{c: startPrometheus(t, srv, rules, exporter, nil), srv: srv, rules: rules,
				dashboards: dashboards, allowed: allowChartEmpty, allowedRule: allowChartEmptyRule}
			allowed := lc.untilClean(t, 120*time.Second)
			t.Logf("allowed to be empty:\n%s", strings.Join(allowed, "\n"))
			checkAlertMetrics(t, lc.c, rules.files)
		})
	}
}

// checkAlertMetrics finds every metric name the alert rules of files read
// among the series Prometheus holds.
func checkAlertMetrics(t *testing.T, c promClient, files []string) {
	t.Helper()
	names := map[string][]string{}
	for _, f := range files {
		groups, err := ruleFileGroups(f)
		require.NoError(t, err)
		for _, g := range groups {
			rules, _ := g["rules"].([]any)
			for _, ru := range rules {
				m, _ := ru.(map[string]any)
				if m["alert"] == nil {
					continue
				}
				for _, s := range scanExpr(fmt.Sprint(m["expr"])).selectors {
					names[s] = append(names[s], fmt.Sprint(m["alert"]))
				}
			}
		}
	}
	require.NotEmpty(t, names)
	var missing []string
	for name, alerts := range names {
		res, err := c.query(fmt.Sprintf("count({__name__=%q})", name))
		require.NoError(t, err, name)
		if len(res) > 0 {
			continue
		}
		if why := alertMetricsAbsent[name].reason; why != "" {
			t.Logf("%s (read by %s) is not scraped: %s", name, strings.Join(alerts, ", "), why)
			continue
		}
		missing = append(missing, fmt.Sprintf("%s (read by %s)", name, strings.Join(alerts, ", ")))
	}
	sort.Strings(missing)
	assert.Empty(t, missing, "metrics the alerts read that the default install does not serve")
}

const capabilitiesSection = "### Without capabilities"

// lostWithoutCapabilities reads what docs/kubernetes.md says a install
// with counters.profiling=false loses: the backticked DCGM_FI_PROF_* fields
// and alert names of the section, and the quoted panel titles of its table
// rows, per dashboard file.
func lostWithoutCapabilities(t *testing.T, alertNames map[string]bool) (fields, alerts map[string]bool, panels map[string]map[string]bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs/kubernetes.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(b), "\n"+capabilitiesSection+"\n")
	require.True(t, ok, "docs/kubernetes.md has no section %q", capabilitiesSection)
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	fields, alerts, panels = map[string]bool{}, map[string]bool{}, map[string]map[string]bool{}
	for _, m := range regexp.MustCompile("`([A-Za-z_][A-Za-z0-9_]*)`").FindAllStringSubmatch(section, -1) {
		switch {
		case strings.HasPrefix(m[1], "DCGM_FI_PROF_"):
			fields[m[1]] = true
		case alertNames[m[1]]:
			alerts[m[1]] = true
		}
	}
	row := regexp.MustCompile("^\\| `(gpuscope-[a-z]+\\.json)` \\|(.*)$")
	title := regexp.MustCompile(`"([^"]+)"`)
	for _, line := range strings.Split(section, "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		panels[m[1]] = map[string]bool{}
		for _, tm := range title.FindAllStringSubmatch(m[2], -1) {
			panels[m[1]][tm[1]] = true
		}
	}
	return fields, alerts, panels
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

// recordsReading lists the recorded names whose rules read a series lost
// tells, directly or through another such record.
func recordsReading(t *testing.T, files []string, lost func(string) bool) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, f := range files {
		groups, err := ruleFileGroups(f)
		require.NoError(t, err)
		for _, g := range groups {
			rules, _ := g["rules"].([]any)
			for _, ru := range rules {
				m, _ := ru.(map[string]any)
				if m["record"] == nil {
					continue
				}
				for _, sel := range scanExpr(fmt.Sprint(m["expr"])).selectors {
					if lost(sel) || out[sel] {
						out[fmt.Sprint(m["record"])] = true
					}
				}
			}
		}
	}
	return out
}

// alertReads maps each alert of the rule files to the metric names its
// expression reads.
func alertReads(t *testing.T, files []string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, f := range files {
		groups, err := ruleFileGroups(f)
		require.NoError(t, err)
		for _, g := range groups {
			rules, _ := g["rules"].([]any)
			for _, ru := range rules {
				if m, _ := ru.(map[string]any); m["alert"] != nil {
					out[fmt.Sprint(m["alert"])] = scanExpr(fmt.Sprint(m["expr"])).selectors
				}
			}
		}
	}
	return out
}

// TestChartWithoutCapabilities renders the chart with the one value that
// grants no capability, counters.profiling=false, runs it as
// TestChartDefaultsGiveEveryPanelData does, and checks that what it loses
// is exactly what the "Without capabilities" section of docs/kubernetes.md
// lists: the profiling fields, the dashboard panels that then have no data,
// and the alerts whose metrics are then not served.
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
	reads := alertReads(t, rules.files)
	alertNames := map[string]bool{}
	for a := range reads {
		alertNames[a] = true
	}
	fields, alerts, panels := lostWithoutCapabilities(t, alertNames)
	assert.Equal(t, profilingFieldsLeftOut(t, r), fields, "the profiling fields docs/kubernetes.md lists as lost")
	dashboards := r.dashboards(t)
	requirePanelsExist(t, dashboards, panels)

	exporter := startExporter(t, r)
	lostRecords := recordsReading(t, rules.files, lostWithoutProfiling)
	lc := liveCheck{c: startPrometheus(t, srv, rules, exporter, nil), srv: srv, rules: rules, dashboards: dashboards,
		allowedRule: func(name string) string {
			if why := allowChartEmptyRule(name); why != "" {
				return why
			}
			if lostRecords[name] {
				return "reads the profiling fields or insight"
			}
			return ""
		},
		allowed: func(d string, q dash.Query) string {
			if why := allowChartEmpty(d, q); why != "" {
				return why
			}
			if panels[d][q.Panel] {
				return "lost without capabilities"
			}
			return ""
		}}
	// Every other query has data; then each listed panel must still lack
	// some (a panel may lose one series of several).
	lc.untilClean(t, 120*time.Second)
	checkPanelsLackData(t, lc, panels)
	assert.Equal(t, alertsNotServed(t, lc.c, reads), alerts, "the alerts docs/kubernetes.md lists as lost: those whose metrics are not served")
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

// alertsNotServed are the alerts that read a metric Prometheus does not
// hold, leaving out the reasoned alertMetricsAbsent.
func alertsNotServed(t *testing.T, c promClient, reads map[string][]string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for alert, names := range reads {
		for _, n := range names {
			res, err := c.query(fmt.Sprintf("count({__name__=%q})", n))
			require.NoError(t, err)
			if len(res) == 0 && alertMetricsAbsent[n].reason == "" {
				out[alert] = true
			}
		}
	}
	return out
}

// checkServedWith runs the default install's exporter with the sim flags
// given and finds the metric name on every GPU, and no GPU that calls the
// field unsupported: an allowed absence must be the sim's GPU, not the
// install.
func checkServedWith(t *testing.T, r renderedChart, name string, simFlags []string) {
	t.Helper()
	addr := startExporter(t, r, simFlags...)
	var gpus, served int
	var unsupported []string
	pollUntil(30*time.Second, 250*time.Millisecond, func() bool {
		gpus, served, unsupported = 0, 0, nil
		for _, line := range strings.Split(scrape(t, addr), "\n") {
			switch {
			case strings.HasPrefix(line, "DCGM_FI_DEV_GPU_TEMP{"):
				gpus++
			case strings.HasPrefix(line, name+"{"):
				served++
			case strings.HasPrefix(line, "gpuscope_field_supported{") && strings.Contains(line, `field="`+name+`"`):
				unsupported = append(unsupported, line)
			}
		}
		return gpus > 0 && served == gpus
	})
	require.Positive(t, gpus, "the exporter serves no GPU")
	assert.Empty(t, unsupported, "%s with %v: GPUs that call it unsupported", name, simFlags)
	assert.Equal(t, gpus, served, "%s with %v: GPUs that serve it, of %d", name, simFlags, gpus)
}
