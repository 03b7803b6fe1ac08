// Package e2etest runs the real gpuscope binary and a real Prometheus server
// for end-to-end tests: it builds the binary, starts both on free loopback
// ports, and queries Prometheus over its HTTP API.
package e2etest

import (
	"bytes"
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
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
)

// RequireTool returns the path of a tool the test needs. Where it is missing
// the test is skipped, except in CI (CI=true), where it fails: the test
// command installs it there.
func RequireTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	msg := fmt.Sprintf("%s is not installed (the README's test command installs it: make test)", name)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// RepoRoot is the module root, found from this file's location.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// BuildFlags returns the compile flags of make build (`make buildflags` in
// root): the tests build with them too, so that the release build and the
// tests' builds share every compiled package in the Go build cache.
func BuildFlags(root string) ([]string, error) {
	cmd := exec.Command("make", "--no-print-directory", "-s", "buildflags")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("make buildflags in %s: %w: %s", root, err, stderr.String())
	}
	return strings.Fields(string(out)), nil
}

// Binary builds gpuscope and gpuscope-client once per test process, with
// make build's compile flags, and returns gpuscope's path. Where
// GPUSCOPE_BIN names a gpuscope with gpuscope-client beside it, as
// scripts/test.sh builds once for every package, it returns that instead.
func Binary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("GPUSCOPE_BIN"); bin != "" {
		for _, p := range []string{bin, filepath.Join(filepath.Dir(bin), "gpuscope-client")} {
			if st, err := os.Stat(p); err != nil || st.Mode().Perm()&0o111 == 0 {
				t.Fatalf("GPUSCOPE_BIN=%s: %s is not an executable file", bin, p)
			}
		}
		return bin
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gpuscope-e2e-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "gpuscope")
		flags, err := BuildFlags(RepoRoot())
		if err != nil {
			buildErr = err
			return
		}
		// gpuscope top and capture run the gpuscope-client beside it.
		args := append(append([]string{"build"}, flags...), "-o", dir+string(filepath.Separator), "./cmd/gpuscope", "./cmd/gpuscope-client")
		cmd := exec.Command("go", args...)
		cmd.Dir = RepoRoot()
		cmd.Env = append(os.Environ(), "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// FreePort returns a loopback address with a free port.
func FreePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Process is a started child process whose output is kept for failures.
type Process struct {
	Cmd  *exec.Cmd
	out  *lockedBuffer
	stop func()
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Output is what the process printed so far. A line the process writes
// after the moment a test waited for may still be missing: use WaitOutput
// for a line that must come, or Stop for everything it ever wrote.
func (p *Process) Output() string { return p.out.String() }

// WaitOutput waits until the output contains s.
func (p *Process) WaitOutput(t testing.TB, s string, timeout time.Duration) {
	t.Helper()
	if !testwait.Until(timeout, func() bool { return strings.Contains(p.out.String(), s) }) {
		t.Fatalf("the output did not contain %q within %s", s, timeout)
	}
}

// Stop interrupts the process, waits for it to end and returns all it
// wrote, so that a test can assert a line is absent.
func (p *Process) Stop() string {
	p.stop()
	return p.out.String()
}

// Start runs a command until the test ends; its output is logged when the
// test fails.
func Start(t testing.TB, name string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(name, args...)
	buf := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = buf, buf
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	p := &Process{Cmd: cmd, out: buf}
	p.stop = sync.OnceFunc(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("output of %s:\n%s", filepath.Base(name), tail(buf.String(), 6000))
		}
	})
	return p
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// WaitHTTP waits until url answers 200.
func WaitHTTP(t testing.TB, url string, timeout time.Duration) {
	t.Helper()
	var last string
	ok := testwait.Every(timeout, 100*time.Millisecond, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			last = err.Error()
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		last = fmt.Sprintf("%s: %s", resp.Status, body)
		return resp.StatusCode == http.StatusOK
	})
	if !ok {
		t.Fatalf("%s did not answer 200 within %s: %s", url, timeout, last)
	}
}

// GPUScope starts the real binary with args on a free port and waits until
// it is ready. It returns the base URL.
func GPUScope(t testing.TB, args ...string) (string, *Process) {
	t.Helper()
	addr := FreePort(t)
	p := Start(t, Binary(t), append([]string{"--address", addr, "--hostname", "e2e-node"}, args...)...)
	base := "http://" + addr
	WaitHTTP(t, base+"/ready", 30*time.Second)
	return base, p
}

// Prometheus starts a real Prometheus server that scrapes targets every
// second and loads ruleFiles. It returns the API base URL.
func Prometheus(t testing.TB, targets []string, ruleFiles ...string) string {
	t.Helper()
	return PrometheusWithFeatures(t, nil, targets, ruleFiles...)
}

// PrometheusWithFeatures is Prometheus with the feature flags given
// (--enable-feature), such as native-histograms.
func PrometheusWithFeatures(t testing.TB, features []string, targets []string, ruleFiles ...string) string {
	t.Helper()
	return PrometheusOn(t, PrometheusServer{Name: "prometheus", Bin: RequireTool(t, "prometheus")}, features, targets, ruleFiles...)
}

