package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/sim"
)

// Options are the serve flags, each bound to its field of in, in the order
// --help lists them within a category. Where dcgm-exporter has a flag of
// the same meaning, its name, short alias and variable are accepted too
// (README: "Coming from dcgm-exporter").
func Options(in *Input) []Option {
	var out []Option
	for _, group := range [][]Option{collectionOptions(in), labelOptions(in), sourceOptions(in), simOptions(in),
		kubernetesOptions(in), podLabelOptions(in), webOptions(in), loggingOptions(in), exporter48Options(in)} {
		out = append(out, group...)
	}
	for i := range out {
		out[i].Deprecated = deprecatedNames[out[i].Name]
	}
	return out
}

func collectionOptions(in *Input) []Option {
	deviceUsage := "which %s to export, in dcgm-exporter's syntax: f (flexible: %s), g (every %s), " +
		"g:<id>[,<id>|<from>-<to>...] (these %s), i (every %s) or i:<id>,... (these %s)"
	return []Option{
		{Name: FlagCollectors, Aliases: []string{"f"}, Category: CatCollection, Compat: []string{"DCGM_EXPORTER_COLLECTORS"},
			Value: String(&in.Collectors, ""),
			Usage: "the counters file (named --collectors after dcgm-exporter's flag): the CSV that selects the fields (dcgm-exporter's format, plus optional watch-interval and window-statistics columns); empty means the built-in etc/default-counters.csv"},
		{Name: FlagConfigMapData, Aliases: []string{"m"}, Category: CatCollection, Compat: []string{"DCGM_EXPORTER_CONFIGMAP_DATA"},
			Value: String(&in.ConfigMapData, UndefinedConfigMap),
			Usage: "read the counters once, at start, from the 'metrics' key of this ConfigMap, as namespace:name, through the API server (needs get on configmaps); none: use --collectors"},
		{Name: FlagReloadPoll, Category: CatCollection,
			Value: Duration(&in.ReloadPoll, 5*time.Second),
			Usage: "how often the counters file is checked for changes (0 turns it off; SIGHUP always reloads)",
			Check: func(c *Config) error {
				poll := c.Counters.ReloadPoll
				return problem(poll < 0 || (poll > 0 && poll < MinReloadPoll), "%s: below the minimum %s (0 turns polling off)", poll, MinReloadPoll)
			}},
		{Name: FlagCollectInterval, Aliases: []string{"c"}, Category: CatCollection, Compat: []string{"DCGM_EXPORTER_INTERVAL"},
			Value: String(&in.CollectInterval, "1s"),
			Usage: "watch interval of fields whose CSV line gives none: a Go duration (1s) or plain milliseconds (30000), at least 100ms"},
		{Name: FlagWindow, Category: CatCollection,
			Value: Duration(&in.Window, engine.DefaultWindow),
			Usage: "span of the sliding window over which the CSV's window statistics are computed",
			Check: func(c *Config) error {
				return problem(c.Collection.Window < counters.MinInterval, "%s: the window must be at least %s", c.Collection.Window, counters.MinInterval)
			}},
		{Name: FlagXIDWindow, Aliases: []string{"x"}, Category: CatCollection, Compat: []string{"DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE"},
			Value: String(&in.XIDWindow, engine.DefaultEventWindow.String()),
			Usage: "window of DCGM_EXP_XID_ERRORS_COUNT: a Go duration or plain milliseconds"},
		{Name: FlagClockWindow, Category: CatCollection, Compat: []string{"DCGM_EXPORTER_CLOCK_EVENTS_COUNT_WINDOW_SIZE"},
			Value: String(&in.ClockEventsWindow, engine.DefaultEventWindow.String()),
			Usage: "window of DCGM_EXP_CLOCK_EVENTS_COUNT: a Go duration or plain milliseconds"},
		{Name: FlagDevices, Aliases: []string{"d"}, Category: CatCollection, Compat: []string{"DCGM_EXPORTER_DEVICES_STR"},
			Value: String(&in.Devices, "f"),
			Usage: fmt.Sprintf(deviceUsage, "GPUs and MIG instances", "GPUs without MIG and the GPU instances of MIG GPUs", "GPU",
				"GPU indexes", "MIG GPU instance", "GPU instances, numbered across the node from 0")},
		{Name: FlagSwitchDevices, Aliases: []string{"s"}, Category: CatCollection, Compat: []string{"DCGM_EXPORTER_OTHER_DEVICES_STR"},
			Value: String(&in.SwitchDevices, "f"),
			Usage: fmt.Sprintf(deviceUsage, "NvSwitches and their links", "every switch and link", "NvSwitch, without links", "switch IDs",
				"link of a watched switch", "link indexes")},
		{Name: FlagCPUDevices, Aliases: []string{"p"}, Category: CatCollection, Compat: []string{"DCGM_EXPORTER_CPU_DEVICES_STR"},
			Value: String(&in.CPUDevices, "f"),
			Usage: fmt.Sprintf(deviceUsage, "CPUs and cores", "every CPU and core", "CPU", "CPU IDs", "core", "core IDs")},
		{Name: FlagComputeInstances, Category: CatCollection,
			Value: Bool(&in.Engine.ComputeInstances, false),
			Usage: "also export MIG compute instances (GPU_CI_ID label), with -d f; dcgm-exporter never does"},
		{Name: FlagInsight, Category: CatCollection,
			Value: Bool(&in.Engine.Insight.Enabled, false),
			Usage: "export workload insight per GPU (step period, stall ratio, bound classes; docs/insight.md), computed in the background from 100 ms profiling samples"},
		{Name: FlagNativeHistograms, Category: CatCollection,
			Value: Bool(&in.NativeHistograms, true),
			Usage: "serve a native histogram of every field with window statistics (<FIELD>_distribution) to scrapers that negotiate protobuf, as Prometheus does with native histograms on; --native-histograms=false turns them off, as nohist does for one line of the counters file"},
		{Name: FlagProcesses, Category: CatCollection,
			Value: Bool(&in.Engine.Processes.Enabled, false),
			Usage: "export a series per GPU process (PID, name, memory, SM share, its pod when known), and nvidia_gpu_exporter's nvidia_smi_compute_app* with its counters file; costs series per process (docs/metrics.md)"},
		{Name: FlagProcessesMax, Category: CatCollection,
			Value: Int(&in.Engine.Processes.MaxPerGPU, engine.DefaultMaxProcessesPerGPU),
			Usage: "with --processes, the most processes exported per GPU (its MIG instances' together); the others are counted in gpuscope_processes_dropped_total",
			Check: func(c *Config) error {
				p := c.Engine.Processes
				if err := problem(p.MaxPerGPU < 0 || (c.Given(FlagProcessesMax) && p.MaxPerGPU < 1),
					"%d: keep at least 1 process per GPU (turn the per-process series off with %s=false)", p.MaxPerGPU, c.Flag(FlagProcesses)); err != nil {
					return err
				}
				return problem(c.Given(FlagProcessesMax) && !p.Enabled, "only applies with %s (the per-process series are off)", c.Flag(FlagProcesses))
			}},
		{Name: "insight-window", Category: CatCollection,
			Value: Duration(&in.Engine.Insight.Window, engine.DefaultInsightWindow),
			Usage: "span the insight metrics are computed over (at least 2s); the longest step period found is half of it",
			Check: func(c *Config) error { return c.Engine.Insight.Check() }},
	}
}

