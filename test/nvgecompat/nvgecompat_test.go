// Package nvgecompat checks that users of nvidia_gpu_exporter keep their
// dashboards and alert rules: gpuscope with etc/nvidia-gpu-exporter.csv on
// the sim, scraped by a real Prometheus, answers that exporter's two
// dashboards and serves every metric its chart's alert rules read.
package nvgecompat

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
)

const fixture = "testdata/nvidia_gpu_exporter"

const noFan = "the simulated H100s are passively cooled data-center GPUs, which report no fan speed (nor do they in that exporter's own H100 captures)"

// notServed are the metrics gpuscope does not serve on the sim, with the
// reason docs/migrating-from-nvidia-gpu-exporter.md gives. The per-process
// families are served: the test runs gpuscope with --processes, as a user
// of that exporter's process panels would.
var notServed = map[string]string{
	"nvidia_smi_fan_speed_ratio": noFan,
}

// emptyPanels are the dashboard panels that stay empty on the sim, and why;
// every other query of both dashboards must answer with data.
var emptyPanels = map[string]string{
	"dashboard.json: Fan Speed %":          noFan,
	"dashboard-overview.json: Fan Speed %": noFan,
}

// nameRE finds metric names in PromQL. A name inside a __name__ regex
// (nvidia_smi_ecc_errors_uncorrected_aggregate_.+) ends in "_." and is not
// a name.
var nameRE = regexp.MustCompile(`nvidia_smi_[a-z0-9_]*[a-z0-9]\b`)

func metricNames(expr string) []string {
	var out []string
	for _, loc := range nameRE.FindAllStringIndex(expr, -1) {
		if loc[1] < len(expr) && expr[loc[1]] == '.' {
			continue
		}
		out = append(out, expr[loc[0]:loc[1]])
	}
	return out
}

type panel struct {
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

type query struct {
	dashboard, panel, expr string
}

// dashboardQueries reads every target expression of a dashboard, rows'
// panels included.
func dashboardQueries(t *testing.T, file string) []query {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixture, file))
	require.NoError(t, err)
	var d struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(b, &d))
	var out []query
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) != "" {
					out = append(out, query{file, p.Title, tg.Expr})
				}
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// substitute fills Grafana's variables as a user who opened the dashboard
// would have them: the job and node of the exporter, one GPU, and a rate
// interval a few scrapes long.
func substitute(expr string, vars map[string]string) string {
	r := strings.NewReplacer("$__rate_interval", "10s", "$job", vars["job"], "$node", vars["node"], "$gpu", vars["gpu"])
	return r.Replace(expr)
}

