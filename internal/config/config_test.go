package config

import (
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/internal/enrich/kube/podattr"
	"github.com/gpuscope/gpuscope/internal/serve/server"
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/sim"
)

// input is the defaults with a host name, so that no test depends on the
// machine's, changed by edit.
func input(edit func(*Input)) Input {
	in := Defaults()
	in.Hostname = "node-1"
	if edit != nil {
		edit(&in)
	}
	return in
}

func TestDefaultsBuildTheLibrariesDefaults(t *testing.T) {
	cfg, err := Build(input(nil))
	require.NoError(t, err)
	assert.Equal(t, SourceAuto, cfg.Source)
	assert.Equal(t, time.Second, cfg.Collection.DefaultInterval)
	assert.Equal(t, engine.DefaultWindow, cfg.Collection.Window)
	assert.Equal(t, engine.DefaultEventWindow, cfg.Collection.XIDWindow)
	assert.Equal(t, engine.DefaultEventWindow, cfg.Collection.ClockEventsWindow)
	assert.Equal(t, podattr.DefaultRefreshInterval, cfg.Kubernetes.PodAttr.RefreshInterval)
	assert.Equal(t, podattr.DefaultSocket, cfg.Kubernetes.PodAttr.Socket)
	assert.Equal(t, server.DefaultMaxConnections, cfg.Web.MaxConnections)
	assert.Equal(t, server.DefaultMaxStreams, cfg.Web.MaxStreams)
	assert.Equal(t, engine.DefaultInsightWindow, cfg.Engine.Insight.Window)
	assert.Equal(t, dcgm.ModeEmbedded, cfg.DCGM.Mode)
	assert.Empty(t, cfg.DCGM.HostEngineLogLevel, "the host engine's log is off")
	assert.Zero(t, cfg.Collection.BindUnbindPoll, "the bind/unbind watch is off")
	assert.True(t, cfg.Collection.Devices.GPUs.Flex && cfg.Collection.Devices.Switches.Flex && cfg.Collection.Devices.CPUs.Flex)
	assert.Nil(t, cfg.Counters.ConfigMap)
	assert.Nil(t, cfg.Kubernetes.PodLabels)
	assert.Equal(t, logrus.InfoLevel, cfg.Log.Level)
	assert.Equal(t, 24*time.Hour, cfg.Dump.Retention)
}

