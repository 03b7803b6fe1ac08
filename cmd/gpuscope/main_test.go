package main

import (
	"bytes"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/gpuscope/gpuscope/internal/testkit/compattest"
	"github.com/gpuscope/gpuscope/source/dcgm"
)

// run runs the CLI with args and returns its output and error.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	app := newApp()
	var out bytes.Buffer
	app.Writer, app.ErrWriter = &out, &out
	app.ExitErrHandler = func(*cli.Context, error) {}
	err := runApp(app, append([]string{"gpuscope"}, args...))
	return out.String(), err
}

// TestBadFlagsAndVariablesNameTheFlag checks that bad values given as flags,
// as gpuscope's variables or as dcgm-exporter's variables all stop gpuscope
// before it opens a source, with an error naming the flag.
func TestBadFlagsAndVariablesNameTheFlag(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"gpuscope variable", nil, map[string]string{"GPUSCOPE_COLLECT_INTERVAL": "soon"}, `--collect-interval "soon"`},
		{"dcgm-exporter variable", nil, map[string]string{"DCGM_EXPORTER_INTERVAL": "soon"}, `--collect-interval "soon"`},
		{"log format", []string{"--log-format", "xml"}, nil, `--log-format "xml"`},
		{"log level", []string{"--log-level", "loud"}, nil, `--log-level "loud"`},
		{"window", []string{"--window", "10ms"}, nil, "--window 10ms"},
		{"host label", []string{"--source", "sim", "--hostname-label", "host"}, nil, `--hostname-label "host": want Hostname or hostname`},
		{"sim flag on another source", []string{"--source", "nvml", "--sim-gpus", "2"}, nil, "--sim-gpus only applies to --source=sim"},
		{"unknown source", []string{"--source", "rocm"}, nil, `--source "rocm"`},
		{"missing counters file", []string{"--source", "sim", "-f", "/nonexistent/counters.csv"}, nil, "/nonexistent/counters.csv"},
		{"bad sim model", []string{"--source", "sim", "--sim-model", "v100"}, nil, "--source=sim"},
		{"insight window", []string{"--source", "sim", "--insight", "--insight-window", "1s"}, nil, "--insight-window 1s"},
		{"insight window variable", []string{"--source", "sim", "--insight"}, map[string]string{"GPUSCOPE_INSIGHT_WINDOW": "500ms"}, "--insight-window 500ms"},
		{"unknown sim workload", []string{"--source", "sim", "--sim-workload", "gaming"}, nil, `--sim-workload: workloads "gaming": unknown kind "gaming"`},
		{"sim workloads per GPU", []string{"--source", "sim", "--sim-gpus", "3", "--sim-workload", "compute,idle"}, nil, "--sim-workload: workloads \"compute,idle\": give one kind for every GPU or 3 kinds"},
		{"sim workload on another source", []string{"--source", "nvml", "--sim-workload", "idle"}, nil, "--sim-workload only applies to --source=sim"},
		{"unknown scenario", []string{"--source", "sim", "--sim-scenario", "meltdown"}, nil,
			`--sim-scenario: unknown scenario "meltdown"; use one of idle-pod, zombie, leak, fan-stopped`},
		{"unknown scenario in the variable", []string{"--source", "sim"}, map[string]string{"GPUSCOPE_SIM_SCENARIO": "meltdown"},
			`--sim-scenario: unknown scenario "meltdown"`},
		{"scenario on another source", []string{"--source", "nvml", "--sim-scenario", "zombie"}, nil, "--sim-scenario only applies to --source=sim"},
		{"scenario and a node-shaping flag", []string{"--source", "sim", "--sim-scenario", "zombie", "--sim-gpus", "2"}, nil,
			"--sim-gpus with --sim-scenario zombie: the scenario lays out the node"},
		{"sim clock", []string{"--source", "sim", "--sim-clock", "fast"}, map[string]string{}, `--sim-clock "fast": use real or manual`},
		{"missing web config", []string{"--web-config-file", "/nonexistent/web.yml"}, nil, "--web-config-file /nonexistent/web.yml"},
		{"stray argument", []string{"serve"}, nil, `unexpected argument "serve"`},
		{"without --kubernetes", []string{"--source", "sim", "--kubernetes-pod-labels", "team"}, nil,
			"--kubernetes-pod-labels needs --kubernetes"},
		{"bad regular expression", []string{"--source", "sim", "--kubernetes", "--kubernetes-pod-labels", "team("}, nil,
			`--kubernetes-pod-labels: allowlist "team(" is not a valid regular expression`},
		{"bad regular expression in the variable", []string{"--source", "sim", "-k"}, map[string]string{"GPUSCOPE_KUBERNETES_POD_LABELS": "[a-"},
			"--kubernetes-pod-labels: allowlist"},
		{"outside a pod", []string{"--source", "sim", "--kubernetes", "--kubernetes-pod-labels", "team", "--hostname", "node-1"},
			map[string]string{"KUBERNETES_SERVICE_HOST": "", "KUBERNETES_SERVICE_PORT": ""}, "--kubernetes-pod-labels: pod labels: KUBERNETES_SERVICE_HOST"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, err := run(t, tt.args...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestDCGMExporterArgumentsAreAccepted parses a dcgm-exporter command line
// and its environment into gpuscope's flags.
func TestDCGMExporterArgumentsAreAccepted(t *testing.T) {
	t.Setenv("DCGM_EXPORTER_LISTEN", ":9500")
	t.Setenv("DCGM_REMOTE_HOSTENGINE_INFO", "localhost:5555")
	t.Setenv("DCGM_EXPORTER_KUBERNETES", "true")
	p, err := parseArgs(t, "-f", "/etc/dcgm-exporter/dcp-metrics-included.csv", "-c", "30000", "--web-config-file", "/dev/null")
	require.NoError(t, err)
	got := p.cfg
	assert.Equal(t, "/etc/dcgm-exporter/dcp-metrics-included.csv", got.Counters.File)
	assert.Equal(t, 30*time.Second, got.Collection.DefaultInterval)
	assert.Equal(t, ":9500", got.Web.Address)
	assert.Equal(t, dcgm.ModeRemote, got.DCGM.Mode)
	assert.Equal(t, "localhost:5555", got.DCGM.RemoteHostengine)
	assert.True(t, got.Kubernetes.Enabled)
	assert.Equal(t, "/dev/null", got.Web.WebConfigFile)
}

func TestEveryFlagHasAnEnvironmentVariable(t *testing.T) {
	app := newApp()
	flags := append([]cli.Flag{}, app.Flags...)
	for _, cmd := range app.Commands {
		flags = append(flags, cmd.Flags...)
		for _, sub := range cmd.Subcommands {
			flags = append(flags, sub.Flags...)
		}
	}
	for _, f := range flags {
		type withEnv interface{ GetEnvVars() []string }
		ev, ok := f.(withEnv)
		require.True(t, ok, f.Names()[0])
		vars := ev.GetEnvVars()
		require.NotEmpty(t, vars, "--%s has no environment variable", f.Names()[0])
		assert.True(t, strings.HasPrefix(vars[0], "GPUSCOPE_"), "--%s: the first variable is gpuscope's own", f.Names()[0])
	}
}

func TestCountersCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.csv")
	bad := filepath.Join(dir, "bad.csv")
	require.NoError(t, os.WriteFile(good, []byte("DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n"), 0o600))
	require.NoError(t, os.WriteFile(bad, []byte("# comment\nDCGM_FI_PROF_SM_ACTIV, gauge, typo\nDCGM_FI_DEV_GPU_TEMP, histogram, t\n"), 0o600))

	out, err := run(t, "counters", "check", good)
	require.NoError(t, err, out)
	assert.Contains(t, out, "ok")

	out, err = run(t, "counters", "check", good, bad)
	require.Error(t, err)
	assert.Contains(t, out, bad+":2")
	assert.Contains(t, out, "did you mean DCGM_FI_PROF_SM_ACTIVE?")
	assert.Contains(t, out, bad+":3")
	assert.Contains(t, out, "histogram")

	_, err = run(t, "counters", "check")
	require.Error(t, err)
}

func TestCountersCheckAcceptsDCGMExporterFiles(t *testing.T) {
	dir := compattest.Dir(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.csv"))
	require.NoError(t, err)
	require.Len(t, files, 3)
	out, err := run(t, append([]string{"counters", "check"}, files...)...)
	require.NoError(t, err, out)
}

func TestCountersListFormats(t *testing.T) {
	out, err := run(t, "counters", "list", "--source", "nvml")
	require.NoError(t, err)
	assert.Contains(t, out, "DCGM_FI_DEV_GPU_TEMP")
	out, err = run(t, "counters", "list", "--format", "csv")
	require.NoError(t, err)
	assert.Contains(t, out, "DCGM_FI_DEV_GPU_TEMP,")
	_, err = run(t, "counters", "list", "--format", "yaml")
	require.Error(t, err)
}

func TestVersion(t *testing.T) {
	out, err := run(t, "--version")
	require.NoError(t, err)
	assert.Contains(t, out, "gpuscope")
}

func TestProfilingCommandPostsToTheExporter(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ := r.BasicAuth()
		got = append(got, r.Method+" "+r.URL.Path+" "+user+":"+pass+" "+r.Header.Get("X-Gpuscope-Request"))
		if r.URL.Path == "/api/v1/profiling/resume" {
			http.Error(w, "profiling module not loaded", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("profiling paused\n"))
	}))
	defer srv.Close()
	out, err := run(t, "profiling", "pause", "--url", srv.URL, "--username", "prom", "--password", "pw")
	require.NoError(t, err)
	assert.Equal(t, "profiling paused\n", out)
	_, err = run(t, "profiling", "resume", "--url", srv.URL+"/")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "profiling module not loaded")
	assert.Equal(t, []string{"POST /api/v1/profiling/pause prom:pw 1", "POST /api/v1/profiling/resume : 1"}, got)
}

