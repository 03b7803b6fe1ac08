package verify

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/gpuscope/gpuscope/grafana/dash"
)

// promServer is a Prometheus server the live checks run on.
type promServer struct {
	name string
	bin  string
	v    version
}

// scrapeSettingRelease is the first release that scrapes native histograms
// by a scrape setting instead of --enable-feature=native-histograms.
var scrapeSettingRelease = version{3, 9}

// promServers lists the servers the rules are checked on: Debian's
// Prometheus (the oldest users are likely to run, 2.42) and the current
// Prometheus 3 that scripts/build-prometheus.sh builds, which make test
// names in GPUSCOPE_PROMETHEUS3. Where one is missing the checks run on the
// other, saying so; in CI both must be there.
func promServers(t *testing.T) []promServer {
	t.Helper()
	var out []promServer
	var missing []string
	if bin, err := exec.LookPath("prometheus"); err == nil {
		out = append(out, promServer{bin: bin})
	} else {
		missing = append(missing, "prometheus is not installed (apt-get install -y prometheus)")
	}
	if bin := os.Getenv("GPUSCOPE_PROMETHEUS3"); bin != "" {
		out = append(out, promServer{bin: bin})
	} else {
		missing = append(missing, "GPUSCOPE_PROMETHEUS3 is not set (to scripts/build-prometheus.sh's prometheus; make test sets it)")
	}
	for i := range out {
		v, err := binaryVersion(out[i].bin)
		require.NoError(t, err)
		out[i].v = v
		out[i].name = "prometheus-" + v.String()
	}
	if len(missing) > 0 && (os.Getenv("CI") == "true" || len(out) == 0) {
		skipOrFail(t, "%s", strings.Join(missing, "; "))
	}
	for _, m := range missing {
		t.Logf("checking without that server: %s", m)
	}
	return out
}

// liveRules are rule files prepared for a live check, with what each of
// their groups needs of Prometheus.
type liveRules struct {
	files []string
	needs []groupNeed
}

// prepareRules copies rule files into dir at the global evaluation
// interval (atGlobalInterval) and works out what their groups need.
func prepareRules(t *testing.T, dir string, files []string) liveRules {
	t.Helper()
	needs, err := groupNeeds(files)
	require.NoError(t, err)
	r := liveRules{needs: needs}
	for _, f := range files {
		r.files = append(r.files, atGlobalInterval(t, f, dir))
	}
	return r
}

// beyond lists the groups of the rules that need a newer Prometheus than
// srv, with the names they record.
func (r liveRules) beyond(srv promServer) (groups, records map[string]bool) {
	groups, records = map[string]bool{}, map[string]bool{}
	for _, g := range r.needs {
		if srv.v.less(g.min) {
			groups[g.group] = true
		}
	}
	for _, f := range r.files {
		fileGroups, err := ruleFileGroups(f)
		if err != nil {
			continue
		}
		for _, g := range fileGroups {
			if !groups[fmt.Sprint(g["name"])] {
				continue
			}
			rules, _ := g["rules"].([]any)
			for _, ru := range rules {
				if m, ok := ru.(map[string]any); ok && m["record"] != nil {
					records[fmt.Sprint(m["record"])] = true
				}
			}
		}
	}
	return groups, records
}

// scrapeTarget is an exporter Prometheus scrapes, with the labels it puts
// on the exporter's series.
type scrapeTarget struct {
	addr   string
	labels map[string]string
}

// evaluationInterval is how often the live checks' Prometheus evaluates
// every rule: within seconds of a start, as the checks need, and a fifth of
// the work of every second, when several servers share two cores.
const evaluationInterval = "5s"

// startPrometheus starts srv scraping the targets every second with the
// rules, native histograms on as the release asks for them, and the feature
// flags the rules need. It returns its client once it is ready.
func startPrometheus(t *testing.T, srv promServer, rules liveRules, targets ...scrapeTarget) promClient {
	t.Helper()
	dir := t.TempDir()
	flags := map[string]bool{"native-histograms": true}
	for _, g := range rules.needs {
		for _, f := range g.flags {
			flags[f] = true
		}
	}
	global := "  scrape_interval: 1s\n  evaluation_interval: " + evaluationInterval + "\n"
	var args []string
	for f := range flags {
		if f == "native-histograms" && !srv.v.less(scrapeSettingRelease) {
			global += "  scrape_native_histograms: true\n"
			continue
		}
		args = append(args, "--enable-feature="+f)
	}
	sort.Strings(args)
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n%srule_files:\n", global)
	for _, f := range rules.files {
		fmt.Fprintf(&b, "  - %q\n", f)
	}
	b.WriteString("scrape_configs:\n  - job_name: gpuscope\n    static_configs:\n")
	for _, tg := range targets {
		fmt.Fprintf(&b, "      - targets: [%q]\n", tg.addr)
		if len(tg.labels) > 0 {
			b.WriteString("        labels:\n")
			for k, v := range tg.labels {
				fmt.Fprintf(&b, "          %s: %q\n", k, v)
			}
		}
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(b.String()), 0o600))
	addr := freePort(t)
	args = append(args, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	start(t, srv.bin, dir, args...)
	waitHTTP(t, "http://"+addr+"/-/ready", 60*time.Second)
	return promClient{base: "http://" + addr}
}