func TestBuild(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*Input)
		check func(*testing.T, *Config)
	}{
		{"milliseconds as dcgm-exporter writes them", func(in *Input) { in.CollectInterval, in.XIDWindow = "30000", "60000" },
			func(t *testing.T, c *Config) {
				assert.Equal(t, 30*time.Second, c.Collection.DefaultInterval)
				assert.Equal(t, time.Minute, c.Collection.XIDWindow)
			}},
		{"per-process series off by default, 64 per GPU when on", func(*Input) {},
			func(t *testing.T, c *Config) {
				assert.Equal(t, engine.ProcessOptions{MaxPerGPU: 64}, c.Engine.Processes)
			}},
		{"per-process series with a cap", func(in *Input) {
			in.Engine.Processes.Enabled, in.Engine.Processes.MaxPerGPU, in.Given = true, 8, map[string]string{FlagProcessesMax: "--processes-max-per-gpu"}
		}, func(t *testing.T, c *Config) {
			assert.Equal(t, engine.ProcessOptions{Enabled: true, MaxPerGPU: 8}, c.Engine.Processes)
		}},
		{"an address alone means remote mode", func(in *Input) { in.DCGMRemote = "10.0.0.2:5555" },
			func(t *testing.T, c *Config) { assert.Equal(t, dcgm.ModeRemote, c.DCGM.Mode) }},
		// dcgm-exporter's --fake-gpus (pkg/cmd/app.go, deviceinfo's
		// initializeGPUInfo) reads the real host engine and keeps GPUs
		// whose identity it cannot read; it does not simulate any.
		{"fake GPUs keep the source and tolerate fake entities", func(in *Input) { in.FakeGPUs = true },
			func(t *testing.T, c *Config) {
				assert.Equal(t, SourceAuto, c.Source)
				assert.True(t, c.DCGM.AcceptFakeGPUs)
				assert.Empty(t, c.Warnings)
			}},
		{"fake GPUs with DCGM", func(in *Input) {
			in.FakeGPUs, in.Source, in.Given = true, "dcgm", map[string]string{FlagSource: "--source"}
		}, func(t *testing.T, c *Config) {
			assert.Equal(t, SourceDCGM, c.Source)
			assert.True(t, c.DCGM.AcceptFakeGPUs)
		}},
		{"fake GPUs on NVML change nothing, and say so", func(in *Input) { in.FakeGPUs, in.Source = true, "nvml" },
			func(t *testing.T, c *Config) {
				assert.Equal(t, SourceNVML, c.Source)
				assert.Equal(t, []Warning{{Flag: "--fake-gpus", Message: "only the DCGM source reads fake GPUs; with --source=nvml it changes nothing (simulated GPUs are --source=sim)"}}, c.Warnings)
			}},
		// dcgm-exporter's -c is an IntFlag of milliseconds: any integer is
		// accepted. Below 100ms gpuscope samples at 100ms, and says so once.
		{"an interval below the minimum is raised to it", func(in *Input) {
			in.CollectInterval, in.Given = "10", map[string]string{FlagCollectInterval: "-c"}
		}, func(t *testing.T, c *Config) {
			assert.Equal(t, 100*time.Millisecond, c.Collection.DefaultInterval)
			assert.Equal(t, []Warning{{Flag: "-c", Message: "10ms is below the minimum 100ms; sampling every 100ms"}}, c.Warnings)
		}},
		// dcgm-exporter counts clock-event samples taken every -c, 30 s by
		// default (pkg/cmd/app.go; expcollector.go).
		{"clock events count in dcgm-exporter's default period", func(in *Input) {},
			func(t *testing.T, c *Config) { assert.Equal(t, 30*time.Second, c.Collection.ClockEventsPeriod) }},
		{"or in -c's when given", func(in *Input) {
			in.CollectInterval, in.Given = "10000", map[string]string{FlagCollectInterval: "-c"}
		}, func(t *testing.T, c *Config) { assert.Equal(t, 10*time.Second, c.Collection.ClockEventsPeriod) }},
		{"a zero interval too", func(in *Input) { in.CollectInterval = "0" },
			func(t *testing.T, c *Config) { assert.Equal(t, 100*time.Millisecond, c.Collection.DefaultInterval) }},
		// dcgm-exporter reads the allowlist only with pod labels on
		// (internal/pkg/transformation/kubernetes.go) and starts without.
		{"an allowlist without its switch is ignored", func(in *Input) { in.PodLabelAllowlist = []string{"team"} },
			func(t *testing.T, c *Config) {
				assert.Nil(t, c.Kubernetes.PodLabels)
				require.Len(t, c.Warnings, 1)
				assert.Equal(t, "--"+FlagPodLabelAllowlist, c.Warnings[0].Flag)
				assert.Contains(t, c.Warnings[0].Message, "has no effect without --kubernetes-enable-pod-labels")
			}},
		{"node_exporter's switch for the exporter's own families", func(in *Input) { in.DisableExporterMetrics = true },
			func(t *testing.T, c *Config) { assert.True(t, c.DisableExporterMetrics) }},
		{"debug without a log level", func(in *Input) { in.Debug = true },
			func(t *testing.T, c *Config) { assert.Equal(t, logrus.DebugLevel, c.Log.Level) }},
		{"a log level given wins over debug", func(in *Input) {
			in.Debug, in.LogLevel, in.Given = true, "warn", map[string]string{FlagLogLevel: "--log-level"}
		}, func(t *testing.T, c *Config) { assert.Equal(t, logrus.WarnLevel, c.Log.Level) }},
		{"the bind/unbind watch takes dcgm-exporter's interval", func(in *Input) { in.BindUnbindWatch = true },
			func(t *testing.T, c *Config) { assert.Equal(t, DefaultBindUnbindPoll, c.Collection.BindUnbindPoll) }},
		{"an interval alone turns no watch on", func(in *Input) { in.BindUnbindPoll = "250ms" },
			func(t *testing.T, c *Config) { assert.Zero(t, c.Collection.BindUnbindPoll) }},
		{"the host engine log at its level", func(in *Input) { in.EnableDCGMLog, in.DCGMLogLevel = true, "DEBUG" },
			func(t *testing.T, c *Config) { assert.Equal(t, "DEBUG", c.DCGM.HostEngineLogLevel) }},
		{"dcgm-exporter's pod labels, all of them", func(in *Input) { in.EnablePodLabels = true },
			func(t *testing.T, c *Config) {
				require.NotNil(t, c.Kubernetes.PodLabels)
				assert.Equal(t, ".*", c.Kubernetes.PodLabels.Expr)
				assert.Equal(t, "--"+FlagEnablePodLabels, c.Kubernetes.PodLabels.Flag)
			}},
		{"dcgm-exporter's allowlist matches anywhere in the key", func(in *Input) {
			in.EnablePodLabels, in.PodLabelAllowlist = true, []string{"^team$", "app"}
		}, func(t *testing.T, c *Config) {
			require.NotNil(t, c.Kubernetes.PodLabels)
			assert.True(t, c.Kubernetes.PodLabels.Allowlist.MatchString("my-app-name"))
			assert.False(t, c.Kubernetes.PodLabels.Allowlist.MatchString("tier"))
		}},
		{"gpuscope's pod labels match the whole key", func(in *Input) { in.Kubernetes, in.PodLabels = true, "team|app" },
			func(t *testing.T, c *Config) {
				require.NotNil(t, c.Kubernetes.PodLabels)
				assert.True(t, c.Kubernetes.PodLabels.Allowlist.MatchString("app"))
				assert.False(t, c.Kubernetes.PodLabels.Allowlist.MatchString("my-app"))
			}},
		{"a ConfigMap", func(in *Input) { in.ConfigMapData = "gpu-operator:metrics" },
			func(t *testing.T, c *Config) {
				require.NotNil(t, c.Counters.ConfigMap)
				assert.Equal(t, "gpu-operator/metrics", c.Counters.ConfigMap.String())
				assert.Equal(t, "metrics", c.Counters.ConfigMap.Key)
			}},
		{"sim workloads per GPU", func(in *Input) { in.Source, in.SimGPUs, in.SimWorkload = "sim", 2, "compute,idle" },
			func(t *testing.T, c *Config) { assert.Len(t, c.Sim.Workloads, 2) }},
		{"MIG instances choose their own workload", func(in *Input) { in.Source, in.SimMIG = "sim", "all" },
			func(t *testing.T, c *Config) { assert.Nil(t, c.Sim.Workloads) }},
		{"a workload per MIG instance when asked", func(in *Input) {
			in.Source, in.SimGPUs, in.SimMIG, in.SimWorkload = "sim", 2, "3g.40gb,4g.40gb", "mixed"
			in.Given = map[string]string{FlagSimWorkload: "--sim-workload"}
		}, func(t *testing.T, c *Config) {
			assert.Equal(t, []sim.Workload{sim.ComputeBound, sim.MemoryBound, sim.InputBound, sim.IdleAllocated}, c.Sim.Workloads)
		}},
		{"a scenario lays out the node and stops random events", func(in *Input) { in.Source, in.SimScenario = "sim", "mig-idle" },
			func(t *testing.T, c *Config) {
				assert.Equal(t, "mig-idle", c.Sim.Scenario)
				assert.Equal(t, 2, c.Sim.GPUs, "the scenario's GPUs, for the simulated pods")
				assert.Nil(t, c.Sim.Workloads)
				assert.Zero(t, c.Sim.EventRate)
				assert.Equal(t, SimClockReal, c.Sim.Clock)
			}},
		{"random events in a scenario when asked for", func(in *Input) {
			in.Source, in.SimScenario, in.SimEventRate = "sim", "leak", 2
			in.Given = map[string]string{FlagSimEventRate: "--sim-event-rate"}
		}, func(t *testing.T, c *Config) { assert.Equal(t, 2.0, c.Sim.EventRate) }},
		{"a manual clock", func(in *Input) { in.Source, in.SimClock = "sim", "manual" },
			func(t *testing.T, c *Config) { assert.Equal(t, SimClockManual, c.Sim.Clock) }},
		{"some GPUs in MIG mode", func(in *Input) { in.Source, in.SimMIG, in.SimMIGGPUs = "sim", "all", "1, 3" },
			func(t *testing.T, c *Config) { assert.Equal(t, []int{1, 3}, c.Sim.MIGGPUs) }},
		{"the host name given is the node name", func(in *Input) { in.Hostname = "gpu-node-7" },
			func(t *testing.T, c *Config) {
				assert.Equal(t, "gpu-node-7", c.Labels.Hostname)
				assert.True(t, c.Labels.HostnameGiven)
			}},
		// dcgm-exporter's GetHostname (internal/pkg/hostname/hostname.go):
		// with -r and without Kubernetes, the remote host engine's host.
		{"a remote host engine names the host", func(in *Input) { in.Hostname, in.DCGMRemote = "", "gpu-node-9.lab:5555" },
			func(t *testing.T, c *Config) { assert.Equal(t, "gpu-node-9.lab", c.Labels.Hostname) }},
		{"a remote host engine without a port", func(in *Input) { in.Hostname, in.DCGMRemote = "", "gpu-node-9" },
			func(t *testing.T, c *Config) { assert.Equal(t, "gpu-node-9", c.Labels.Hostname) }},
		{"in Kubernetes the local node, not the remote host engine", func(in *Input) {
			in.Hostname, in.DCGMRemote, in.Kubernetes = "", "10.0.0.2:5555", true
		}, func(t *testing.T, c *Config) { assert.NotEqual(t, "10.0.0.2", c.Labels.Hostname) }},
		{"a host name given wins", func(in *Input) { in.Hostname, in.DCGMRemote = "node-3", "10.0.0.2:5555" },
			func(t *testing.T, c *Config) { assert.Equal(t, "node-3", c.Labels.Hostname) }},
		// dcgm-exporter reads -n and has used it nowhere since 4.0.0.
		{"-n is ignored, as dcgm-exporter ignores it", func(in *Input) {
			in.NoHostname, in.Given = true, map[string]string{FlagNoHostname: "--no-hostname"}
		}, func(t *testing.T, c *Config) {
			assert.NotEmpty(t, c.Labels.Hostname)
			assert.Equal(t, []Warning{{Flag: "--no-hostname", Message: "is ignored, as dcgm-exporter 4.x ignores it: series keep the host label"}}, c.Warnings)
		}},
		{"without one, the machine's", func(in *Input) { in.Hostname = "" },
			func(t *testing.T, c *Config) {
				assert.NotEmpty(t, c.Labels.Hostname)
				assert.False(t, c.Labels.HostnameGiven)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Build(input(tt.edit))
			require.NoError(t, err)
			tt.check(t, cfg)
		})
	}
}

