// Package verify checks the dashboards and the Prometheus rules together:
// statically against each other and the runbooks, and live against the real
// gpuscope binary on its sim source scraped by a real Prometheus server.
package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/gpuscope/gpuscope/grafana/dash"
)

// repoRoot is the main module, two levels above this package.
const repoRoot = "../.."

// skipOrFail skips a test whose tool is missing, except in CI where a
// missing tool means the test command is broken.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// start runs a process for the test's lifetime, its output in a log file
// that is printed when the test fails.
func start(t *testing.T, name string, dir string, args ...string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), filepath.Base(name)+".log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start(), "starting %s", name)
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("%s log tail:\n%s", filepath.Base(name), b)
		}
	})
}

// pollUntil checks cond every period until it holds or within passes, and
// reports whether it held.
func pollUntil(within, period time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	tick := time.NewTicker(period)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

func waitHTTP(t *testing.T, u string, within time.Duration) {
	t.Helper()
	ok := pollUntil(within, 250*time.Millisecond, func() bool {
		resp, err := http.Get(u)
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if !ok {
		t.Fatalf("%s did not answer 200 within %s", u, within)
	}
}

func gpuscopeBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("GPUSCOPE_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "gpuscope")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/gpuscope")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "building gpuscope:\n%s", out)
	return bin
}

type promResponse struct {
	Status    string          `json:"status"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Data      json.RawMessage `json:"data"`
}

type promClient struct{ base string }

func (c promClient) get(path string, params url.Values) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path+"?"+params.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("building request for %s: %w", path, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("calling %s: %w", path, err)
	}
	defer resp.Body.Close()
	var pr promResponse
	if err := json.NewDecoder(resp.Body).Decode(&pr); err != nil {
		return nil, fmt.Errorf("decoding %s answer: %w", path, err)
	}
	if pr.Status != "success" {
		return nil, fmt.Errorf("%s: %s", pr.ErrorType, pr.Error)
	}
	return pr.Data, nil
}

type sample struct {
	Metric map[string]string `json:"metric"`
}

// query runs an instant query and returns its series; a scalar result
// counts as one series.
func (c promClient) query(expr string) ([]sample, error) {
	data, err := c.get("/api/v1/query", url.Values{"query": {expr}})
	if err != nil {
		return nil, err
	}
	var r struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decoding query result: %w", err)
	}
	if r.ResultType == "scalar" {
		return []sample{{}}, nil
	}
	var s []sample
	if err := json.Unmarshal(r.Result, &s); err != nil {
		return nil, fmt.Errorf("decoding %s result: %w", r.ResultType, err)
	}
	return s, nil
}

type rule struct {
	Name      string            `json:"name"`
	Query     string            `json:"query"`
	Type      string            `json:"type"`
	Health    string            `json:"health"`
	LastError string            `json:"lastError"`
	Labels    map[string]string `json:"labels"`
	EvalTime  float64           `json:"evaluationTime"`
	LastEval  time.Time         `json:"lastEvaluation"`
}

func (c promClient) rules() ([]rule, error) {
	data, err := c.get("/api/v1/rules", nil)
	if err != nil {
		return nil, err
	}
	var r struct {
		Groups []struct {
			Rules []rule `json:"rules"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decoding rules: %w", err)
	}
	var out []rule
	for _, g := range r.Groups {
		out = append(out, g.Rules...)
	}
	return out, nil
}

// grafanaBuiltins replaces Grafana's own interval variables with values
// that fit a run of a minute scraped every second.
var grafanaBuiltins = []string{"$__rate_interval", "1m", "$__range_s", "60", "$__range", "1m", "$__interval", "15s"}

func substitute(expr string, vars map[string]string) string {
	pairs := append([]string(nil), grafanaBuiltins...)
	names := make([]string, 0, len(vars))
	for n := range vars {
		names = append(names, n)
	}
	// Longest first, so that $pod is not mistaken for a prefix of another.
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	for _, n := range names {
		pairs = append(pairs, "${"+n+"}", vars[n], "$"+n, vars[n])
	}
	return strings.NewReplacer(pairs...).Replace(expr)
}

// variableValues evaluates a query variable as Grafana does: label_values,
// or query_result with the variable's regex.
func (c promClient) variableValues(v dash.Variable, q string) ([]string, error) {
	if inner, ok := strings.CutPrefix(q, "query_result("); ok {
		return c.queryResult(strings.TrimSuffix(inner, ")"), v.Regex)
	}
	return c.labelValues(q)
}

