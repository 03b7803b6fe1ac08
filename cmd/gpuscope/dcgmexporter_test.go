package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/gpuscope/gpuscope/cmd/internal/exitcode"
	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/config"
	"github.com/gpuscope/gpuscope/internal/testkit/compattest"
)

// flagRow is one line of flags.tsv: dcgm-exporter's flag list at d5e5f51.
type flagRow struct {
	name, env, def, typ string
	aliases             []string
}

func readFlagsTSV(t *testing.T) []flagRow {
	t.Helper()
	return readFlagsFile(t, filepath.Join(compattest.Dir(t), "flags.tsv"))
}

// readFlagsFile reads a flag list in flags.tsv's columns.
func readFlagsFile(t *testing.T, path string) []flagRow {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var rows []flagRow
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		if strings.HasPrefix(sc.Text(), "#") || strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		cols := strings.Split(sc.Text(), "\t")
		require.Len(t, cols, 5, "%s:%d", path, line)
		r := flagRow{name: cols[0], env: cols[2], def: cols[3], typ: cols[4]}
		if cols[1] != "" {
			r.aliases = strings.Split(cols[1], ",")
		}
		rows = append(rows, r)
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, rows)
	return rows
}

// parsed is what one run of the command line produced.
type parsed struct {
	c   *cli.Context
	cfg *config.Config
}

// parseArgs runs the app's flag parsing and builds the configuration,
// stopping before anything is opened.
func parseArgs(t *testing.T, args ...string) (parsed, error) {
	t.Helper()
	var p parsed
	app := newAppWith(func(_ context.Context, cfg *config.Config) error { p.cfg = cfg; return nil })
	var out bytes.Buffer
	app.Writer, app.ErrWriter = &out, &out
	app.ExitErrHandler = func(*cli.Context, error) {}
	build := app.Action
	app.Action = func(c *cli.Context) error { p.c = c; return build(c) }
	err := runApp(app, append([]string{"gpuscope"}, args...))
	assert.Empty(t, out.String(), "parsing prints nothing")
	return p, err
}

func mustInterval(t *testing.T, s string) string {
	d, err := counters.ParseInterval(s)
	require.NoError(t, err)
	return d.String()
}

// flagCase says, for one of dcgm-exporter's flags, a value to give it, any
// flag it needs beside it, and where the value lands in gpuscope's
// configuration.
type flagCase struct {
	value string
	with  []string
	got   func(t *testing.T, p parsed) string
	want  string
}