// TestBuildNamesTheFlagOfEachProblem: each bad value is reported with the
// flag it came through, as the user gave it when Given says so.
func TestBuildNamesTheFlagOfEachProblem(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Input)
		want string
	}{
		{"interval that is no duration", func(in *Input) { in.CollectInterval = "soon" }, `--collect-interval "soon" is not a duration`},
		{"zero interval", func(in *Input) { in.XIDWindow = "0" }, `--xid-count-window-size "0": must be positive`},
		{"window", func(in *Input) { in.Window = 10 * time.Millisecond }, "--window 10ms: the window must be at least 100ms"},
		{"poll", func(in *Input) { in.ReloadPoll = time.Nanosecond }, "--collectors-poll-interval 1ns: below the minimum 100ms (0 turns polling off)"},
		{"source", func(in *Input) { in.Source = "rocm" }, `--source "rocm": use auto, dcgm, nvml or sim`},
		{"log format", func(in *Input) { in.LogFormat = "xml" }, `--log-format "xml": use text or json`},
		{"log level", func(in *Input) { in.LogLevel = "loud" }, `--log-level "loud": use debug, info, warn or error`},
		{"host label", func(in *Input) { in.Engine.HostnameLabel = "host" }, `--hostname-label "host": want Hostname or hostname`},
		{"connections", func(in *Input) { in.Web.MaxConnections = 0 }, "--web-max-connections 0: at least 1"},
		{"streams", func(in *Input) { in.Web.MaxStreams = -3 }, "--api-max-streams -3: allow at least 1 stream"},
		{"insight window", func(in *Input) { in.Engine.Insight.Enabled, in.Engine.Insight.Window = true, time.Second },
			"--insight-window 1s: the insight window must be at least 2s (20 samples at 100ms)"},
		{"no process per GPU", func(in *Input) {
			in.Engine.Processes.Enabled, in.Engine.Processes.MaxPerGPU, in.Given = true, 0, map[string]string{FlagProcessesMax: "--processes-max-per-gpu"}
		}, "--processes-max-per-gpu 0: keep at least 1 process per GPU (turn the per-process series off with --processes=false)"},
		{"a cap without the per-process series", func(in *Input) {
			in.Engine.Processes.MaxPerGPU, in.Given = 8, map[string]string{FlagProcessesMax: "--processes-max-per-gpu"}
		}, "--processes-max-per-gpu only applies with --processes (the per-process series are off)"},
		{"dcgm mode", func(in *Input) { in.DCGMMode = "bogus" }, `--dcgm-mode "bogus": want one of embedded, remote, start`},
		{"remote without an address", func(in *Input) { in.DCGMMode = "remote" },
			"--dcgm-mode=remote needs --dcgm-remote-hostengine (host:port or a unix socket path)"},
		{"address in embedded mode", func(in *Input) {
			in.DCGMRemote, in.Given = "h:5555", map[string]string{FlagDCGMMode: "--dcgm-mode", FlagDCGMRemote: "--remote-hostengine-info"}
		}, `--remote-hostengine-info "h:5555" is only used with --dcgm-mode=remote, not embedded`},
		{"bad address, under dcgm-exporter's name", func(in *Input) {
			in.DCGMRemote, in.Given = "h:1:2", map[string]string{FlagDCGMRemote: "--remote-hostengine-info"}
		}, `--remote-hostengine-info "h:1:2": host engine address "h:1:2"`},
		{"devices", func(in *Input) { in.Devices = "x:1" }, `--devices "x:1": "x" is not f, g or i`},
		{"configmap", func(in *Input) { in.ConfigMapData = "just-a-name" }, `--configmap-data "just-a-name": use namespace:name, or none`},
		{"gpu id type", func(in *Input) { in.GPUIDType = "serial" }, `--kubernetes-gpu-id-type "serial": use uid or device-name`},
		{"dcgm log level", func(in *Input) { in.DCGMLogLevel = "LOUD" }, `--dcgm-log-level "LOUD": use one of NONE, FATAL`},
		{"bind/unbind poll", func(in *Input) { in.BindUnbindPoll = "often" }, `--gpu-bind-unbind-poll-interval "often": use a positive Go duration`},
		{"bad allowlist", func(in *Input) { in.EnablePodLabels, in.PodLabelAllowlist = true, []string{"te(am"} },
			`--kubernetes-pod-label-allowlist-regex "te(am": not a regular expression`},
		{"two ways to choose pod labels", func(in *Input) {
			in.Kubernetes, in.EnablePodLabels, in.PodLabels = true, true, "team"
			in.Given = map[string]string{FlagPodLabels: "--kubernetes-pod-labels"}
		}, "--kubernetes-enable-pod-labels and --kubernetes-pod-labels both choose pod labels; give one"},
		{"pod labels without --kubernetes", func(in *Input) { in.PodLabels = "team" },
			"--kubernetes-pod-labels needs --kubernetes: pod labels go on the series"},
		{"bad pod-label expression", func(in *Input) { in.Kubernetes, in.PodLabels = true, "team(" },
			`--kubernetes-pod-labels: allowlist "team(" is not a valid regular expression`},
		{"sim flag on another source", func(in *Input) {
			in.Source, in.SimGPUs, in.Given = "nvml", 2, map[string]string{FlagSimGPUs: "--sim-gpus"}
		}, "--sim-gpus only applies to --source=sim (the source is nvml)"},
		{"simulated pods and the kubelet's", func(in *Input) { in.Source, in.SimPods, in.Kubernetes = "sim", true, true },
			"--sim-pods and --kubernetes both label GPUs with pods (simulated, or the kubelet's); give one"},
		{"sim workloads", func(in *Input) { in.Source, in.SimWorkload = "sim", "gaming" },
			`--sim-workload: workloads "gaming": unknown kind "gaming"`},
		{"a MIG instance cannot be communication-bound", func(in *Input) {
			in.Source, in.SimMIG, in.SimWorkload = "sim", "2x3g.40gb", "communication"
			in.Given = map[string]string{FlagSimWorkload: "--sim-workload"}
		}, `--sim-workload: workloads "communication": communication does not run on a MIG instance`},
		{"unknown scenario", func(in *Input) { in.Source, in.SimScenario = "sim", "meltdown" },
			`--sim-scenario: unknown scenario "meltdown"; use one of idle-pod, zombie, leak`},
		{"a node a scenario across nodes does not have", func(in *Input) { in.Source, in.SimScenario = "sim", "multinode-straggler/4" },
			`--sim-scenario: scenario "multinode-straggler/4": node "4": multinode-straggler spans 4 node(s), numbered 0 to 3`},
		{"scenario and the flags it sets", func(in *Input) {
			in.Source, in.SimScenario, in.Given = "sim", "zombie", map[string]string{FlagSimPods: "--sim-pods"}
		}, "--sim-pods with --sim-scenario zombie: the scenario lays out the node (GPUs, model, MIG, workloads, pods and jobs) itself; leave --sim-pods out"},
		{"scenario on another source", func(in *Input) {
			in.Source, in.SimScenario, in.Given = "dcgm", "zombie", map[string]string{FlagSimScenario: "--sim-scenario"}
		}, "--sim-scenario only applies to --source=sim (the source is dcgm)"},
		{"sim clock", func(in *Input) { in.Source, in.SimClock = "sim", "fast" }, `--sim-clock "fast": use real or manual`},
		{"MIG GPUs off the node", func(in *Input) { in.Source, in.SimMIG, in.SimMIGGPUs = "sim", "all", "1,8" },
			`--sim-mig-gpus "1,8": "8" is not a GPU of the node (0 to 7)`},
		{"MIG GPU twice", func(in *Input) { in.Source, in.SimMIG, in.SimMIGGPUs = "sim", "all", "1, 1" },
			`--sim-mig-gpus "1, 1": GPU 1 is given twice`},
		{"MIG GPUs without a layout", func(in *Input) { in.Source, in.SimMIGGPUs = "sim", "1" },
			`--sim-mig-gpus "1" needs --sim-mig, the layout of the GPUs in MIG mode`},
		{"a workload per MIG instance on a node partly in MIG mode", func(in *Input) {
			in.Source, in.SimMIG, in.SimMIGGPUs, in.SimWorkload = "sim", "all", "1", "compute"
			in.Given = map[string]string{FlagSimWorkload: "--sim-workload", FlagSimMIGGPUs: "--sim-mig-gpus"}
		}, "--sim-workload: a workload per MIG instance needs every GPU in MIG mode; leave out --sim-mig-gpus or --sim-workload"},
		{"resource name, under dcgm-exporter's name", func(in *Input) {
			in.Kubernetes, in.PodAttr.ResourceNames = true, []string{"nvidia.com/*gpu"}
			in.Given = map[string]string{FlagResourceNames: "--nvidia-resource-names"}
		}, `--nvidia-resource-names: "nvidia.com/*gpu" is not a resource name`},
		{"refresh", func(in *Input) { in.Kubernetes, in.PodAttr.RefreshInterval = true, time.Millisecond },
			"--kubernetes-refresh-interval 1ms: below the minimum 100ms"},
		{"grace", func(in *Input) { in.Kubernetes, in.PodAttr.LabelGrace = true, -time.Second },
			"--kubernetes-label-grace -1s: must not be negative"},
		{"dump retention", func(in *Input) { in.DumpEnabled, in.DumpRetention = true, -1 }, "--dump-retention -1: use 0 or more hours"},
		{"web config", func(in *Input) { in.Web.WebConfigFile = "/nonexistent/web.yml" }, "--web-config-file /nonexistent/web.yml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(input(tt.edit))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, err.Error(), "\n", "one problem, one line")
		})
	}
}

