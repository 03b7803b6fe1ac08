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
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
	startWithEnv(t, name, dir, nil, args...)
}

// startWithEnv is start with the environment env (nil: this process's),
// and returns the process, which the test may signal.
func startWithEnv(t *testing.T, name string, dir string, env []string, args ...string) *os.Process {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), filepath.Base(name)+".log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = env
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
	return cmd.Process
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

// The binaries are built once for every test of the package, into
// buildDir, which TestMain removes.
var (
	buildDir  string
	buildDirs sync.Once
	buildErr  error
	builds    sync.Map // package path -> *builtBinary
)

type builtBinary struct {
	once sync.Once
	path string
	err  error
}

// buildMain builds a command of the main module once per test process, with
// make build's compile flags.
func buildMain(t *testing.T, pkg string) string {
	t.Helper()
	buildDirs.Do(func() { buildDir, buildErr = os.MkdirTemp("", "gpuscope-verify-") })
	require.NoError(t, buildErr)
	v, _ := builds.LoadOrStore(pkg, &builtBinary{})
	b := v.(*builtBinary)
	b.once.Do(func() {
		b.path = filepath.Join(buildDir, filepath.Base(pkg))
		// make build's compile flags, so that this build shares every
		// compiled package with the release's and the other tests' builds.
		var stderr strings.Builder
		mk := exec.Command("make", "-C", repoRoot, "--no-print-directory", "-s", "buildflags")
		mk.Stderr = &stderr
		flags, err := mk.Output()
		if err != nil {
			b.err = fmt.Errorf("make buildflags: %w: %s", err, stderr.String())
			return
		}
		args := append(append([]string{"build"}, strings.Fields(string(flags))...), "-o", b.path, pkg)
		cmd := exec.Command("go", args...)
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("building %s: %w\n%s", pkg, err, out)
		}
	})
	require.NoError(t, b.err)
	return b.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

func gpuscopeBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("GPUSCOPE_BIN"); bin != "" {
		return bin
	}
	return buildMain(t, "./cmd/gpuscope")
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
	Group     string            `json:"-"`
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
			Name  string `json:"name"`
			Rules []rule `json:"rules"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decoding rules: %w", err)
	}
	var out []rule
	for _, g := range r.Groups {
		for _, ru := range g.Rules {
			ru.Group = g.Name
			out = append(out, ru)
		}
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
