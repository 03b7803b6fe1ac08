package main

import (
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/cmd/internal/exitcode"
	"github.com/gpuscope/gpuscope/internal/config"
	"github.com/gpuscope/gpuscope/source"
)

// newestFlagsFile is dcgm-exporter's flag list after 4.8.2; its header
// names the commits it was read from.
var newestFlagsFile = filepath.Join("testdata", "dcgm-exporter-flags-newest.tsv")

// exporterConfigV2 is a version 2 YAML configuration as dcgm-exporter's
// chart documents it (deployment/README.md).
var exporterConfigV2 = filepath.Join("testdata", "dcgm-exporter-config-v2.yaml")

// newerFlagCases are the flags dcgm-exporter added after 4.8.2 that
// gpuscope accepts, with where each value lands.
func newerFlagCases() map[string]flagCase {
	get := func(f func(*config.Config) any) func(*testing.T, parsed) string {
		return func(_ *testing.T, p parsed) string { return fmt.Sprint(f(p.cfg)) }
	}
	return map[string]flagCase{
		"config-file": {value: exporterConfigV2, want: exporterConfigV2 + " /etc/dcgm-exporter/dcp-metrics-included.csv 5s",
			got: get(func(c *config.Config) any {
				return c.ConfigFile + " " + c.Counters.File + " " + c.Collection.DefaultInterval.String()
			})},
		"web-read-timeout":       {value: "15s", got: get(func(c *config.Config) any { return c.Web.ReadTimeout }), want: "15s"},
		"web-write-timeout":      {value: "45s", got: get(func(c *config.Config) any { return c.Web.WriteTimeout }), want: "45s"},
		"max-concurrent-scrapes": {value: "4", got: get(func(c *config.Config) any { return c.Web.MaxConcurrentScrapes }), want: "4"},
		// gpuscope serves the Go and process families unless told not to;
		// the flag overrides a --web-disable-exporter-metrics variable.
		"enable-exporter-metrics": {value: "true", with: []string{"--web-disable-exporter-metrics=false"},
			got: get(func(c *config.Config) any { return !c.DisableExporterMetrics }), want: "true"},
		"health-require-gpus": {value: "true", got: get(func(c *config.Config) any { return c.HealthRequireGPUs }), want: "true"},
		// Accepted and checked; gpuscope keeps its own rings, and says so.
		"watch-max-keep-age": {value: "5m", want: "5m0s [--watch-max-keep-age]",
			got: get(func(c *config.Config) any { return fmt.Sprint(c.Collection.WatchMaxKeepAge, " ", warnedFlags(c)) })},
		"watch-max-keep-samples": {value: "20", want: "20 [--watch-max-keep-samples]",
			got: get(func(c *config.Config) any { return fmt.Sprint(c.Collection.WatchMaxKeepSamples, " ", warnedFlags(c)) })},
	}
}

func warnedFlags(c *config.Config) []string {
	var out []string
	for _, w := range c.Warnings {
		out = append(out, w.Flag)
	}
	return out
}

// refusedNewerFlags are the flags after 4.8.2 that gpuscope refuses, with
// what the message must say.
var refusedNewerFlags = map[string]struct {
	value string
	want  []string
}{
	"container-labels":         {"true", []string{"container-labels", "not supported", "container runtimes", "--kubernetes"}},
	"container-runtime-socket": {"/run/containerd/containerd.sock", []string{"container-runtime-socket", "not supported"}},
}

// TestNewestDCGMExporterFlagsAreAcceptedOrRefusedByName gives every flag of
// the newest app.go a value, under its name and through its variable: each
// lands in the configuration, or is refused with a one-line message naming
// it and why (exit status 2).
func TestNewestDCGMExporterFlagsAreAcceptedOrRefusedByName(t *testing.T) {
	cases := flagCases()
	maps.Copy(cases, newerFlagCases())
	rows := readFlagsFile(t, newestFlagsFile)
	assert.Len(t, rows, len(cases)+len(refusedNewerFlags), "one case per flag of %s", newestFlagsFile)
	for _, r := range rows {
		arg := func(v string) []string {
			if r.typ == "Bool" && v == "true" {
				return []string{"--" + r.name}
			}
			return []string{"--" + r.name + "=" + v}
		}
		if ref, ok := refusedNewerFlags[r.name]; ok {
			for form, set := range map[string]func(t *testing.T) []string{
				"--" + r.name: func(*testing.T) []string { return arg(ref.value) },
				r.env:         func(t *testing.T) []string { t.Setenv(r.env, ref.value); return nil },
			} {
				t.Run(form, func(t *testing.T) {
					_, err := parseArgs(t, set(t)...)
					require.Error(t, err)
					assert.Equal(t, 2, exitcode.Of(err))
					assert.NotContains(t, err.Error(), "\n", "one line")
					for _, w := range ref.want {
						assert.Contains(t, err.Error(), w)
					}
				})
			}
			continue
		}
		fc, ok := cases[r.name]
		if !assert.True(t, ok, "--%s of %s has no case", r.name, newestFlagsFile) {
			continue
		}
		t.Run("--"+r.name, func(t *testing.T) {
			p, err := parseArgs(t, append(arg(fc.value), fc.with...)...)
			require.NoError(t, err)
			assert.Equal(t, fc.want, fc.got(t, p))
		})
		t.Run(r.env, func(t *testing.T) {
			t.Setenv(r.env, fc.value)
			p, err := parseArgs(t, fc.with...)
			require.NoError(t, err)
			assert.Equal(t, fc.want, fc.got(t, p))
		})
	}
}