// TestClearerFileErrorsPollIntervalHasAMinimum: a poll interval of 1ns
// would spin a core re-reading the counters file, and a negative one says
// nothing useful; both are refused, naming the flag and the minimum, before
// anything else is checked or started.
func TestClearerFileErrorsPollIntervalHasAMinimum(t *testing.T) {
	for _, value := range []string{"1ns", "99ms", "-5s"} {
		t.Run(value, func(t *testing.T) {
			_, err := run(t, "--source", "sim", "--collectors-poll-interval", value, "--web-config-file", "/nonexistent/web.yml")
			require.Error(t, err)
			assert.Contains(t, err.Error(), "--collectors-poll-interval "+value+": below the minimum 100ms (0 turns polling off)")
		})
	}
}

// TestProfilingEndpointsCommandTrustsACAFile: `gpuscope profiling` reaches
// an exporter with a self-signed certificate through --tls.ca-file, or
// --tls.insecure-skip-verify, and refuses it otherwise.
func TestProfilingEndpointsCommandTrustsACAFile(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("profiling paused\n"))
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600))
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"the CA file", []string{"--tls.ca-file", ca}, ""},
		{"no verification", []string{"--tls.insecure-skip-verify"}, ""},
		{"neither", nil, "certificate"},
		{"a CA file that is not PEM", []string{"--tls.ca-file", "/dev/null"}, "--tls.ca-file /dev/null: no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := run(t, append([]string{"profiling", "pause", "--url", srv.URL}, tt.args...)...)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "profiling paused\n", out)
		})
	}
}

