package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gpuscope/gpuscope/internal/config"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/sim"
)

// Help categories of the serve flags.
const (
	catCollection = "Collection"
	catLabels     = "Labels"
	catSources    = "Sources and DCGM"
	catSim        = "Simulated GPUs (--source=sim)"
	catKubernetes = "Kubernetes and HPC jobs"
	catWeb        = "Web and TLS"
	catAPI        = "Live view and API"
	catLogging    = "Logging and debugging"
)

func env(names ...string) []string { return names }

// serveFlags declares the serve flags, each writing its value into in.
// in holds config.Defaults() when it is called: each flag shows and starts
// from that default. Where dcgm-exporter has a flag of the same meaning,
// its name, short alias and variable are accepted too (README: "Coming
// from dcgm-exporter"); each variable is listed after gpuscope's own.
func serveFlags(in *config.Input) []cli.Flag {
	var out []cli.Flag
	for _, group := range [][]cli.Flag{collectionFlags(in), labelFlags(in), sourceFlags(in), simFlags(in),
		kubernetesFlags(in), podLabelFlags(in), webFlags(in), loggingFlags(in)} {
		out = append(out, group...)
	}
	return out
}

func collectionFlags(in *config.Input) []cli.Flag {
	deviceUsage := "which %s to export, in dcgm-exporter's syntax: f (flexible: %s), g (every %s), " +
		"g:<id>[,<id>|<from>-<to>...] (these %s), i (every %s) or i:<id>,... (these %s)"
	return []cli.Flag{
		&cli.StringFlag{Name: config.FlagCollectors, Aliases: []string{"f"}, Category: catCollection, Destination: &in.Collectors,
			EnvVars: env("GPUSCOPE_COLLECTORS", "DCGM_EXPORTER_COLLECTORS"),
			Usage:   "counters CSV that selects the fields (dcgm-exporter's format, plus optional watch-interval and window-statistics columns); empty means the built-in etc/default-counters.csv"},
		&cli.StringFlag{Name: config.FlagConfigMapData, Aliases: []string{"m"}, Value: in.ConfigMapData, Category: catCollection, Destination: &in.ConfigMapData,
			EnvVars: env("GPUSCOPE_CONFIGMAP_DATA", "DCGM_EXPORTER_CONFIGMAP_DATA"),
			Usage:   "read the counters once, at start, from the 'metrics' key of this ConfigMap, as namespace:name, through the API server (needs get on configmaps); none: use --collectors"},
		&cli.DurationFlag{Name: config.FlagReloadPoll, Value: in.ReloadPoll, Category: catCollection, Destination: &in.ReloadPoll,
			EnvVars: env("GPUSCOPE_COLLECTORS_POLL_INTERVAL"),
			Usage:   "how often the counters file is checked for changes (0 turns it off; SIGHUP always reloads)"},
		&cli.StringFlag{Name: config.FlagCollectInterval, Aliases: []string{"c"}, Value: in.CollectInterval, Category: catCollection, Destination: &in.CollectInterval,
			EnvVars: env("GPUSCOPE_COLLECT_INTERVAL", "DCGM_EXPORTER_INTERVAL"),
			Usage:   "watch interval of fields whose CSV line gives none: a Go duration (1s) or plain milliseconds (30000), at least 100ms"},
		&cli.DurationFlag{Name: config.FlagWindow, Value: in.Window, Category: catCollection, Destination: &in.Window, EnvVars: env("GPUSCOPE_WINDOW"),
			Usage: "span of the sliding window over which the CSV's window statistics are computed"},
		&cli.StringFlag{Name: config.FlagXIDWindow, Aliases: []string{"x"}, Value: in.XIDWindow, Category: catCollection, Destination: &in.XIDWindow,
			EnvVars: env("GPUSCOPE_XID_COUNT_WINDOW_SIZE", "DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE"),
			Usage:   "window of DCGM_EXP_XID_ERRORS_COUNT: a Go duration or plain milliseconds"},
		&cli.StringFlag{Name: config.FlagClockWindow, Value: in.ClockEventsWindow, Category: catCollection, Destination: &in.ClockEventsWindow,
			EnvVars: env("GPUSCOPE_CLOCK_EVENTS_COUNT_WINDOW_SIZE", "DCGM_EXPORTER_CLOCK_EVENTS_COUNT_WINDOW_SIZE"),
			Usage:   "window of DCGM_EXP_CLOCK_EVENTS_COUNT: a Go duration or plain milliseconds"},
		&cli.StringFlag{Name: config.FlagDevices, Aliases: []string{"d"}, Value: in.Devices, Category: catCollection, Destination: &in.Devices,
			EnvVars: env("GPUSCOPE_DEVICES", "DCGM_EXPORTER_DEVICES_STR"),
			Usage: fmt.Sprintf(deviceUsage, "GPUs and MIG instances", "GPUs without MIG and the GPU instances of MIG GPUs", "GPU",
				"GPU indexes", "MIG GPU instance", "GPU instances, numbered across the node from 0")},
		&cli.StringFlag{Name: config.FlagSwitchDevices, Aliases: []string{"s"}, Value: in.SwitchDevices, Category: catCollection, Destination: &in.SwitchDevices,
			EnvVars: env("GPUSCOPE_SWITCH_DEVICES", "DCGM_EXPORTER_OTHER_DEVICES_STR"),
			Usage: fmt.Sprintf(deviceUsage, "NvSwitches and their links", "every switch and link", "NvSwitch, without links", "switch IDs",
				"link of a watched switch", "link indexes")},
		&cli.StringFlag{Name: config.FlagCPUDevices, Aliases: []string{"p"}, Value: in.CPUDevices, Category: catCollection, Destination: &in.CPUDevices,
			EnvVars: env("GPUSCOPE_CPU_DEVICES", "DCGM_EXPORTER_CPU_DEVICES_STR"),
			Usage:   fmt.Sprintf(deviceUsage, "CPUs and cores", "every CPU and core", "CPU", "CPU IDs", "core", "core IDs")},
		&cli.BoolFlag{Name: config.FlagComputeInstances, Category: catCollection, Destination: &in.ComputeInstances, EnvVars: env("GPUSCOPE_MIG_COMPUTE_INSTANCES"),
			Usage: "also export MIG compute instances (GPU_CI_ID label), with -d f; dcgm-exporter never does"},
		&cli.BoolFlag{Name: config.FlagInsight, Category: catCollection, Destination: &in.Insight, EnvVars: env("GPUSCOPE_INSIGHT"),
			Usage: "export workload insight per GPU (step period, stall ratio, bound classes; docs/insight.md), computed in the background from 100 ms profiling samples"},
		&cli.BoolFlag{Name: config.FlagNativeHistograms, Value: in.NativeHistograms, Category: catCollection, Destination: &in.NativeHistograms,
			EnvVars: env("GPUSCOPE_NATIVE_HISTOGRAMS"),
			Usage:   "serve a native histogram of every field with window statistics (<FIELD>_distribution) to scrapers that negotiate protobuf, as Prometheus does with native histograms on; --native-histograms=false turns them off, as nohist does for one line of the counters file"},
		&cli.DurationFlag{Name: config.FlagInsightWindow, Value: in.InsightWindow, Category: catCollection, Destination: &in.InsightWindow,
			EnvVars: env("GPUSCOPE_INSIGHT_WINDOW"),
			Usage:   "span the insight metrics are computed over (at least 2s); the longest step period found is half of it"},
	}
}