func labelOptions(in *Input) []Option {
	return []Option{
		{Name: FlagHostname, Category: CatLabels, Compat: []string{"NODE_NAME"},
			Value: String(&in.Hostname, ""),
			Usage: "value of the Hostname label; defaults to the node name in Kubernetes, else the host name"},
		{Name: FlagHostnameLabel, Category: CatLabels,
			Value: String(&in.Engine.HostnameLabel, engine.DefaultHostnameLabel),
			Usage: "name of the host label: Hostname (every released dcgm-exporter) or hostname (dcgm-exporter's main branch since #655)",
			Check: func(c *Config) error {
				l := c.Engine.HostnameLabel
				return problem(l != "Hostname" && l != "hostname", "%q: want Hostname or hostname", l)
			}},
		{Name: FlagNoHostname, Aliases: []string{"n"}, Category: CatLabels, Compat: []string{"DCGM_EXPORTER_NO_HOSTNAME"},
			Value: Bool(&in.NoHostname, false),
			Usage: "leave the Hostname label out"},
		{Name: FlagOldNamespace, Aliases: []string{"o"}, Category: CatLabels, Compat: []string{"DCGM_EXPORTER_USE_OLD_NAMESPACE"},
			Value: Bool(&in.Engine.OldNamespace, false),
			Usage: "dcgm-exporter 1.x label names: uuid, pod_name, pod_namespace, container_name (the 1.x metric names come from its counters file)"},
		{Name: FlagReplaceBlanks, Aliases: []string{"rbmn"}, Category: CatLabels, Compat: []string{"DCGM_EXPORTER_REPLACE_BLANKS_IN_MODEL_NAME"},
			Value: Bool(&in.Engine.ReplaceBlanksInModelName, false),
			Usage: "write the modelName label with dashes for spaces (NVIDIA-H100-80GB-HBM3)"},
	}
}