func flagCases() map[string]flagCase {
	get := func(f func(*config.Config) any) func(*testing.T, parsed) string {
		return func(_ *testing.T, p parsed) string { return fmt.Sprint(f(p.cfg)) }
	}
	return map[string]flagCase{
		"collectors":                   {value: "/etc/dcgm-exporter/dcp-metrics-included.csv", got: get(func(c *config.Config) any { return c.Counters.File }), want: "/etc/dcgm-exporter/dcp-metrics-included.csv"},
		"address":                      {value: ":9500", got: get(func(c *config.Config) any { return c.Web.Address }), want: ":9500"},
		"collect-interval":             {value: "20000", want: "20s", got: get(func(c *config.Config) any { return c.Collection.DefaultInterval })},
		"kubernetes":                   {value: "true", got: get(func(c *config.Config) any { return c.Kubernetes.Enabled }), want: "true"},
		"use-old-namespace":            {value: "true", got: get(func(c *config.Config) any { return c.Engine.OldNamespace }), want: "true"},
		"cpu-devices":                  {value: "g:0-1", got: get(func(c *config.Config) any { return c.Collection.Devices.CPUs.String() }), want: "g:0,1"},
		"configmap-data":               {value: "gpu-operator:exporter-metrics", want: "gpu-operator/exporter-metrics", got: get(func(c *config.Config) any { return c.Counters.ConfigMap.String() })},
		"remote-hostengine-info":       {value: "10.0.0.2:5555", want: "remote 10.0.0.2:5555", got: get(func(c *config.Config) any { return string(c.DCGM.Mode) + " " + c.DCGM.RemoteHostengine })},
		"kubernetes-enable-pod-labels": {value: "true", got: get(func(c *config.Config) any { return c.Kubernetes.PodLabels.Expr }), want: ".*"},
		"kubernetes-enable-pod-uid":    {value: "true", got: get(func(c *config.Config) any { return c.Kubernetes.PodAttr.PodUIDLabel }), want: "true"},
		"kubernetes-gpu-id-type":       {value: "device-name", got: get(func(c *config.Config) any { return c.Kubernetes.GPUIDType }), want: "device-name"},
		"kubernetes-pod-label-allowlist-regex": {value: "^team$,app", with: []string{"--kubernetes-enable-pod-labels"},
			got: get(func(c *config.Config) any { return c.Kubernetes.PodLabels.Expr }), want: ".*(?:^team$).*|.*(?:app).*"},
		"devices":                        {value: "g:0,1", got: get(func(c *config.Config) any { return c.Collection.Devices.GPUs.String() }), want: "g:0,1"},
		"no-hostname":                    {value: "true", got: get(func(c *config.Config) any { return len(c.Warnings) }), want: "1"},
		"switch-devices":                 {value: "i:3-4", got: get(func(c *config.Config) any { return c.Collection.Devices.Switches.String() }), want: "i:3,4"},
		"fake-gpus":                      {value: "true", got: get(func(c *config.Config) any { return c.DCGM.AcceptFakeGPUs }), want: "true"},
		"web-config-file":                {value: "/dev/null", got: get(func(c *config.Config) any { return c.Web.WebConfigFile }), want: "/dev/null"},
		"xid-count-window-size":          {value: "60000", want: "1m0s", got: get(func(c *config.Config) any { return c.Collection.XIDWindow })},
		"replace-blanks-in-model-name":   {value: "true", got: get(func(c *config.Config) any { return c.Engine.ReplaceBlanksInModelName }), want: "true"},
		"debug":                          {value: "true", got: get(func(c *config.Config) any { return c.Log.Level }), want: "debug"},
		"clock-events-count-window-size": {value: "120000", want: "2m0s", got: get(func(c *config.Config) any { return c.Collection.ClockEventsWindow })},
		"enable-dcgm-log":                {value: "true", want: "NONE", got: get(func(c *config.Config) any { return c.DCGM.HostEngineLogLevel })},
		"dcgm-log-level":                 {value: "DEBUG", with: []string{"--enable-dcgm-log"}, got: get(func(c *config.Config) any { return c.DCGM.HostEngineLogLevel }), want: "DEBUG"},
		"log-format":                     {value: "json", got: get(func(c *config.Config) any { return c.Log.Format }), want: "json"},
		"pod-resources-kubelet-socket":   {value: "/run/kubelet.sock", got: get(func(c *config.Config) any { return c.Kubernetes.PodAttr.Socket }), want: "/run/kubelet.sock"},
		"hpc-job-mapping-dir":            {value: "/var/run/jobs", got: get(func(c *config.Config) any { return c.HPCJobDir }), want: "/var/run/jobs"},
		"nvidia-resource-names": {value: "nvidia.com/a100,nvidia.com/h100", want: "nvidia.com/a100 nvidia.com/h100",
			got: get(func(c *config.Config) any { return strings.Join(c.Kubernetes.PodAttr.ResourceNames, " ") })},
		"kubernetes-virtual-gpus":       {value: "true", got: get(func(c *config.Config) any { return c.Kubernetes.PodAttr.VirtualGPUs }), want: "true"},
		"dump-enabled":                  {value: "true", got: get(func(c *config.Config) any { return c.Dump.Enabled }), want: "true"},
		"dump-directory":                {value: "/var/tmp/dumps", got: get(func(c *config.Config) any { return c.Dump.Directory }), want: "/var/tmp/dumps"},
		"dump-retention":                {value: "48", got: get(func(c *config.Config) any { return c.Dump.Retention }), want: "48h0m0s"},
		"dump-compression":              {value: "false", got: get(func(c *config.Config) any { return c.Dump.Compress }), want: "false"},
		"kubernetes-enable-dra":         {value: "true", got: get(func(c *config.Config) any { return c.Kubernetes.DRA }), want: "true"},
		"disable-startup-validate":      {value: "true", got: get(func(c *config.Config) any { return c.DisableStartupValidate }), want: "true"},
		"enable-gpu-bind-unbind-watch":  {value: "true", got: get(func(c *config.Config) any { return c.Collection.BindUnbindPoll }), want: "1s"},
		"gpu-bind-unbind-poll-interval": {value: "250ms", with: []string{"--enable-gpu-bind-unbind-watch"}, got: get(func(c *config.Config) any { return c.Collection.BindUnbindPoll }), want: "250ms"},
		"enable-pprof":                  {value: "true", got: get(func(c *config.Config) any { return c.Web.Pprof }), want: "true"},
		"web-systemd-socket":            {value: "true", got: get(func(c *config.Config) any { return c.Web.SystemdSocket }), want: "true"},
	}
}