// atGlobalInterval copies a rules file into dir without the groups' own
// evaluation intervals, and returns the copy's path. A group evaluated every
// 5 minutes is first evaluated at an offset Prometheus derives from the
// group and the wall clock, often after the test has given up, and its
// rules would show health "unknown": at the global interval
// (evaluationInterval) every rule is evaluated within seconds, and a rule
// that fails still shows.
func atGlobalInterval(t *testing.T, src, dir string) string {
	t.Helper()
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal(data, &doc), src)
	require.NotEmpty(t, doc.Content, "%s: empty", src)
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "groups" {
			continue
		}
		for _, g := range root.Content[i+1].Content {
			kept := g.Content[:0]
			for j := 0; j+1 < len(g.Content); j += 2 {
				if g.Content[j].Value != "interval" {
					kept = append(kept, g.Content[j], g.Content[j+1])
				}
			}
			g.Content = kept
		}
	}
	out, err := yaml.Marshal(&doc)
	require.NoError(t, err, src)
	dst := filepath.Join(dir, filepath.Base(src))
	require.NoError(t, os.WriteFile(dst, out, 0o600))
	return dst
}

// emptyAllowed says why a dashboard query may return nothing, or "" when
// it must return data.
type emptyAllowed func(dashboard string, q dash.Query) string

// liveCheck is one pass over the rules and the dashboards on a server.
type liveCheck struct {
	c          promClient
	srv        promServer
	rules      liveRules
	dashboards map[string][]byte
	allowed    emptyAllowed
	// allowedRule says why a recording rule may record nothing, or ""
	// (nil: none may).
	allowedRule func(record string) string
	// clusters are the values of the cluster variable each dashboard is
	// checked with, each of which the variable must offer (nil: one pass
	// with every variable at its first value).
	clusters []string
}

// pass is what one pass of a live check found.
type pass struct {
	problems, allowedEmpty []string
	// nrules and checked are the rules and the dashboard queries the pass
	// checked.
	nrules, checked int
	// failed names the units that found a problem: a later pass
	// may check only those.
	failed map[string]bool
}

// A pass checks units, each answered on its own: a rule (its health, and
// for a recording rule that it returns data), and a dashboard in one
// cluster (its variables), and each query of a dashboard in one cluster.
// ruleUnit, dashboardUnit and queryUnit name them.
func ruleUnit(i int, r rule) string { return fmt.Sprintf("rule %d %s/%s", i, r.Group, r.Name) }

func dashboardUnit(name, cluster string) string { return "dashboard " + name + " in " + cluster }

func queryUnit(dashboard string, i int) string { return fmt.Sprintf("%s query %d", dashboard, i) }

