package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/urfave/cli/v2"
)

// Flag names. Where dcgm-exporter has a flag with the same meaning, its
// name, short alias and environment variable are accepted too, so an
// existing deployment's arguments work unchanged (README: "Coming from
// dcgm-exporter").
const (
	flagCollectors        = "collectors"
	flagAddress           = "address"
	flagCollectInterval   = "collect-interval"
	flagSource            = "source"
	flagWindow            = "window"
	flagWebConfig         = "web.config.file"
	flagLogFormat         = "log-format"
	flagLogLevel          = "log-level"
	flagHostname          = "hostname"
	flagHostnameLabel     = "hostname-label"
	flagReloadPoll        = "collectors-poll-interval"
	flagXIDWindow         = "xid-count-window-size"
	flagClockWindow       = "clock-events-count-window-size"
	flagDCGMMode          = "dcgm.mode"
	flagDCGMRemote        = "dcgm.remote-hostengine"
	flagKubernetes        = "kubernetes"
	flagPodResources      = "kubernetes.pod-resources-socket"
	flagResourceNames     = "kubernetes.resource-names"
	flagK8sRefresh        = "kubernetes.refresh-interval"
	flagPodUID            = "kubernetes.pod-uid-label"
	flagSharedAttribution = "kubernetes.shared-gpu-attribution"
	flagProcRoot          = "kubernetes.proc-root"
	flagPodLabels         = "kubernetes.pod-labels"
	flagHPCJobDir         = "hpc-job-mapping-dir"
	flagSimGPUs           = "sim-gpus"
	flagSimModel          = "sim-model"
	flagSimSeed           = "sim-seed"
	flagSimMIG            = "sim-mig"
	flagSimNVLinks        = "sim-nvlinks"
	flagSimEventRate      = "sim-event-rate"
	flagSimPods           = "sim-pods"
	flagSimSharedGPUs     = "sim-shared-gpus"
	flagSimWorkload       = "sim-workload"
	flagInsight           = "insight"
	flagInsightWindow     = "insight-window"
)

func env(names ...string) []string { return names }

func serveFlags() []cli.Flag {
	return append(ownFlags(), dcgmExporterFlags()...)
}

func ownFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: flagCollectors, Aliases: []string{"f"}, EnvVars: env("GPUSCOPE_COLLECTORS", "DCGM_EXPORTER_COLLECTORS"),
			Usage: "counters CSV that selects the fields (dcgm-exporter's format, plus optional watch-interval and window-statistics columns); empty means the built-in etc/default-counters.csv"},
		&cli.StringFlag{Name: flagAddress, Aliases: []string{"a"}, Value: ":9400", EnvVars: env("GPUSCOPE_ADDRESS", "DCGM_EXPORTER_LISTEN"),
			Usage: "address to serve /metrics on"},
		&cli.StringFlag{Name: flagCollectInterval, Aliases: []string{"c"}, Value: "1s", EnvVars: env("GPUSCOPE_COLLECT_INTERVAL", "DCGM_EXPORTER_INTERVAL"),
			Usage: "watch interval of fields whose CSV line gives none: a Go duration (1s) or plain milliseconds (30000), at least 100ms"},
		&cli.StringFlag{Name: flagSource, Value: "auto", EnvVars: env("GPUSCOPE_SOURCE"),
			Usage: "where GPU data comes from: auto (DCGM, else NVML), dcgm, nvml, or sim (simulated GPUs)"},
		&cli.DurationFlag{Name: flagWindow, Value: 15 * time.Second, EnvVars: env("GPUSCOPE_WINDOW"),
			Usage: "span of the sliding window over which the CSV's window statistics are computed"},
		&cli.StringFlag{Name: flagWebConfig, Aliases: []string{"web-config-file"}, EnvVars: env("GPUSCOPE_WEB_CONFIG_FILE", "DCGM_EXPORTER_WEB_CONFIG_FILE"),
			Usage: "exporter-toolkit web config file for TLS and basic auth"},
		&cli.StringFlag{Name: flagLogFormat, Value: "text", EnvVars: env("GPUSCOPE_LOG_FORMAT", "DCGM_EXPORTER_LOG_FORMAT"), Usage: "log format: text or json"},
		&cli.StringFlag{Name: flagLogLevel, Value: "info", EnvVars: env("GPUSCOPE_LOG_LEVEL"), Usage: "log level: debug, info, warn, error"},
		&cli.StringFlag{Name: flagHostname, EnvVars: env("GPUSCOPE_HOSTNAME", "NODE_NAME"),
			Usage: "value of the Hostname label; defaults to the node name in Kubernetes, else the host name"},
		&cli.StringFlag{Name: flagHostnameLabel, Value: "Hostname", EnvVars: env("GPUSCOPE_HOSTNAME_LABEL"),
			Usage: "name of the host label: Hostname (every released dcgm-exporter) or hostname (dcgm-exporter's main branch since #655)"},
		&cli.DurationFlag{Name: flagReloadPoll, Value: 5 * time.Second, EnvVars: env("GPUSCOPE_COLLECTORS_POLL_INTERVAL"),
			Usage: "how often the counters file is checked for changes (0 turns it off; SIGHUP always reloads)"},
		&cli.StringFlag{Name: flagXIDWindow, Aliases: []string{"x"}, Value: "5m", EnvVars: env("GPUSCOPE_XID_COUNT_WINDOW_SIZE", "DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE"),
			Usage: "window of DCGM_EXP_XID_ERRORS_COUNT: a Go duration or plain milliseconds"},
		&cli.StringFlag{Name: flagClockWindow, Value: "5m", EnvVars: env("GPUSCOPE_CLOCK_EVENTS_COUNT_WINDOW_SIZE", "DCGM_EXPORTER_CLOCK_EVENTS_COUNT_WINDOW_SIZE"),
			Usage: "window of DCGM_EXP_CLOCK_EVENTS_COUNT: a Go duration or plain milliseconds"},
		&cli.StringFlag{Name: flagDCGMMode, Value: "embedded", EnvVars: env("GPUSCOPE_DCGM_MODE"),
			Usage: "how to reach DCGM: embedded (in-process host engine), remote (a running nv-hostengine), start (start one)"},
		&cli.StringFlag{Name: flagDCGMRemote, Aliases: []string{"remote-hostengine-info", "r"}, EnvVars: env("GPUSCOPE_DCGM_REMOTE_HOSTENGINE", "DCGM_REMOTE_HOSTENGINE_INFO"),
			Usage: "nv-hostengine address, host:port or a unix socket path; implies --dcgm.mode=remote"},
		&cli.BoolFlag{Name: flagKubernetes, Aliases: []string{"k"}, EnvVars: env("GPUSCOPE_KUBERNETES", "DCGM_EXPORTER_KUBERNETES"),
			Usage: "add pod, namespace and container labels from the kubelet's PodResources API"},
		&cli.StringFlag{Name: flagPodResources, Aliases: []string{"pod-resources-kubelet-socket"}, Value: "/var/lib/kubelet/pod-resources/kubelet.sock",
			EnvVars: env("GPUSCOPE_KUBERNETES_POD_RESOURCES_SOCKET", "DCGM_POD_RESOURCES_KUBELET_SOCKET"),
			Usage:   "kubelet PodResources socket"},
		&cli.StringSliceFlag{Name: flagResourceNames, Aliases: []string{"nvidia-resource-names"}, EnvVars: env("GPUSCOPE_KUBERNETES_RESOURCE_NAMES", "NVIDIA_RESOURCE_NAMES"),
			Usage: "extra resource names that carry GPUs, besides nvidia.com/gpu and nvidia.com/mig-*"},
		&cli.DurationFlag{Name: flagK8sRefresh, Value: 5 * time.Second, EnvVars: env("GPUSCOPE_KUBERNETES_REFRESH_INTERVAL"),
			Usage: "how often pod attribution is refreshed from the kubelet"},
		&cli.BoolFlag{Name: flagPodUID, Aliases: []string{"kubernetes-enable-pod-uid"}, EnvVars: env("GPUSCOPE_KUBERNETES_POD_UID_LABEL", "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID"), Usage: "also add the pod_uid label"},
		&cli.BoolFlag{Name: flagSharedAttribution, EnvVars: env("GPUSCOPE_KUBERNETES_SHARED_GPU_ATTRIBUTION"),
			Usage: "attribute shared GPUs (time-slicing, MPS) per pod through the GPU processes' cgroups; needs hostPID"},
		&cli.StringFlag{Name: flagProcRoot, Value: "/proc", EnvVars: env("GPUSCOPE_KUBERNETES_PROC_ROOT"), Usage: "proc file system for shared-GPU attribution"},
		&cli.StringFlag{Name: flagPodLabels, EnvVars: env("GPUSCOPE_KUBERNETES_POD_LABELS"), Action: checkPodLabels,
			Usage: "copy the labels of a GPU's pod whose key matches this regular expression (whole key) under the key with [^a-zA-Z0-9_] replaced by _ (dcgm-exporter's names); watches the node's pods on the API server, so it needs RBAC (empty: off)"},
		&cli.StringFlag{Name: flagHPCJobDir, EnvVars: env("GPUSCOPE_HPC_JOB_MAPPING_DIR", "DCGM_HPC_JOB_MAPPING_DIR"),
			Usage: "directory of files named after GPU indexes (or index.gi for MIG) holding job IDs, exported as the hpc_job label"},
		&cli.IntFlag{Name: flagSimGPUs, Value: 8, EnvVars: env("GPUSCOPE_SIM_GPUS"), Usage: "sim source: number of GPUs"},
		&cli.StringFlag{Name: flagSimModel, Value: "h100", EnvVars: env("GPUSCOPE_SIM_MODEL"), Usage: "sim source: GPU model (h100, h200, a100, l4)"},
		&cli.Int64Flag{Name: flagSimSeed, Value: 1, EnvVars: env("GPUSCOPE_SIM_SEED"), Usage: "sim source: seed of the simulated dynamics"},
		&cli.StringFlag{Name: flagSimMIG, EnvVars: env("GPUSCOPE_SIM_MIG"), Usage: "sim source: MIG layout, e.g. all or 7x1g.10gb (empty: MIG off)"},
		&cli.IntFlag{Name: flagSimNVLinks, Value: -1, EnvVars: env("GPUSCOPE_SIM_NVLINKS"), Usage: "sim source: NVLinks per GPU (-1: the model's)"},
		&cli.Float64Flag{Name: flagSimEventRate, Value: 1, EnvVars: env("GPUSCOPE_SIM_EVENT_RATE"), Usage: "sim source: multiplier of XID, ECC and throttling event rates (0 turns them off)"},
		&cli.BoolFlag{Name: flagSimPods, EnvVars: env("GPUSCOPE_SIM_PODS"), Usage: "sim source: attach simulated pod, namespace and container labels, as --kubernetes would"},
		&cli.BoolFlag{Name: flagInsight, EnvVars: env("GPUSCOPE_INSIGHT"),
			Usage: "export workload insight per GPU (step period, stall ratio, bound classes; docs/insight.md), computed in the background from 100 ms profiling samples"},
		&cli.DurationFlag{Name: flagInsightWindow, Value: 30 * time.Second, EnvVars: env("GPUSCOPE_INSIGHT_WINDOW"),
			Usage: "span the insight metrics are computed over (at least 2s); the longest step period found is half of it"},
		&cli.StringFlag{Name: flagSimWorkload, Value: "mixed", EnvVars: env("GPUSCOPE_SIM_WORKLOAD"),
			Usage: "sim source: workload per GPU: mixed (the kinds in turn), one of compute, memory, communication, input, idle, data-parallel, or a comma-separated kind per GPU"},
		&cli.IntFlag{Name: flagSimSharedGPUs, EnvVars: env("GPUSCOPE_SIM_SHARED_GPUS"), Usage: "sim source: GPUs shared by two simulated processes"},
	}
}

// parseInterval reads an interval flag in the counters file's grammar (plain
// milliseconds, as dcgm-exporter's integer interval flags take, or a Go
// duration); it must be positive.
func parseInterval(flag, s string) (time.Duration, error) {
	d, err := counters.ParseInterval(s)
	if err != nil {
		return 0, fmt.Errorf("--%s %w", flag, err)
	}
	if d <= 0 {
		return 0, fmt.Errorf("--%s %q: must be positive", flag, strings.TrimSpace(s))
	}
	return d, nil
}