// queryResult evaluates query_result(expr) with a /regex/ as Grafana does:
// each series as `name{label="value", ...}`, the regex's first group of
// each that matches.
func (c promClient) queryResult(expr, regex string) ([]string, error) {
	re, err := regexp.Compile(strings.TrimSuffix(strings.TrimPrefix(regex, "/"), "/"))
	if err != nil {
		return nil, fmt.Errorf("variable regex %q: %w", regex, err)
	}
	res, err := c.query(expr)
	if err != nil {
		return nil, err
	}
	var vals []string
	for _, s := range res {
		names := make([]string, 0, len(s.Metric))
		for n := range s.Metric {
			names = append(names, n)
		}
		sort.Strings(names)
		var line strings.Builder
		line.WriteString(s.Metric["__name__"] + "{")
		for _, n := range names {
			if n != "__name__" {
				fmt.Fprintf(&line, "%s=%q, ", n, s.Metric[n])
			}
		}
		line.WriteString("}")
		if m := re.FindStringSubmatch(line.String()); len(m) > 1 && m[1] != "" {
			vals = append(vals, m[1])
		}
	}
	sort.Strings(vals)
	return vals, nil
}

// labelValues evaluates label_values(selector, label) as Grafana does.
func (c promClient) labelValues(q string) ([]string, error) {
	inner := strings.TrimSuffix(strings.TrimPrefix(q, "label_values("), ")")
	i := strings.LastIndex(inner, ",")
	if i < 0 {
		return nil, fmt.Errorf("variable query %q is not label_values(selector, label)", q)
	}
	selector, label := strings.TrimSpace(inner[:i]), strings.TrimSpace(inner[i+1:])
	res, err := c.query(fmt.Sprintf("group by (%s) (%s)", label, selector))
	if err != nil {
		return nil, err
	}
	var vals []string
	for _, s := range res {
		if v := s.Metric[label]; v != "" {
			vals = append(vals, v)
		}
	}
	sort.Strings(vals)
	return vals, nil
}

// TestLiveDashboardsAndRules runs the real exporter on its sim source with
// the shipped profiling counters file and simulated pods, scrapes it with a
// real Prometheus that loads the shipped rules, and checks that every
// dashboard query and every recording rule returns data and that every
// rule is healthy.
func TestLiveDashboardsAndRules(t *testing.T) {
	if testing.Short() {
		t.Skip("live check starts gpuscope and Prometheus; skipped with -short")
	}
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		skipOrFail(t, "prometheus is not installed (apt-get install -y prometheus): %v", err)
	}
	root, err := filepath.Abs(repoRoot)
	require.NoError(t, err)
	bin := gpuscopeBinary(t)

	// Half the GPUs run HPC jobs, so that the per-job rules and panels
	// have data.
	jobs := t.TempDir()
	for gpu, job := range []string{"slurm-101", "slurm-101", "slurm-102", "slurm-102"} {
		require.NoError(t, os.WriteFile(filepath.Join(jobs, fmt.Sprint(gpu)), []byte(job+"\n"), 0o600))
	}
	// Two nodes, one per spelling of the host label, each its own cluster:
	// every dashboard is checked on both, so that no query or variable
	// reads one spelling only.
	exporterAddr, lowerAddr := freePort(t), freePort(t)
	for _, node := range []struct {
		addr, seed string
		extra      []string
	}{
		{exporterAddr, "1", nil},
		{lowerAddr, "2", []string{"--hostname-label", "hostname", "--hostname", "sim-lower-0"}},
	} {
		args := append([]string{"--source", "sim", "--collectors", "etc/dcp-metrics.csv",
			"--address", node.addr, "--sim-gpus", "8", "--sim-seed", node.seed, "--sim-pods", "--hpc-job-mapping-dir", jobs,
			// A 10 s insight window gives the first insight results within 5 s.
			"--insight", "--insight-window", "10s"}, node.extra...)
		start(t, bin, root, args...)
	}
	waitHTTP(t, "http://"+exporterAddr+"/metrics", 30*time.Second)
	waitHTTP(t, "http://"+lowerAddr+"/metrics", 30*time.Second)

	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - %s
  - %s
scrape_configs:
  - job_name: gpuscope
    static_configs:
      - targets: ["%s"]
        labels:
          cluster: sim
      - targets: ["%s"]
        labels:
          cluster: sim-lower