// run checks every rule's health, that every recording rule and every
// dashboard query returns data, and lists what did not, with the number
// of rules and queries checked and the allowed empty queries with why. Groups
// that need a newer Prometheus than the server are not held to it, nor the
// queries that read only what they record. With only set, it checks only
// the units only names, so that a pass waiting on a few of them does not
// ask Prometheus every query again.
func (lc liveCheck) run(t *testing.T, only map[string]bool) pass {
	want := func(unit string) bool { return only == nil || only[unit] }
	p := &pass{failed: map[string]bool{}}
	skipGroups, skipRecords := lc.rules.beyond(lc.srv)
	rules, err := lc.c.rules()
	require.NoError(t, err)
	require.NotEmpty(t, rules)
	for i, r := range rules {
		unit := ruleUnit(i, r)
		if skipGroups[r.Group] || !want(unit) {
			continue
		}
		p.nrules++
		if r.Health != "ok" {
			p.fail(unit, fmt.Sprintf("rule %s: health %q: %s", r.Name, r.Health, r.LastError))
		}
		if r.Type != "recording" {
			continue
		}
		res, err := lc.c.query(r.Query)
		switch {
		case err != nil:
			p.fail(unit, fmt.Sprintf("recording rule %s: %v", r.Name, err))
		case len(res) == 0 && lc.allowedRule != nil && lc.allowedRule(r.Name) != "":
			p.allowedEmpty = append(p.allowedEmpty, fmt.Sprintf("recording rule %s: %s", r.Name, lc.allowedRule(r.Name)))
		case len(res) == 0:
			p.fail(unit, fmt.Sprintf("recording rule %s returns no series: %s", r.Name, r.Query))
		}
	}
	names := make([]string, 0, len(lc.dashboards))
	for n := range lc.dashboards {
		names = append(names, n)
	}
	sort.Strings(names)
	clusters := lc.clusters
	if len(clusters) == 0 {
		clusters = []string{""}
	}
	// The dashboards (each in a cluster) that a unit of only belongs to.
	pending := map[string]bool{}
	for u := range only {
		dashboard, _, _ := strings.Cut(u, " query ")
		pending[dashboard] = true
	}
	for _, cluster := range clusters {
		for _, name := range names {
			if only == nil || pending[dashboardUnit(name, cluster)] {
				lc.dashboard(t, name, cluster, skipRecords, p, want)
			}
		}
	}
	return *p
}

// fail adds problems found by a unit.
func (p *pass) fail(unit string, problems ...string) {
	p.problems = append(p.problems, problems...)
	p.failed[unit] = true
}

// variables gives each variable of a dashboard the first of its values, as
// Grafana does, or its "All" value when nothing carries the label; a
// variable with neither is ".*" and listed in problems.
func (lc liveCheck) variables(vs []dash.Variable) map[string]string {
	vars, _ := lc.variablesOrProblems(vs, "")
	return vars
}

// variablesOrProblems is variables with the problems, and with the cluster
// variable at cluster where that is not "" (a problem where the variable
// does not offer it).
func (lc liveCheck) variablesOrProblems(vs []dash.Variable, cluster string) (map[string]string, []string) {
	var problems []string
	vars := map[string]string{"datasource": "prometheus"}
	for _, v := range vs {
		vals, err := lc.c.variableValues(v, substitute(v.Query, vars))
		switch {
		case err == nil && v.Name == "cluster" && cluster != "":
			if !slices.Contains(vals, cluster) {
				problems = append(problems, fmt.Sprintf("variable cluster lacks %s: %v", cluster, vals))
			}
			vars[v.Name] = cluster
		case err == nil && len(vals) > 0:
			vars[v.Name] = vals[0]
		case err == nil && v.AllValue != "":
			// Grafana's "All" when nothing carries the label.
			vars[v.Name] = v.AllValue
		default:
			problems = append(problems, fmt.Sprintf("variable %s (%s) has no values: %v", v.Name, v.Query, err))
			vars[v.Name] = ".*"
		}
	}
	return vars, problems
}

// dashboard runs the queries of a dashboard that want accepts, with its
// variables in one cluster ("": their first values), and adds the queries
// without data to p. Every query is run where want accepts the
// dashboard's own unit (its variables), each other where want accepts the
// query's.
func (lc liveCheck) dashboard(t *testing.T, name, cluster string, skipRecords map[string]bool, p *pass, want func(string) bool) {
	qs, vs, err := dash.Extract(lc.dashboards[name])
	require.NoError(t, err)
	vars, vp := lc.variablesOrProblems(vs, cluster)
	where := name
	if cluster != "" {
		where += " (cluster " + cluster + ")"
	}
	unit := dashboardUnit(name, cluster)
	for _, problem := range vp {
		p.fail(unit, where+": "+problem)
	}
	every := want(unit)
	for i, q := range qs {
		qunit := queryUnit(unit, i)
		if !every && !want(qunit) {
			continue
		}
		expr := substitute(q.Expr, vars)
		res, err := lc.c.query(expr)
		p.checked++
		if err == nil && len(res) > 0 {
			continue
		}
		if err == nil {
			if why := lc.allowed(name, q); why != "" {
				p.allowedEmpty = append(p.allowedEmpty, fmt.Sprintf("%s: panel %q %s: %s", where, q.Panel, q.RefID, why))
				continue
			}
			if readsOnly(expr, skipRecords) {
				p.allowedEmpty = append(p.allowedEmpty, fmt.Sprintf("%s: panel %q %s: reads rules that need a newer Prometheus than %s", where, q.Panel, q.RefID, lc.srv.v))
				continue
			}
			err = fmt.Errorf("returns no series")
		}
		p.fail(qunit, fmt.Sprintf("%s: panel %q %s: %v\n    %s", where, q.Panel, q.RefID, err, expr))
	}
}