// TestBuildReportsEveryProblemAtOnce: a command line with several mistakes
// gets them all in one error, one per line, each value reported once.
func TestBuildReportsEveryProblemAtOnce(t *testing.T) {
	_, err := Build(input(func(in *Input) {
		in.CollectInterval = "soon"
		in.LogFormat = "xml"
		in.Source = "rocm"
		in.Devices = "x:1"
		in.Web.MaxConnections = 0
		in.DCGMMode = "bogus"
		in.Engine.Insight.Enabled, in.Engine.Insight.Window = true, time.Second
	}))
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	want := []string{"--collect-interval", "--log-format", "--source", "--devices", "--web-max-connections", "--dcgm-mode", "--insight-window"}
	assert.Len(t, lines, len(want), err.Error())
	for _, flag := range want {
		n := 0
		for _, l := range lines {
			if strings.HasPrefix(l, flag+" ") {
				n++
			}
		}
		assert.Equal(t, 1, n, "%s reported once in:\n%s", flag, err)
	}
}

// TestValidateAConfigBuiltInCode: Validate checks a Config that no command
// line made, naming the flags by their first names.
func TestValidateAConfigBuiltInCode(t *testing.T) {
	cfg, err := Build(input(nil))
	require.NoError(t, err)
	require.NoError(t, cfg.Validate())

	bad := *cfg
	bad.Collection.DefaultInterval = 10 * time.Millisecond
	bad.Web.MaxStreams = 0
	bad.DCGM = DCGM{Mode: dcgm.ModeRemote}
	err = bad.Validate()
	require.Error(t, err)
	assert.Equal(t, "--collect-interval 10ms: below the minimum 100ms\n"+
		"--api-max-streams 0: allow at least 1 stream\n"+
		"--dcgm-mode=remote needs --dcgm-remote-hostengine (host:port or a unix socket path)", err.Error())

	var literal Config
	literal.Collection.DefaultInterval = time.Second
	literal.Collection.Window = time.Second
	literal.Web = server.Options{MaxConnections: 1, MaxStreams: 1, MaxRequests: 1, MaxResponseBytes: MinAPIMaxBytes}
	literal.Engine.HostnameLabel = "Hostname"
	literal.DCGM.Mode = dcgm.ModeEmbedded
	literal.Source = SourceSim
	assert.NoError(t, literal.Validate(), "a Config literal needs no command line")
}