// PrometheusWithFlags is Prometheus with more command-line flags, such as
// a query limit (--query.max-samples) a test wants it to enforce.
func PrometheusWithFlags(t testing.TB, flags []string, targets []string, ruleFiles ...string) string {
	t.Helper()
	srv := PrometheusServer{Name: "prometheus", Bin: RequireTool(t, "prometheus")}
	return startPrometheus(t, srv, nil, flags, targets, ruleFiles...)
}

// PrometheusServer is a Prometheus server binary.
type PrometheusServer struct {
	Name string
	Bin  string
}

// PrometheusServers lists the servers that end-to-end tests of the rules
// run on: Debian's Prometheus 2.42 (prometheus on the PATH) and the current
// Prometheus 3 that scripts/build-prometheus.sh builds, named by
// GPUSCOPE_PROMETHEUS3 (make test sets it). A missing one is skipped with a
// log line; in CI (CI=true) it fails the test.
func PrometheusServers(t testing.TB) []PrometheusServer {
	t.Helper()
	var out []PrometheusServer
	var missing []string
	if p, err := exec.LookPath("prometheus"); err == nil {
		out = append(out, PrometheusServer{Name: "debian", Bin: p})
	} else {
		missing = append(missing, "prometheus is not installed (make test installs it)")
	}
	if p := os.Getenv("GPUSCOPE_PROMETHEUS3"); p != "" {
		out = append(out, PrometheusServer{Name: "prometheus3", Bin: p})
	} else {
		missing = append(missing, "GPUSCOPE_PROMETHEUS3 is not set (to scripts/build-prometheus.sh's prometheus; make test sets it)")
	}
	for _, m := range missing {
		if os.Getenv("CI") == "true" {
			t.Fatal(m)
		}
		t.Logf("without that server: %s", m)
	}
	if len(out) == 0 {
		t.Skip(strings.Join(missing, "; "))
	}
	return out
}

var serverVersion = regexp.MustCompile(`version (\d+)\.(\d+)`)

// scrapesNativeHistogramsBySetting reports whether bin is Prometheus 3.9
// or later, which scrapes native histograms by the scrape setting
// scrape_native_histograms rather than by --enable-feature.
func scrapesNativeHistogramsBySetting(t testing.TB, bin string) bool {
	t.Helper()
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v: %s", bin, err, out)
	}
	m := serverVersion.FindSubmatch(out)
	if m == nil {
		t.Fatalf("%s --version printed no version: %s", bin, out)
	}
	major, _ := strconv.Atoi(string(m[1]))
	minor, _ := strconv.Atoi(string(m[2]))
	return major > 3 || major == 3 && minor >= 9
}

// PrometheusOn starts srv scraping targets every second with ruleFiles and
// the feature flags given; native-histograms becomes the scrape setting on
// a release that has it instead of the flag. It returns the API base URL.
func PrometheusOn(t testing.TB, srv PrometheusServer, features []string, targets []string, ruleFiles ...string) string {
	t.Helper()
	return startPrometheus(t, srv, features, nil, targets, ruleFiles...)
}

// startPrometheus starts srv with the feature flags and the other
// command-line flags given; see PrometheusOn.
func startPrometheus(t testing.TB, srv PrometheusServer, features, extra []string, targets []string, ruleFiles ...string) string {
	t.Helper()
	bin := srv.Bin
	dir := t.TempDir()
	global := ""
	flags := append([]string(nil), extra...)
	for _, f := range features {
		if f == "native-histograms" && scrapesNativeHistogramsBySetting(t, bin) {
			global = "  scrape_native_histograms: true\n"
			continue
		}
		flags = append(flags, "--enable-feature="+f)
	}
	var rules strings.Builder
	for _, f := range ruleFiles {
		abs, err := filepath.Abs(f)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&rules, "  - %q\n", abs)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
%srule_files:
%s
scrape_configs:
  - job_name: gpuscope
    static_configs:
      - targets: [%s]
`, global, rules.String(), quoteAll(targets))
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := FreePort(t)
	args := []string{"--config.file=" + cfgPath, "--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr, "--log.level=warn"}
	args = append(args, flags...)
	Start(t, bin, args...)
	base := "http://" + addr
	WaitHTTP(t, base+"/-/ready", 60*time.Second)
	return base
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// Sample is one series of an instant-query result.
type Sample struct {
	Metric map[string]string
	Value  float64
}

// Query runs an instant query and returns its vector result.
func Query(t testing.TB, promURL, expr string) ([]Sample, error) {
	t.Helper()
	resp, err := http.Get(promURL + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("decoding the answer to %q: %w", expr, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", expr, body.Error)
	}
	var out []Sample
	for _, r := range body.Data.Result {
		var v float64
		if s, ok := r.Value[1].(string); ok {
			fmt.Sscanf(s, "%g", &v)
		}
		out = append(out, Sample{Metric: r.Metric, Value: v})
	}
	return out, nil
}

// Eventually queries until check accepts the result or timeout passes.
func Eventually(t testing.TB, promURL, expr string, timeout time.Duration, check func([]Sample) error) []Sample {
	t.Helper()
	var last error
	var res []Sample
	ok := testwait.Every(timeout, 250*time.Millisecond, func() bool {
		var err error
		if res, err = Query(t, promURL, expr); err == nil {
			err = check(res)
		}
		last = err
		return err == nil
	})
	if !ok {
		t.Fatalf("query %q: not as expected within %s: %v", expr, timeout, last)
	}
	return res
}