// readsOnly reports whether every metric name expr reads is in names.
func readsOnly(expr string, names map[string]bool) bool {
	sels := scanExpr(expr).selectors
	for _, s := range sels {
		if !names[s] {
			return false
		}
	}
	return len(sels) > 0
}

// untilClean runs the check until one whole pass finds no problem or
// within passes (clean), and fails the test with what is left.
func (lc liveCheck) untilClean(t *testing.T, within time.Duration) (allowedEmpty []string) {
	t.Helper()
	last, whole := lc.clean(t, within, 2*time.Second)
	t.Logf("%s: checked %d rules and %d dashboard queries", lc.srv.name, whole.nrules, whole.checked)
	require.Empty(t, last.problems, "%s: %d problems:\n%s", lc.srv.name, len(last.problems), strings.Join(last.problems, "\n"))
	require.Empty(t, whole.problems, "%s: the last whole pass found %d problems:\n%s", lc.srv.name, len(whole.problems), strings.Join(whole.problems, "\n"))
	return whole.allowedEmpty
}

// clean runs passes every period until a whole pass finds no problem or
// within passes, and returns the last pass and the last whole one. Rules
// and rates need a while of scrapes and evaluations before they have data:
// after a pass with problems, the next passes check only the units that had
// them, and once those answer, a whole pass must find everything clean at
// once. That is what asking every query every period would find, at a
// fraction of the queries.
func (lc liveCheck) clean(t *testing.T, within, period time.Duration) (last, whole pass) {
	var only map[string]bool
	pollUntil(within, period, func() bool {
		last = lc.run(t, only)
		if only == nil {
			whole = last
		}
		switch {
		case len(last.failed) > 0:
			only = last.failed
		case only != nil:
			only = nil // what had problems answers now: check everything again
		default:
			return true
		}
		return false
	})
	return last, whole
}

// TestLiveDashboardsAndRules runs the real exporter on its sim source with
// the shipped profiling counters file, simulated pods and HPC jobs, scrapes
// it with each real Prometheus (promServers) loading the shipped rules, and
// checks that every dashboard query and every recording rule returns data
// and that every rule is healthy, except the rule groups that need a newer
// Prometheus than the server (the versions table of docs/kubernetes.md).
func TestLiveDashboardsAndRules(t *testing.T) {
	if testing.Short() {
		t.Skip("live check starts gpuscope and Prometheus; skipped with -short")
	}
	t.Parallel()
	liveDashboardsAndRules(t, gpuscopeBinary(t), "etc/dcp-metrics.csv")
}

// TestLiveDashboardsAndRulesInTheNewVocabulary is the same check on sim
// nodes whose counters file names the fields as DCGM 4.6/4.7 and
// dcgm-exporter 4.9 do (etc/dcp-metrics.csv rewritten by
// grafana/dash/vocabulary.tsv), so that they export the new names and
// units: every panel and rule must still answer. It skips, quoting the
// refusal, while gpuscope does not know a name of the new vocabulary.
func TestLiveDashboardsAndRulesInTheNewVocabulary(t *testing.T) {
	if testing.Short() {
		t.Skip("live check starts gpuscope and Prometheus; skipped with -short")
	}
	t.Parallel()
	counters := newVocabularyCounters(t, filepath.Join(repoRoot, "etc", "dcp-metrics.csv"))
	bin := gpuscopeBinary(t)
	if out, err := exec.Command(bin, "counters", "check", counters).CombinedOutput(); err != nil {
		if !strings.Contains(string(out), "unknown field") {
			t.Fatalf("counters check %s: %v: %s", counters, err, out)
		}
		t.Skipf("gpuscope does not know the new vocabulary yet: counters check %s: %s", filepath.Base(counters), strings.TrimSpace(string(out)))
	}
	liveDashboardsAndRules(t, bin, counters)
}

// newVocabularyCounters writes src with each legacy field name of the
// vocabulary replaced by its current one.
func newVocabularyCounters(t *testing.T, src string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	lines := strings.Split(string(b), "\n")
	renamed := 0
	for i, line := range lines {
		field, rest, ok := strings.Cut(line, ",")
		for _, v := range dash.Vocabulary {
			if ok && !strings.HasPrefix(line, "#") && strings.TrimSpace(field) == v.Legacy {
				lines[i] = v.Current + "," + rest
				renamed++
			}
		}
	}
	require.Positive(t, renamed, "%s names no renamed field", src)
	path := filepath.Join(t.TempDir(), "dcp-metrics-new-names.csv")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644))
	return path
}