func labelFlags(in *config.Input) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: config.FlagHostname, Category: catLabels, Destination: &in.Hostname, EnvVars: env("GPUSCOPE_HOSTNAME", "NODE_NAME"),
			Usage: "value of the Hostname label; defaults to the node name in Kubernetes, else the host name"},
		&cli.StringFlag{Name: config.FlagHostnameLabel, Value: in.HostnameLabel, Category: catLabels, Destination: &in.HostnameLabel,
			EnvVars: env("GPUSCOPE_HOSTNAME_LABEL"),
			Usage:   "name of the host label: Hostname (every released dcgm-exporter) or hostname (dcgm-exporter's main branch since #655)"},
		&cli.BoolFlag{Name: config.FlagNoHostname, Aliases: []string{"n"}, Category: catLabels, Destination: &in.NoHostname,
			EnvVars: env("GPUSCOPE_NO_HOSTNAME", "DCGM_EXPORTER_NO_HOSTNAME"), Usage: "leave the Hostname label out"},
		&cli.BoolFlag{Name: config.FlagOldNamespace, Aliases: []string{"o"}, Category: catLabels, Destination: &in.OldNamespace,
			EnvVars: env("GPUSCOPE_USE_OLD_NAMESPACE", "DCGM_EXPORTER_USE_OLD_NAMESPACE"),
			Usage:   "dcgm-exporter 1.x label names: uuid, pod_name, pod_namespace, container_name (the 1.x metric names come from its counters file)"},
		&cli.BoolFlag{Name: config.FlagReplaceBlanks, Aliases: []string{"rbmn"}, Category: catLabels, Destination: &in.ReplaceBlanks,
			EnvVars: env("GPUSCOPE_REPLACE_BLANKS_IN_MODEL_NAME", "DCGM_EXPORTER_REPLACE_BLANKS_IN_MODEL_NAME"),
			Usage:   "write the modelName label with dashes for spaces (NVIDIA-H100-80GB-HBM3)"},
	}
}