// TestNewestDCGMExporterDefaults: the newer flags left alone mean what
// they mean in dcgm-exporter, apart from the differences below (each in
// docs/upgrading.md).
func TestNewestDCGMExporterDefaults(t *testing.T) {
	diffs := maps.Clone(defaultDifferences)
	// 0 keeps gpuscope's own server limits: headers read within 10s, a
	// response written within 1m, and no scrape limit beyond
	// --web-max-connections, as scrapes share one rendering.
	diffs["web-read-timeout"] = "0s"
	diffs["web-write-timeout"] = "0s"
	diffs["max-concurrent-scrapes"] = "0"
	checkDefaults(t, readFlagsFile(t, newestFlagsFile), diffs)
}

// TestNewerDCGMExporterValues: the forms of -r, -d, -s and -p that
// dcgm-exporter reads after 4.8.2 (pkg/cmd/app.go at 0048f87c: the -r
// usage's DCGM URIs; the later copy's parseDeviceOptions: combined
// selectors), and the refusals.
func TestNewerDCGMExporterValues(t *testing.T) {
	get := func(f func(*config.Config) string) func(*config.Config) string { return f }
	remote := get(func(c *config.Config) string { return string(c.DCGM.Mode) + " " + c.DCGM.RemoteHostengine })
	devices := get(func(c *config.Config) string {
		d := c.Collection.Devices
		return d.GPUs.String() + " " + d.Switches.String() + " " + d.CPUs.String()
	})
	tests := []struct {
		args    []string
		got     func(*config.Config) string
		want    string
		wantErr []string
	}{
		{args: []string{"-r", "tcp://10.0.0.2:5555"}, got: remote, want: "remote 10.0.0.2:5555"},
		// Outside Kubernetes the host label is the remote engine's host
		// (internal/pkg/hostname/hostname.go), the URI's scheme left out.
		{args: []string{"-r", "tcp://10.0.0.2:5555"}, got: func(c *config.Config) string { return c.Labels.Hostname }, want: "10.0.0.2"},
		{args: []string{"-r", "unix:///run/nvidia/hostengine.sock"}, got: remote, want: "remote unix:///run/nvidia/hostengine.sock"},
		{args: []string{"-r", "[::1]:5555"}, got: remote, want: "remote [::1]:5555"},
		{args: []string{"-r", "vsock://3:5555"}, wantErr: []string{"--dcgm-remote-hostengine", "vsock://3:5555", "VSOCK", "not supported", "TCP and unix sockets"}},
		{args: []string{"-r", "ftp://host:1"}, wantErr: []string{"--dcgm-remote-hostengine", "unknown scheme"}},
		{args: []string{"-d", "g:0+i:1-2", "-s", "i:3+g:1", "-p", "g+i"}, got: devices, want: "g:0+i:1,2 g:1+i:3 g+i"},
		{args: []string{"-d", "f+g"}, wantErr: []string{"--devices", "cannot be combined"}},
		{args: []string{"-d", "g:0+g:1"}, wantErr: []string{"--devices", "given twice"}},
		{args: []string{"-d", "g+"}, wantErr: []string{"--devices", `"g+"`}},
		{args: []string{"--enable-exporter-metrics", "--web-disable-exporter-metrics"}, wantErr: []string{"--enable-exporter-metrics", "--web-disable-exporter-metrics", "contradict"}},
		{args: []string{"--max-concurrent-scrapes", "-1"}, wantErr: []string{"--max-concurrent-scrapes", "-1"}},
		{args: []string{"--watch-max-keep-age", "-1s"}, wantErr: []string{"--watch-max-keep-age", "-1s"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			p, err := parseArgs(t, tt.args...)
			if tt.wantErr != nil {
				require.Error(t, err)
				assert.Equal(t, 2, exitcode.Of(err))
				assert.NotContains(t, err.Error(), "\n", "one line")
				for _, w := range tt.wantErr {
					assert.Contains(t, err.Error(), w)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, tt.got(p.cfg))
		})
	}
}

type entityList []*source.Entity

func (l entityList) Entities() []*source.Entity { return l }

func TestGPUHealthCountsGPUsAndMIGInstances(t *testing.T) {
	assert.Nil(t, gpuHealth(false, entityList{}), "no check without --health-require-gpus")
	tests := []struct {
		name string
		list entityList
		ok   bool
	}{
		{"nothing", nil, false},
		{"a switch only", entityList{{Kind: source.NvSwitch}}, false},
		{"a GPU", entityList{{Kind: source.GPU}}, true},
		{"a MIG instance", entityList{{Kind: source.GPUInstance}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, why := gpuHealth(true, tt.list)()
			assert.Equal(t, tt.ok, ok)
			if !ok {
				assert.Contains(t, why, "--health-require-gpus")
			}
		})
	}
}