// liveDashboardsAndRules is TestLiveDashboardsAndRules with a counters file.
func liveDashboardsAndRules(t *testing.T, bin, counters string) {
	servers := promServers(t)
	root, err := filepath.Abs(repoRoot)
	require.NoError(t, err)

	// Half the GPUs run HPC jobs, so that the per-job rules and panels
	// have data.
	jobs := t.TempDir()
	for gpu, job := range []string{"slurm-101", "slurm-101", "slurm-102", "slurm-102"} {
		require.NoError(t, os.WriteFile(filepath.Join(jobs, fmt.Sprint(gpu)), []byte(job+"\n"), 0o600))
	}
	// Two nodes, one per spelling of the host label, each its own cluster:
	// every dashboard is checked in both, so that no query or variable
	// reads one spelling only.
	nodes := []struct {
		cluster, seed string
		extra         []string
	}{
		{"sim", "1", nil},
		{"sim-lower", "2", []string{"--hostname-label", "hostname", "--hostname", "sim-lower-0"}},
	}
	var targets []scrapeTarget
	var clusters []string
	for _, node := range nodes {
		addr := freePort(t)
		args := append([]string{"--source", "sim", "--collectors", counters,
			"--address", addr, "--sim-gpus", "8", "--sim-seed", node.seed, "--sim-pods", "--hpc-job-mapping-dir", jobs,
			// A 10 s insight window gives the first insight results within 5 s.
			"--insight", "--insight-window", "10s"}, node.extra...)
		start(t, bin, root, args...)
		targets = append(targets, scrapeTarget{addr: addr, labels: map[string]string{"cluster": node.cluster}})
		clusters = append(clusters, node.cluster)
	}
	for _, tg := range targets {
		waitHTTP(t, "http://"+tg.addr+"/metrics", 30*time.Second)
	}
	rules := prepareRules(t, t.TempDir(), append(ruleFiles(t), simPrices(t)))
	files, err := dash.Files()
	require.NoError(t, err)

	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			lc := liveCheck{c: startPrometheus(t, srv, rules, targets...),
				srv: srv, rules: rules, dashboards: files, clusters: clusters, allowed: allowSimEmpty}
			// Rules and rates need a few scrapes and evaluations before
			// they have data, the use-and-cost rules a minute of history
			// (they account each minute against the value before it):
			// check until every rule and query answers, or two and a half
			// minutes have passed, and report what still did not.
			allowed := lc.untilClean(t, 150*time.Second)
			t.Logf("empty on the sim, as they may be:\n%s", strings.Join(allowed, "\n"))
		})
	}
}

// simPrices writes a price per GPU-hour for the sim's GPU model
// (source/sim/models.go) as the chart renders prometheusRule.pricePerGPUHour
// (deploy/helm/gpuscope/templates/_helpers.tpl), so that the cost rules and
// panels are held to having data.
func simPrices(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "gpuscope-prices.yml")
	require.NoError(t, os.WriteFile(p, []byte(`groups:
- name: gpuscope.prices
  interval: 1m
  rules:
  - record: model:gpuscope_price_per_gpu_hour:value
    expr: vector(2.5)
    labels:
      modelName: NVIDIA H100 80GB HBM3
`), 0o600))
	return p
}

// simEmptyFamilies are the families whose dashboard queries cannot have
// data on the sim without a kubelet, each with why: the check still fails
// them on an error.
var simEmptyFamilies = map[string]string{
	"gpuscope_pod_gpu_memory_used_bytes": "per-pod shares of shared GPUs come from --kubernetes-shared-gpu-attribution, " +
		"which reads the kubelet's PodResources socket and the host's /proc; the sim's pods (--sim-pods) label its GPUs without a kubelet",
	"gpuscope_pod_gpu_sm_utilization":   "as gpuscope_pod_gpu_memory_used_bytes: shared-GPU attribution needs a kubelet",
	"DCGM_FI_DEV_FABRIC_MANAGER_STATUS": fabricOptIn,
	"DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY": fabricOptIn,
	"DCGM_FI_DEV_FABRIC_HEALTH_MASK":    fabricOptIn,
}

// allowSimEmpty says why a dashboard query may be empty on the sim's own
// pods (simEmptyFamilies), or "".
func allowSimEmpty(_ string, q dash.Query) string {
	for _, family := range scanExpr(q.Expr).selectors {
		if why := simEmptyFamilies[family]; why != "" {
			return why
		}
	}
	return ""
}