func sourceFlags(in *config.Input) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: config.FlagSource, Value: in.Source, Category: catSources, Destination: &in.Source, EnvVars: env("GPUSCOPE_SOURCE"),
			Usage: "where GPU data comes from: " + source.Usage()},
		&cli.BoolFlag{Name: config.FlagFakeGPUs, Category: catSources, Destination: &in.FakeGPUs, EnvVars: env("GPUSCOPE_FAKE_GPUS", "DCGM_EXPORTER_USE_FAKE_GPUS"),
			Usage: "serve simulated GPUs: the same as --source=sim"},
		&cli.StringFlag{Name: config.FlagDCGMMode, Value: in.DCGMMode, Category: catSources, Destination: &in.DCGMMode, EnvVars: env("GPUSCOPE_DCGM_MODE"),
			Usage: "how to reach DCGM: embedded (in-process host engine), remote (a running nv-hostengine), start (start one)"},
		&cli.StringFlag{Name: config.FlagDCGMRemote, Aliases: []string{"remote-hostengine-info", "r"}, Category: catSources, Destination: &in.DCGMRemote,
			EnvVars: env("GPUSCOPE_DCGM_REMOTE_HOSTENGINE", "DCGM_REMOTE_HOSTENGINE_INFO"),
			Usage:   "nv-hostengine address, host:port or a unix socket path; implies --dcgm.mode=remote"},
		&cli.BoolFlag{Name: config.FlagEnableDCGMLog, Category: catSources, Destination: &in.EnableDCGMLog,
			EnvVars: env("GPUSCOPE_ENABLE_DCGM_LOG", "DCGM_EXPORTER_ENABLE_DCGM_LOG"),
			Usage:   "write the embedded host engine's own log to standard error, at --dcgm-log-level"},
		&cli.StringFlag{Name: config.FlagDCGMLogLevel, Value: in.DCGMLogLevel, Category: catSources, Destination: &in.DCGMLogLevel,
			EnvVars: env("GPUSCOPE_DCGM_LOG_LEVEL", "DCGM_EXPORTER_DCGM_LOG_LEVEL"),
			Usage:   "level of the embedded host engine's log: " + strings.Join(config.DCGMLogLevels, ", ")},
		&cli.BoolFlag{Name: config.FlagBindUnbindWatch, Category: catSources, Destination: &in.BindUnbindWatch,
			EnvVars: env("GPUSCOPE_ENABLE_GPU_BIND_UNBIND_WATCH", "DCGM_EXPORTER_ENABLE_GPU_BIND_UNBIND_WATCH"),
			Usage:   "dcgm-exporter's watch for GPUs bound to or unbound from the driver; see docs/migrating-from-dcgm-exporter.md"},
		&cli.StringFlag{Name: config.FlagBindUnbindPoll, Value: in.BindUnbindPoll, Category: catSources, Destination: &in.BindUnbindPoll,
			EnvVars: env("GPUSCOPE_GPU_BIND_UNBIND_POLL_INTERVAL", "DCGM_EXPORTER_GPU_BIND_UNBIND_POLL_INTERVAL"),
			Usage:   "poll interval of the bind/unbind watch, a Go duration"},
	}
}