`, atGlobalInterval(t, filepath.Join(root, "deploy/prometheus/gpuscope-alerts.yml"), dir),
		atGlobalInterval(t, filepath.Join(root, "deploy/prometheus/gpuscope-recording.yml"), dir), exporterAddr, lowerAddr)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(cfg), 0o600))
	promAddr := freePort(t)
	start(t, promBin, dir, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr, "--log.level=warn",
		// The distribution rules and panels read native histograms.
		"--enable-feature=native-histograms")
	waitHTTP(t, "http://"+promAddr+"/-/ready", 30*time.Second)
	c := promClient{base: "http://" + promAddr}

	// Rules and rates need a few scrapes and evaluations before they have
	// data, the use-and-cost rules a minute of history (they account each
	// minute against the value before it): check until every rule and
	// query answers, or two and a half minutes have passed, and report what
	// still did not.
	var problems, empty []string
	var nrules, checked int
	pollUntil(150*time.Second, 2*time.Second, func() bool {
		problems, empty, nrules, checked = checkRulesAndDashboards(t, c)
		return len(problems) == 0
	})
	t.Logf("checked %d rules and %d dashboard queries; empty on the sim, as they may be:\n%s", nrules, checked, strings.Join(empty, "\n"))
	require.Empty(t, problems, "%d problems:\n%s", len(problems), strings.Join(problems, "\n"))
}

// atGlobalInterval copies a rules file into dir without the groups' own
// evaluation intervals, and returns the copy's path. A group evaluated every
// 5 minutes is first evaluated at an offset Prometheus derives from the
// group and the wall clock, often after the test has given up, and its
// rules would show health "unknown": at the global 1 s interval every rule
// is evaluated within seconds, and a rule that fails still shows.
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

// checkRulesAndDashboards runs every recording rule, and every dashboard
// query in each cluster of the test, against Prometheus and lists the ones
// without data, apart from the queries that may be empty on the sim (listed
// as empty), with the number of rules and queries checked.
func checkRulesAndDashboards(t *testing.T, c promClient) (problems, empty []string, nrules, checked int) {
	rules, err := c.rules()
	require.NoError(t, err)
	require.NotEmpty(t, rules)
	for _, r := range rules {
		if r.Health != "ok" {
			problems = append(problems, fmt.Sprintf("rule %s: health %q: %s", r.Name, r.Health, r.LastError))
		}
		if r.Type != "recording" {
			continue
		}
		res, err := c.query(r.Query)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("recording rule %s: %v", r.Name, err))
		case len(res) == 0:
			problems = append(problems, fmt.Sprintf("recording rule %s returns no series: %s", r.Name, r.Query))
		}
	}

	files, err := dash.Files()
	require.NoError(t, err)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, cluster := range []string{"sim", "sim-lower"} {
		for _, name := range names {
			p, e, n := checkDashboard(t, c, name, files[name], cluster)
			problems, empty = append(problems, p...), append(empty, e...)
			checked += n
		}
	}
	return problems, empty, len(rules), checked
}

// emptyOnSim are the dashboard queries that cannot have data on the sim,
// each with the reason: the check still fails them on an error.
var emptyOnSim = map[string]string{
	"gpuscope_pod_gpu_memory_used_bytes": "per-pod shares of shared GPUs come from --kubernetes.shared-gpu-attribution, " +
		"which reads the kubelet's PodResources socket and the host's /proc; the sim's pods (--sim-pods) label its GPUs without a kubelet",
	"gpuscope_pod_gpu_sm_utilization": "as gpuscope_pod_gpu_memory_used_bytes: shared-GPU attribution needs a kubelet",
}

// mayBeEmpty says why a query may return nothing on the sim, or "".
func mayBeEmpty(expr string) string {
	for family, why := range emptyOnSim {
		if strings.Contains(expr, family) {
			return why
		}
	}
	return ""
}

// checkDashboard resolves a dashboard's variables within one cluster (the
// first value of each other variable) and runs every panel query, listing
// the variables without values and the queries without data, with the
// number of queries run.
func checkDashboard(t *testing.T, c promClient, name string, raw []byte, cluster string) (problems, empty []string, checked int) {
	qs, vs, err := dash.Extract(raw)
	require.NoError(t, err)
	where := name + " (cluster " + cluster + ")"
	vars := map[string]string{"datasource": "prometheus"}
	for _, v := range vs {
		vals, err := c.variableValues(v, substitute(v.Query, vars))
		switch {
		case err != nil || len(vals) == 0:
			problems = append(problems, fmt.Sprintf("%s: variable %s (%s) has no values: %v", where, v.Name, v.Query, err))
			vars[v.Name] = ".*"
		case v.Name == "cluster":
			if !slices.Contains(vals, cluster) {
				problems = append(problems, fmt.Sprintf("%s: variable cluster lacks %s: %v", where, cluster, vals))
			}
			vars[v.Name] = cluster
		default:
			vars[v.Name] = vals[0]
		}
	}
	for _, q := range qs {
		expr := substitute(q.Expr, vars)
		res, err := c.query(expr)
		checked++
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: panel %q %s: %v\n    %s", where, q.Panel, q.RefID, err, expr))
		case len(res) == 0 && mayBeEmpty(q.Expr) != "":
			empty = append(empty, fmt.Sprintf("%s: panel %q %s: %s", where, q.Panel, q.RefID, mayBeEmpty(q.Expr)))
		case len(res) == 0:
			problems = append(problems, fmt.Sprintf("%s: panel %q %s returns no series\n    %s", where, q.Panel, q.RefID, expr))
		}
	}
	return problems, empty, checked
}