// TestConfigurationTyposAreFatal: a bad --dcgm-mode or DCGM address is an
// error at start whatever the source, and in auto mode it is not taken for
// a host engine that is away (which would serve NVML and probe DCGM
// forever).
func TestConfigurationTyposAreFatal(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--source", "auto", "--dcgm-mode", "bogus"}, `--dcgm-mode "bogus": want one of embedded, remote, start`},
		{[]string{"--source", "nvml", "--dcgm-mode", "bogus"}, `--dcgm-mode "bogus": want one of embedded, remote, start`},
		{[]string{"--source", "auto", "--dcgm-mode", "remote"}, "--dcgm-mode=remote needs --dcgm-remote-hostengine (host:port or a unix socket path)"},
		{[]string{"--source", "auto", "--dcgm-mode", "embedded", "--dcgm-remote-hostengine", "h:5555"}, `--dcgm-remote-hostengine "h:5555" is only used with --dcgm-mode=remote, not embedded`},
		{[]string{"--source", "sim", "--dcgm-mode", "bogus"}, `--dcgm-mode "bogus": want one of embedded, remote, start`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := run(t, tt.args...)
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
		})
	}
}

// TestConfigurationTyposServingIsLoggedAfterBind: with the port taken,
// gpuscope fails naming the address and never logs that it is serving.
func TestConfigurationTyposServingIsLoggedAfterBind(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	stderr := os.Stderr
	os.Stderr = w
	_, runErr := run(t, "--source", "sim", "--sim-gpus", "1", "--address", busy.Addr().String())
	os.Stderr = stderr
	require.NoError(t, w.Close())
	logged, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Error(t, runErr)
	assert.Contains(t, runErr.Error(), "listening on "+busy.Addr().String())
	assert.NotContains(t, string(logged), "gpuscope is serving")
}