func simFlags(in *config.Input) []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: config.FlagSimGPUs, Value: in.SimGPUs, Category: catSim, Destination: &in.SimGPUs, EnvVars: env("GPUSCOPE_SIM_GPUS"),
			Usage: "number of GPUs"},
		&cli.StringFlag{Name: config.FlagSimModel, Value: in.SimModel, Category: catSim, Destination: &in.SimModel, EnvVars: env("GPUSCOPE_SIM_MODEL"),
			Usage: "GPU model (" + strings.Join(sim.Models(), ", ") + ")"},
		&cli.Int64Flag{Name: config.FlagSimSeed, Value: in.SimSeed, Category: catSim, Destination: &in.SimSeed, EnvVars: env("GPUSCOPE_SIM_SEED"),
			Usage: "seed of the simulated dynamics"},
		&cli.StringFlag{Name: config.FlagSimMIG, Category: catSim, Destination: &in.SimMIG, EnvVars: env("GPUSCOPE_SIM_MIG"),
			Usage: "MIG layout, e.g. all or 7x1g.10gb (empty: MIG off)"},
		&cli.StringFlag{Name: config.FlagSimMIGGPUs, Category: catSim, Destination: &in.SimMIGGPUs, EnvVars: env("GPUSCOPE_SIM_MIG_GPUS"),
			Usage: "the GPUs in MIG mode, comma-separated indexes (empty: all); the others run without MIG"},
		&cli.IntFlag{Name: config.FlagSimNVLinks, Value: in.SimNVLinks, Category: catSim, Destination: &in.SimNVLinks, EnvVars: env("GPUSCOPE_SIM_NVLINKS"),
			Usage: "NVLinks per GPU (-1: the model's)"},
		&cli.Float64Flag{Name: config.FlagSimEventRate, Value: in.SimEventRate, Category: catSim, Destination: &in.SimEventRate,
			EnvVars: env("GPUSCOPE_SIM_EVENT_RATE"), Usage: "multiplier of XID, ECC and throttling event rates (0 turns them off)"},
		&cli.BoolFlag{Name: config.FlagSimPods, Category: catSim, Destination: &in.SimPods, EnvVars: env("GPUSCOPE_SIM_PODS"),
			Usage: "attach simulated pod, namespace and container labels, as --kubernetes would"},
		&cli.StringFlag{Name: config.FlagSimWorkload, Value: in.SimWorkload, Category: catSim, Destination: &in.SimWorkload, EnvVars: env("GPUSCOPE_SIM_WORKLOAD"),
			Usage: "workload per GPU: mixed (the kinds in turn), one of compute, memory, communication, input, idle, data-parallel, or a comma-separated kind per GPU; with --sim-mig, per MIG instance (no communication)"},
		&cli.IntFlag{Name: config.FlagSimSharedGPUs, Category: catSim, Destination: &in.SimSharedGPUs, EnvVars: env("GPUSCOPE_SIM_SHARED_GPUS"),
			Usage: "GPUs shared by two simulated processes"},
		&cli.StringFlag{Name: config.FlagSimScenario, Category: catSim, Destination: &in.SimScenario, EnvVars: env("GPUSCOPE_SIM_SCENARIO"),
			Usage: "a named trouble or healthy control that lays out the node, its pods and jobs: " + strings.Join(sim.ScenarioNames(), ", ")},
		&cli.StringFlag{Name: config.FlagSimClock, Value: in.SimClock, Category: catSim, Destination: &in.SimClock, EnvVars: env("GPUSCOPE_SIM_CLOCK"),
			Usage: "real, or manual: the clock stands at the Unix epoch until POST /api/v1/sim/advance?by=30s moves it"},
	}
}