func TestDashboardsAndRulesAnswerFromTheSim(t *testing.T) {
	promtool := e2etest.RequireTool(t, "promtool")
	rules := filepath.Join(fixture, "rules.yaml")
	out, err := exec.Command(promtool, "check", "rules", rules).CombinedOutput()
	require.NoError(t, err, "promtool check rules: %s", out)

	csv := filepath.Join(e2etest.RepoRoot(), "etc", "nvidia-gpu-exporter.csv")
	// GPU 0 without MIG, GPU 1 in MIG mode; rare events at a rate that
	// gives each GPU an XID within the first half minute.
	base, _ := e2etest.GPUScope(t, "--source", "sim", "--collectors", csv, "--sim-gpus", "2",
		"--sim-mig", "3g.40gb,2x2g.20gb", "--sim-mig-gpus", "1", "--sim-event-rate", "3000", "--sim-seed", "3", "--processes")
	prom := e2etest.Prometheus(t, []string{strings.TrimPrefix(base, "http://")}, rules)

	// The variables, from the dashboards' own variable queries.
	vars := map[string]string{}
	res := e2etest.Eventually(t, prom, `nvidia_smi_gpu_info`, 60*time.Second, nonEmpty)
	sort.Slice(res, func(i, j int) bool { return res[i].Metric["index"] < res[j].Metric["index"] })
	vars["job"], vars["node"], vars["gpu"] = res[0].Metric["job"], res[0].Metric["instance"], res[0].Metric["uuid"]
	var gpus []string
	for _, r := range res {
		gpus = append(gpus, r.Metric["uuid"])
	}
	for _, v := range []string{`nvidia_smi_index`, `nvidia_smi_index{job="$job"}`,
		`label_join(label_replace(label_join(nvidia_smi_gpu_info{instance="$node", job="$job"}, "ni", " #", "name", "index"), "us", "($1)", "uuid", "^(........).*"), "gpu_label", " ", "ni", "us")`} {
		e2etest.Eventually(t, prom, substitute(v, vars), 10*time.Second, nonEmpty)
	}

	// Labels and units as that exporter writes them: uuid alone on a GPU's
	// series, uuid and gpu_instance_id on a MIG instance's, MiB as bytes,
	// MHz as Hz, percent as a ratio.
	for _, c := range []struct {
		expr   string
		labels []string
		lo, hi float64
	}{
		{`nvidia_smi_memory_total_bytes`, []string{"__name__", "instance", "job", "uuid"}, 81559 << 20, 81559 << 20},
		{`nvidia_smi_clocks_max_graphics_clock_hz`, []string{"__name__", "instance", "job", "uuid"}, 1.98e9, 1.98e9},
		{`nvidia_smi_utilization_gpu_ratio`, []string{"__name__", "instance", "job", "uuid"}, 0, 1},
		{`nvidia_smi_mig_memory_used_bytes`, []string{"__name__", "gpu_instance_id", "instance", "job", "uuid"}, 1, 80 << 30},
		// Its --collect.compute-apps families (internal/exporter/exporter.go:
		// computeAppLabels), memory in whole MiB as bytes.
		{`nvidia_smi_compute_app_info`, []string{"__name__", "instance", "job", "uuid", "pid", "process_name"}, 1, 1},
		{`nvidia_smi_compute_app_used_memory_bytes % 1048576`, []string{"instance", "job", "uuid", "pid", "process_name"}, 0, 0},
		{`nvidia_smi_compute_apps`, []string{"__name__", "instance", "job", "uuid"}, 1, 8},
		{`nvidia_smi_compute_apps_last_collect_success`, []string{"__name__", "instance", "job"}, 1, 1},
	} {
		for _, s := range e2etest.Eventually(t, prom, c.expr, 10*time.Second, nonEmpty) {
			assert.ElementsMatch(t, c.labels, keys(s.Metric), c.expr)
			assert.True(t, s.Value >= c.lo && s.Value <= c.hi, "%s = %g, want %g..%g", c.expr, s.Value, c.lo, c.hi)
		}
	}

	// A MIG-enabled GPU has no utilization (nvidia-smi prints [N/A], which
	// that exporter skips): only GPU 0's is served.
	for _, s := range e2etest.Eventually(t, prom, `count(nvidia_smi_utilization_gpu_ratio)`, 10*time.Second, nonEmpty) {
		assert.Equal(t, 1.0, s.Value, "utilization of the GPU without MIG alone")
	}

	var queries []query
	for _, f := range []string{"dashboard.json", "dashboard-overview.json"} {
		queries = append(queries, dashboardQueries(t, f)...)
	}
	answered, empty := answer(t, prom, queries, vars, gpus)
	assert.ElementsMatch(t, keys(emptyPanels), empty, "dashboard panels with a query that returns no data")
	t.Logf("dashboard queries answered: %d of %d", answered, len(queries))

	names := map[string]bool{}
	for _, q := range queries {
		for _, n := range metricNames(q.expr) {
			names[n] = true
		}
	}
	served, missing := servedNames(t, prom, names)
	assert.ElementsMatch(t, keysIn(notServed, names), missing, "dashboard metric names not served")
	t.Logf("dashboard metric names served: %d of %d", served, len(names))

	b, err := os.ReadFile(rules)
	require.NoError(t, err)
	ruleNames := map[string]bool{}
	for _, n := range metricNames(string(b)) {
		ruleNames[n] = true
	}
	served, missing = servedNames(t, prom, ruleNames)
	assert.Empty(t, missing, "metric names the alert rules read that are not served")
	t.Logf("alert rule metric names served: %d of %d", served, len(ruleNames))
}

func nonEmpty(res []e2etest.Sample) error {
	if len(res) == 0 {
		return errors.New("no data")
	}
	return nil
}

// answer runs every query until it has data for one of the GPUs or 90 s
// pass, and returns how many answered and the panels of the ones that did
// not. On a node with and without MIG no GPU answers every panel: the MIG
// panels are empty for a GPU without MIG, the utilization for one with.
func answer(t *testing.T, prom string, queries []query, vars map[string]string, gpus []string) (int, []string) {
	t.Helper()
	done := make([]bool, len(queries))
	testwait.Every(90*time.Second, time.Second, func() bool {
		all := true
		for i, q := range queries {
			if done[i] {
				continue
			}
			for _, gpu := range gpus {
				v := maps.Clone(vars)
				v["gpu"] = gpu
				res, err := e2etest.Query(t, prom, substitute(q.expr, v))
				require.NoError(t, err, "%s: %s", q.dashboard, q.panel)
				if done[i] = len(res) > 0; done[i] {
					break
				}
			}
			// The panels known to stay empty are not waited for.
			_, known := emptyPanels[q.dashboard+": "+q.panel]
			all = all && (done[i] || known)
		}
		return all
	})
	n := 0
	emptySet := map[string]bool{}
	for i, q := range queries {
		if done[i] {
			n++
			continue
		}
		t.Logf("no data: %s: %s: %s", q.dashboard, q.panel, q.expr)
		emptySet[q.dashboard+": "+q.panel] = true
	}
	var empty []string
	for k := range emptySet {
		empty = append(empty, k)
	}
	sort.Strings(empty)
	return n, empty
}

// servedNames says which of names have a series in Prometheus.
func servedNames(t *testing.T, prom string, names map[string]bool) (int, []string) {
	t.Helper()
	res, err := e2etest.Query(t, prom, `count by (__name__) ({__name__=~"nvidia_smi_.+"})`)
	require.NoError(t, err)
	have := map[string]bool{}
	for _, s := range res {
		have[s.Metric["__name__"]] = true
	}
	n := 0
	var missing []string
	for name := range names {
		if have[name] {
			n++
		} else {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	return n, missing
}

func keysIn(m map[string]string, in map[string]bool) []string {
	var out []string
	for k := range m {
		if in[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