func sourceOptions(in *Input) []Option {
	return []Option{
		{Name: FlagSource, Category: CatSources,
			Value: String(&in.Source, string(SourceAuto)),
			Usage: "where GPU data comes from: " + source.Usage()},
		{Name: FlagFakeGPUs, Category: CatSources, Compat: []string{"DCGM_EXPORTER_USE_FAKE_GPUS"},
			Value: Bool(&in.FakeGPUs, false),
			Usage: "serve simulated GPUs: the same as --source=sim"},
		{Name: FlagDCGMMode, Category: CatSources,
			Value: String(&in.DCGMMode, string(dcgm.ModeEmbedded)),
			Usage: "how to reach DCGM: embedded (in-process host engine), remote (a running nv-hostengine), start (start one)"},
		{Name: FlagDCGMRemote, Aliases: []string{"remote-hostengine-info", "r"}, Category: CatSources, Compat: []string{"DCGM_REMOTE_HOSTENGINE_INFO"},
			Value: String(&in.DCGMRemote, ""),
			Usage: "nv-hostengine address, host:port or a unix socket path; implies --dcgm-mode=remote"},
		{Name: FlagDCGMConnectTimeout, Category: CatSources,
			Value: Duration(&in.DCGMConnectTimeout, 0),
			Usage: "how long connecting to DCGM may take; 0: 2m in embedded and start mode (the host engine initialises every GPU first), 10s in remote mode",
			Check: func(c *Config) error {
				return problem(c.DCGM.ConnectTimeout < 0, "%s: use 0 (the mode's default) or a positive duration", c.DCGM.ConnectTimeout)
			}},
		{Name: FlagEnableDCGMLog, Category: CatSources, Compat: []string{"DCGM_EXPORTER_ENABLE_DCGM_LOG"},
			Value: Bool(&in.EnableDCGMLog, false),
			Usage: "write the embedded host engine's own log to standard error, at --dcgm-log-level"},
		{Name: FlagDCGMLogLevel, Category: CatSources, Compat: []string{"DCGM_EXPORTER_DCGM_LOG_LEVEL"},
			Value: String(&in.DCGMLogLevel, DefaultDCGMLogLevel),
			Usage: "level of the embedded host engine's log: " + strings.Join(DCGMLogLevels, ", ")},
		{Name: FlagBindUnbindWatch, Category: CatSources, Compat: []string{"DCGM_EXPORTER_ENABLE_GPU_BIND_UNBIND_WATCH"},
			Value: Bool(&in.BindUnbindWatch, false),
			Usage: "dcgm-exporter's watch for GPUs bound to or unbound from the driver; see docs/migrating-from-dcgm-exporter.md"},
		{Name: FlagBindUnbindPoll, Category: CatSources, Compat: []string{"DCGM_EXPORTER_GPU_BIND_UNBIND_POLL_INTERVAL"},
			Value: String(&in.BindUnbindPoll, DefaultBindUnbindPoll.String()),
			Usage: "poll interval of the bind/unbind watch, a Go duration"},
	}
}

func simOptions(in *Input) []Option {
	return []Option{
		{Name: FlagSimGPUs, Category: CatSim,
			Value: Int(&in.SimGPUs, sim.DefaultConfig().GPUs),
			Usage: "number of GPUs"},
		{Name: FlagSimModel, Category: CatSim,
			Value: String(&in.SimModel, sim.DefaultConfig().Model),
			Usage: "GPU model (" + strings.Join(sim.Models(), ", ") + ")"},
		{Name: FlagSimSeed, Category: CatSim,
			Value: Int64(&in.SimSeed, 1),
			Usage: "seed of the simulated dynamics"},
		{Name: FlagSimMIG, Category: CatSim,
			Value: String(&in.SimMIG, ""),
			Usage: "MIG layout, e.g. all or 7x1g.10gb (empty: MIG off)"},
		{Name: FlagSimMIGGPUs, Category: CatSim,
			Value: String(&in.SimMIGGPUs, ""),
			Usage: "the GPUs in MIG mode, comma-separated indexes (empty: all); the others run without MIG"},
		{Name: FlagSimNVLinks, Category: CatSim,
			Value: Int(&in.SimNVLinks, -1),
			Usage: "NVLinks per GPU (-1: the model's)"},
		{Name: FlagSimEventRate, Category: CatSim,
			Value: Float64(&in.SimEventRate, sim.DefaultConfig().EventRate),
			Usage: "multiplier of XID, ECC and throttling event rates (0 turns them off)"},
		{Name: FlagSimPods, Category: CatSim,
			Value: Bool(&in.SimPods, false),
			Usage: "attach simulated pod, namespace and container labels, as --kubernetes would"},
		{Name: FlagSimWorkload, Category: CatSim,
			Value: String(&in.SimWorkload, sim.Mixed),
			Usage: "workload per GPU: mixed (the kinds in turn), one of compute, memory, communication, input, idle, data-parallel, or a comma-separated kind per GPU; with --sim-mig, per MIG instance (no communication)"},
		{Name: FlagSimSharedGPUs, Category: CatSim,
			Value: Int(&in.SimSharedGPUs, 0),
			Usage: "GPUs shared by two simulated processes"},
		{Name: FlagSimScenario, Category: CatSim,
			Value: String(&in.SimScenario, ""),
			Usage: "a named trouble or healthy control that lays out the node, its pods and jobs: " + strings.Join(sim.ScenarioNames(), ", ")},
		{Name: FlagSimClock, Category: CatSim,
			Value: String(&in.SimClock, string(SimClockReal)),
			Usage: "real, or manual: the clock stands at the Unix epoch until POST /api/v1/sim/advance?by=30s moves it"},
	}
}
