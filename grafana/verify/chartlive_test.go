package verify

import (
	"fmt"
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

// noSharedAttribution is why the pod dashboard's shares of shared GPUs are
// empty on a default install.
const noSharedAttribution = "per-pod shares of shared GPUs need kubernetes.sharedGPUAttribution (--kubernetes-shared-gpu-attribution), " +
	"off by default: it sets hostPID: true to read each GPU process's cgroup"

// noPrice is why the cost views are empty on a default install.
const noPrice = "cost needs a price per GPU-hour per GPU model (prometheusRule.pricePerGPUHour), none by default: the chart " +
	"knows no one's prices"

// chartEmptyAllowed are the dashboard panels a default install on the sim
// may find empty, each with why; every other query must return data.
var chartEmptyAllowed = []struct{ dashboard, panel, reason string }{
	{"gpuscope-cluster.json", "GPUs by HPC job", noBatchSystem},
	{"gpuscope-cluster.json", "Busy GPUs by HPC job", noBatchSystem},
	{"gpuscope-cluster.json", "Power by HPC job", noBatchSystem},
	{"gpuscope-cluster.json", "Top stalled HPC jobs", noBatchSystem},
	{"gpuscope-cluster.json", "Energy by HPC job", noBatchSystem},
	{"gpuscope-pod.json", "Memory of the pod's processes", noSharedAttribution},
	{"gpuscope-pod.json", "SM share of the pod's processes", noSharedAttribution},
	{"gpuscope-cluster.json", "Cost held in range", noPrice},
	{"gpuscope-cluster.json", "Cost held idle in range", noPrice},
	{"gpuscope-cluster.json", "Cost per hour now", noPrice},
	{"gpuscope-cluster.json", "Cost by namespace", noPrice},
	{"gpuscope-cluster.json", "Cost held idle by namespace", noPrice},
	{"gpuscope-cluster.json", "Cost by workload and model", noPrice},
	{"gpuscope-cluster.json", "Cost per step by pod", noPrice},
	{"gpuscope-pod.json", "Cost in range", noPrice},
	{"gpuscope-pod.json", "Cost held idle in range", noPrice},
	{"gpuscope-pod.json", "Cost per step", noPrice},
	{"gpuscope-node.json", "Fabric manager", fabricOptIn},
	{"gpuscope-node.json", "Fabric health", fabricOptIn},
	{"gpuscope-node.json", "Fabric conditions", fabricOptIn},
}

// chartEmptyRules are the recording rules, by the level their name starts
// with, that may record nothing on a default install, each with why.
var chartEmptyRules = []struct{ prefix, reason string }{
	{"hpc_job:", noBatchSystem},
	{"hpc_job_bound:", noBatchSystem},
}

// chartEmptyRuleNames are the recording rules, by the name after their
// level, that may record nothing on a default install, each with why.
var chartEmptyRuleNames = []struct{ name, reason string }{
	{"gpuscope_cost", noPrice},
	{"gpuscope_cost_idle", noPrice},
	{"gpuscope_cost_per_step", noPrice},
}

func allowChartEmptyRule(name string) string {
	for _, a := range chartEmptyRules {
		if strings.HasPrefix(name, a.prefix) {
			return a.reason
		}
	}
	if parts := strings.Split(name, ":"); len(parts) == 3 {
		for _, a := range chartEmptyRuleNames {
			if parts[1] == a.name {
				return a.reason
			}
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

// eitherVocabulary is a __name__ regex for name and, for a field DCGM 4.6
// renamed (grafana/dash/vocabulary.tsv), its other name: the rules read
// both, and an exporter serves one of them, as its counters file names it.
func eitherVocabulary(name string) string {
	for _, v := range dash.Terms() {
		if name == v.Legacy || name == v.Current {
			return v.Legacy + "|" + v.Current
		}
	}
	return regexp.QuoteMeta(name)
}

// absentReason is alertMetricsAbsent's reason for name or for its other
// name in the vocabulary: the same field, so the same reason.
func absentReason(name string) string {
	for _, n := range strings.Split(eitherVocabulary(name), "|") {
		if why := alertMetricsAbsent[n].reason; why != "" {
			return why
		}
	}
	return ""
}

// fabricOptIn: the fabric fields are not in the chart's default counters
// files (dcgm-exporter's 4.8.3 makes its fabric health fields opt-in too),
// and only NVSwitch systems (HGX, NVL72) have a fabric to report.
const fabricOptIn = "the NVSwitch fabric fields are opt-in: the default counters files do not ask for them, and only HGX and NVL72 " +
	"systems have a fabric to report"

// alertMetricsAbsent are the metric names shipped alerts read that a
// default install on the sim need not serve, each with why.
var alertMetricsAbsent = map[string]absentMetric{
	"DCGM_FI_DEV_FABRIC_MANAGER_STATUS": {reason: fabricOptIn},
	"DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY": {reason: fabricOptIn},
	"DCGM_FI_DEV_FABRIC_HEALTH_MASK":    {reason: fabricOptIn},
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
			lc := liveCheck{c: startPrometheus(t, srv, rules, scrapeTarget{addr: exporter}), srv: srv, rules: rules,
				dashboards: dashboards, allowed: allowChartEmpty, allowedRule: allowChartEmptyRule}
			// The use-and-cost rules need a minute of history.
			allowed := lc.untilClean(t, 150*time.Second)
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
		res, err := c.query(fmt.Sprintf("count({__name__=~%q})", eitherVocabulary(name)))
		require.NoError(t, err, name)
		if len(res) > 0 {
			continue
		}
		if why := absentReason(name); why != "" {
			t.Logf("%s (read by %s) is not scraped: %s", name, strings.Join(alerts, ", "), why)
			continue
		}
		missing = append(missing, fmt.Sprintf("%s (read by %s)", name, strings.Join(alerts, ", ")))
	}
	sort.Strings(missing)
	assert.Empty(t, missing, "metrics the alerts read that the default install does not serve")
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