// TestEveryDCGMExporterFlagAndVariableReachesTheConfiguration gives each flag
// of dcgm-exporter's flags.tsv a value under its name, under each alias and
// through its variable, and checks where the value lands.
func TestEveryDCGMExporterFlagAndVariableReachesTheConfiguration(t *testing.T) {
	cases := flagCases()
	rows := readFlagsTSV(t)
	assert.Len(t, cases, len(rows), "one case per flag of flags.tsv")
	for _, r := range rows {
		fc, ok := cases[r.name]
		if !assert.True(t, ok, "--%s of flags.tsv has no case", r.name) {
			continue
		}
		forms := map[string][]string{}
		arg := func(prefix, name string) []string {
			if r.typ == "Bool" && fc.value == "true" {
				return []string{prefix + name}
			}
			return []string{prefix + name + "=" + fc.value}
		}
		forms["--"+r.name] = arg("--", r.name)
		for _, a := range r.aliases {
			forms["-"+a] = arg("-", a)
		}
		for form, args := range forms {
			t.Run(form, func(t *testing.T) {
				p, err := parseArgs(t, append(args, fc.with...)...)
				require.NoError(t, err)
				assert.Equal(t, fc.want, fc.got(t, p))
			})
		}
		t.Run(r.env, func(t *testing.T) {
			t.Setenv(r.env, fc.value)
			p, err := parseArgs(t, fc.with...)
			require.NoError(t, err)
			assert.Equal(t, fc.want, fc.got(t, p))
		})
	}
}

// defaultDifferences are dcgm-exporter defaults gpuscope does not take, each
// listed with its reason in docs/migrating-from-dcgm-exporter.md.
var defaultDifferences = map[string]string{
	// gpuscope carries its counters inside the binary; an empty value means
	// the built-in etc/default-counters.csv.
	"collectors": "",
	// gpuscope samples every second by default, dcgm-exporter every 30 s.
	"collect-interval": "1s",
	// dcgm-exporter connects to it only when the flag is set (UseRemoteHE:
	// c.IsSet), so an empty default means the same.
	"remote-hostengine-info": "",
}

// TestDCGMExporterDefaults checks that each flag left alone means what it
// means in dcgm-exporter, apart from the differences listed above.
func TestDCGMExporterDefaults(t *testing.T) {
	checkDefaults(t, readFlagsTSV(t), defaultDifferences)
}

// checkDefaults checks that each flag of rows left alone means what it
// means in dcgm-exporter, apart from differences.
func checkDefaults(t *testing.T, rows []flagRow, differences map[string]string) {
	p, err := parseArgs(t)
	require.NoError(t, err)
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			var got string
			for _, f := range p.c.App.Flags {
				if f.Names()[0] == r.name || contains(f.Names(), r.name) {
					got = p.c.String(f.Names()[0])
					if _, ok := f.(*cli.StringSliceFlag); ok {
						got = strings.Join(p.c.StringSlice(f.Names()[0]), ",")
					}
				}
			}
			want := r.def
			if d, ok := differences[r.name]; ok {
				want = d
			}
			switch r.name {
			case "xid-count-window-size", "clock-events-count-window-size":
				assert.Equal(t, mustInterval(t, r.def), mustInterval(t, got), "same window")
				return
			case "gpu-bind-unbind-poll-interval":
				// flags.tsv lists no default; app.go's parseDuration turns
				// an empty value into 1s, and its flag's Value is "1s".
				assert.Equal(t, config.DefaultBindUnbindPoll.String(), got, "the interval the watch takes when turned on")
				return
			}
			if r.typ == "StringSlice" {
				assert.Empty(t, got)
				return
			}
			assert.Equal(t, want, got)
		})
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestBadDCGMExporterFlagsAreOneLineAndExitTwo: an unknown flag or a bad
// value gives one line naming the flag and the accepted forms, exit status 2,
// and no help.
func TestBadDCGMExporterFlagsAreOneLineAndExitTwo(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"--no-such-flag"}, []string{"no-such-flag"}},
		{[]string{"-d", "x:1"}, []string{"--devices", `"x" is not f, g or i`, "g:<id>"}},
		{[]string{"-s", "g:a"}, []string{"--switch-devices", `"a"`}},
		{[]string{"-p", "f:1"}, []string{"--cpu-devices", "no range"}},
		{[]string{"--kubernetes-gpu-id-type", "serial"}, []string{"--kubernetes-gpu-id-type", "uid or device-name"}},
		{[]string{"--dcgm-log-level", "LOUD"}, []string{"--dcgm-log-level", "NONE, FATAL"}},
		{[]string{"-m", "just-a-name"}, []string{"--configmap-data", "namespace:name"}},
		{[]string{"--gpu-bind-unbind-poll-interval", "often"}, []string{"--gpu-bind-unbind-poll-interval", "Go duration"}},
		{[]string{"--dump-retention", "a day"}, []string{"dump-retention"}},
		{[]string{"--kubernetes-enable-pod-labels", "--kubernetes-pod-label-allowlist-regex", "te(am"}, []string{"--kubernetes-pod-label-allowlist-regex", "te(am"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := parseArgs(t, tt.args...)
			require.Error(t, err)
			assert.Equal(t, 2, exitcode.Of(err))
			assert.NotContains(t, err.Error(), "\n", "one line")
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// -m reads the counters through the API server, once, at start; outside a
// pod that fails with the ConfigMap named, as dcgm-exporter's start does.
func TestConfigMapDataOutsideAPod(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	_, err := run(t, "--source", "sim", "-m", "gpu-operator:exporter-metrics")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--configmap-data: ConfigMap gpu-operator/exporter-metrics: KUBERNETES_SERVICE_HOST")
}

func TestComputeInstancesFlag(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  string
		want bool
	}{
		{"off by default, as dcgm-exporter never exports them", nil, "", false},
		{"flag", []string{"--mig-compute-instances"}, "", true},
		{"variable", nil, "true", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env != "" {
				t.Setenv("GPUSCOPE_MIG_COMPUTE_INSTANCES", tt.env)
			}
			p, err := parseArgs(t, tt.args...)
			require.NoError(t, err)
			assert.Equal(t, tt.want, p.cfg.Engine.ComputeInstances)
		})
	}
}

// Values dcgm-exporter accepts start gpuscope too, where gpuscope changes
// or ignores them: -c is an IntFlag of milliseconds there (pkg/cmd/app.go),
// so any integer goes, and gpuscope raises what is below 100ms; the pod-label
// allowlist is read only with pod labels on
// (internal/pkg/transformation/kubernetes.go); --fake-gpus keeps the real
// source (internal/pkg/deviceinfo/device_info.go, initializeGPUInfo).
func TestDCGMExporterValuesGpuscopeChangesStillStart(t *testing.T) {
	tests := []struct {
		args  []string
		check func(t *testing.T, c *config.Config)
	}{
		{[]string{"-c", "10"}, func(t *testing.T, c *config.Config) {
			assert.Equal(t, 100*time.Millisecond, c.Collection.DefaultInterval)
			assert.Equal(t, []config.Warning{{Flag: "--collect-interval", Message: "10ms is below the minimum 100ms; sampling every 100ms"}}, c.Warnings)
		}},
		{[]string{"--kubernetes-pod-label-allowlist-regex", "team"}, func(t *testing.T, c *config.Config) {
			assert.Nil(t, c.Kubernetes.PodLabels)
			require.Len(t, c.Warnings, 1)
		}},
		{[]string{"--fake-gpus", "--source", "dcgm"}, func(t *testing.T, c *config.Config) {
			assert.Equal(t, config.SourceDCGM, c.Source)
			assert.True(t, c.DCGM.AcceptFakeGPUs)
		}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			p, err := parseArgs(t, tt.args...)
			require.NoError(t, err)
			tt.check(t, p.cfg)
		})
	}
}
