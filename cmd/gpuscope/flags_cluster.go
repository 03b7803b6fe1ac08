package main

import (
	"github.com/urfave/cli/v2"

	"github.com/gpuscope/gpuscope/internal/config"
)

func kubernetesFlags(in *config.Input) []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: config.FlagKubernetes, Aliases: []string{"k"}, Category: catKubernetes, Destination: &in.Kubernetes,
			EnvVars: env("GPUSCOPE_KUBERNETES", "DCGM_EXPORTER_KUBERNETES"),
			Usage:   "add pod, namespace and container labels from the kubelet's PodResources API"},
		&cli.StringFlag{Name: config.FlagPodResources, Aliases: []string{"pod-resources-kubelet-socket"}, Value: in.PodResourcesSocket,
			Category: catKubernetes, Destination: &in.PodResourcesSocket,
			EnvVars: env("GPUSCOPE_KUBERNETES_POD_RESOURCES_SOCKET", "DCGM_POD_RESOURCES_KUBELET_SOCKET"), Usage: "kubelet PodResources socket"},
		&cli.StringSliceFlag{Name: config.FlagResourceNames, Aliases: []string{"nvidia-resource-names"}, Category: catKubernetes,
			EnvVars: env("GPUSCOPE_KUBERNETES_RESOURCE_NAMES", "NVIDIA_RESOURCE_NAMES"),
			Usage:   "extra resource names that carry GPUs, besides nvidia.com/gpu and nvidia.com/mig-*"},
		&cli.DurationFlag{Name: config.FlagK8sRefresh, Value: in.K8sRefresh, Category: catKubernetes, Destination: &in.K8sRefresh,
			EnvVars: env("GPUSCOPE_KUBERNETES_REFRESH_INTERVAL"), Usage: "how often pod attribution is refreshed from the kubelet"},
		&cli.DurationFlag{Name: config.FlagK8sLabelGrace, Category: catKubernetes, Destination: &in.K8sLabelGrace, EnvVars: env("GPUSCOPE_KUBERNETES_LABEL_GRACE"),
			Usage: "how long the last pod labels stay on the series while the kubelet does not answer (0: three --kubernetes.refresh-interval)"},
		&cli.BoolFlag{Name: config.FlagPodUID, Aliases: []string{"kubernetes-enable-pod-uid"}, Category: catKubernetes, Destination: &in.PodUIDLabel,
			EnvVars: env("GPUSCOPE_KUBERNETES_POD_UID_LABEL", "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID"), Usage: "also add the pod_uid label"},
		&cli.BoolFlag{Name: config.FlagSharedAttribution, Category: catKubernetes, Destination: &in.SharedGPUAttribution,
			EnvVars: env("GPUSCOPE_KUBERNETES_SHARED_GPU_ATTRIBUTION"),
			Usage:   "attribute shared GPUs (time-slicing, MPS) per pod through the GPU processes' cgroups; needs hostPID"},
		&cli.StringFlag{Name: config.FlagProcRoot, Value: in.ProcRoot, Category: catKubernetes, Destination: &in.ProcRoot,
			EnvVars: env("GPUSCOPE_KUBERNETES_PROC_ROOT"), Usage: "proc file system for shared-GPU attribution"},
		&cli.StringFlag{Name: config.FlagGPUIDType, Value: in.GPUIDType, Category: catKubernetes, Destination: &in.GPUIDType,
			EnvVars: env("GPUSCOPE_KUBERNETES_GPU_ID_TYPE", "DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE"),
			Usage:   "how the device plugin names GPUs to the kubelet: uid (GPU-<uuid>) or device-name (nvidia0); gpuscope recognises both forms either way, and checks the value"},
		&cli.BoolFlag{Name: config.FlagVirtualGPUs, Category: catKubernetes, Destination: &in.VirtualGPUs,
			EnvVars: env("GPUSCOPE_KUBERNETES_VIRTUAL_GPUS", "KUBERNETES_VIRTUAL_GPUS"),
			Usage:   "dcgm-exporter's one copy of each series per pod sharing a GPU; see docs/migrating-from-dcgm-exporter.md"},
		&cli.BoolFlag{Name: config.FlagDRA, Category: catKubernetes, Destination: &in.DRA, EnvVars: env("GPUSCOPE_KUBERNETES_ENABLE_DRA", "KUBERNETES_ENABLE_DRA"),
			Usage: "pod labels for GPUs allocated through DRA ResourceClaims; see docs/migrating-from-dcgm-exporter.md"},
		&cli.StringFlag{Name: config.FlagHPCJobDir, Category: catKubernetes, Destination: &in.HPCJobDir,
			EnvVars: env("GPUSCOPE_HPC_JOB_MAPPING_DIR", "DCGM_HPC_JOB_MAPPING_DIR"),
			Usage:   "directory of files named after GPU indexes (or index.gi for MIG) holding job IDs, exported as the hpc_job label"},
	}
}

func podLabelFlags(in *config.Input) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: config.FlagPodLabels, Category: catKubernetes, Destination: &in.PodLabels, EnvVars: env("GPUSCOPE_KUBERNETES_POD_LABELS"),
			Usage: "copy the labels of a GPU's pod whose key matches this regular expression (whole key) under the key with [^a-zA-Z0-9_] replaced by _ (dcgm-exporter's names); watches the node's pods on the API server, so it needs RBAC (empty: off)"},
		&cli.BoolFlag{Name: config.FlagEnablePodLabels, Category: catKubernetes, Destination: &in.EnablePodLabels,
			EnvVars: env("GPUSCOPE_KUBERNETES_ENABLE_POD_LABELS", "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS"),
			Usage:   "with --kubernetes, copy the labels of each GPU's pod onto its series (all, or those --kubernetes-pod-label-allowlist-regex selects); the same as --kubernetes.pod-labels=.*"},
		&cli.StringSliceFlag{Name: config.FlagPodLabelAllowlist, Category: catKubernetes,
			EnvVars: env("GPUSCOPE_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX", "DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX"),
			Usage:   "with --kubernetes-enable-pod-labels, copy only the pod labels whose key one of these regular expressions matches (anywhere in the key, as dcgm-exporter matches)"},
	}
}

func webFlags(in *config.Input) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: config.FlagAddress, Aliases: []string{"a"}, Value: in.Address, Category: catWeb, Destination: &in.Address,
			EnvVars: env("GPUSCOPE_ADDRESS", "DCGM_EXPORTER_LISTEN"), Usage: "address to serve /metrics on"},
		&cli.StringFlag{Name: config.FlagWebConfig, Aliases: []string{"web-config-file"}, Category: catWeb, Destination: &in.WebConfigFile,
			EnvVars: env("GPUSCOPE_WEB_CONFIG_FILE", "DCGM_EXPORTER_WEB_CONFIG_FILE"), Usage: "exporter-toolkit web config file for TLS and basic auth"},
		&cli.BoolFlag{Name: config.FlagWebSystemdSocket, Category: catWeb, Destination: &in.SystemdSocket,
			EnvVars: env("GPUSCOPE_WEB_SYSTEMD_SOCKET", "DCGM_EXPORTER_SYSTEMD_SOCKET"),
			Usage:   "serve on the socket systemd passes in (socket activation) instead of --address"},
		&cli.BoolFlag{Name: config.FlagDisableExporterMetrics, Category: catWeb, Destination: &in.DisableExporterMetrics,
			EnvVars: env("GPUSCOPE_WEB_DISABLE_EXPORTER_METRICS"),
			Usage:   "leave the Go runtime's (go_*) and the process's (process_*) families out of /metrics, as node_exporter's flag of the same name"},
		&cli.IntFlag{Name: config.FlagMaxConnections, Value: in.MaxConnections, Category: catWeb, Destination: &in.MaxConnections,
			EnvVars: env("GPUSCOPE_WEB_MAX_CONNECTIONS"), Usage: "connections served at once; the excess is answered 503 and closed"},
		&cli.IntFlag{Name: config.FlagAPIMaxStreams, Value: in.APIMaxStreams, Category: catAPI, Destination: &in.APIMaxStreams,
			EnvVars: env("GPUSCOPE_API_MAX_STREAMS"),
			Usage:   "most /api/v1/stream clients (gpuscope top, gpuscope capture) served at once; more are refused with 429"},
		&cli.IntFlag{Name: config.FlagAPIMaxRequests, Value: in.APIMaxRequests, Category: catAPI, Destination: &in.APIMaxRequests,
			EnvVars: env("GPUSCOPE_API_MAX_REQUESTS"),
			Usage:   "most /api/v1/samples answers and /fields pages built at once; more are refused with 429, so that a burst of reads cannot slow scrapes or grow memory"},
		&cli.IntFlag{Name: config.FlagAPIMaxBytes, Value: in.APIMaxBytes, Category: catAPI, Destination: &in.APIMaxBytes,
			EnvVars: env("GPUSCOPE_API_MAX_BYTES"),
			Usage:   "largest /api/v1/samples answer (and first stream event) in bytes; a larger one is refused with 413 naming field=, gpu= and since= to ask for less"},
		&cli.BoolFlag{Name: config.FlagEnableProfilingAPI, Category: catAPI, Destination: &in.EnableProfilingAPI,
			EnvVars: env("GPUSCOPE_WEB_ENABLE_PROFILING_API"),
			Usage:   "serve POST /api/v1/profiling/{pause,resume} (for `gpuscope profiling`); off by default, like Prometheus' --web.enable-admin-api: protect it with a web config"},
	}
}

func loggingFlags(in *config.Input) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: config.FlagLogFormat, Value: in.LogFormat, Category: catLogging, Destination: &in.LogFormat,
			EnvVars: env("GPUSCOPE_LOG_FORMAT", "DCGM_EXPORTER_LOG_FORMAT"), Usage: "log format: text or json"},
		&cli.StringFlag{Name: config.FlagLogLevel, Value: in.LogLevel, Category: catLogging, Destination: &in.LogLevel, EnvVars: env("GPUSCOPE_LOG_LEVEL"),
			Usage: "log level: debug, info, warn, error"},
		&cli.BoolFlag{Name: config.FlagDebug, Category: catLogging, Destination: &in.Debug, EnvVars: env("GPUSCOPE_DEBUG", "DCGM_EXPORTER_DEBUG"),
			Usage: "log at debug level: the same as --log-level=debug"},
		&cli.BoolFlag{Name: config.FlagEnablePprof, Category: catLogging, Destination: &in.Pprof, EnvVars: env("GPUSCOPE_ENABLE_PPROF", "DCGM_EXPORTER_ENABLE_PPROF"),
			Usage: "serve Go's pprof profiles under /debug/pprof/ on the metrics port"},
		&cli.BoolFlag{Name: config.FlagDumpEnabled, Category: catLogging, Destination: &in.DumpEnabled, EnvVars: env("GPUSCOPE_DUMP_ENABLED", "DCGM_EXPORTER_DUMP_ENABLED"),
			Usage: "write a debug dump of the entities and the exposition, as JSON, every minute to --dump-directory"},
		&cli.StringFlag{Name: config.FlagDumpDirectory, Value: in.DumpDirectory, Category: catLogging, Destination: &in.DumpDirectory,
			EnvVars: env("GPUSCOPE_DUMP_DIRECTORY", "DCGM_EXPORTER_DUMP_DIRECTORY"), Usage: "directory of the debug dumps"},
		&cli.IntFlag{Name: config.FlagDumpRetention, Value: in.DumpRetention, Category: catLogging, Destination: &in.DumpRetention,
			EnvVars: env("GPUSCOPE_DUMP_RETENTION", "DCGM_EXPORTER_DUMP_RETENTION"), Usage: "hours the debug dumps are kept (0: until the 1440 most recent; at most 512 MiB in all, oldest removed first)"},
		&cli.BoolFlag{Name: config.FlagDumpCompression, Value: in.DumpCompression, Category: catLogging, Destination: &in.DumpCompression,
			EnvVars: env("GPUSCOPE_DUMP_COMPRESSION", "DCGM_EXPORTER_DUMP_COMPRESSION"), Usage: "gzip the debug dumps"},
		&cli.BoolFlag{Name: config.FlagDisableStartupCheck, Category: catLogging, Destination: &in.DisableStartupValidate,
			EnvVars: env("GPUSCOPE_DISABLE_STARTUP_VALIDATE", "DISABLE_STARTUP_VALIDATE"),
			Usage:   "dcgm-exporter's switch for its startup checks; gpuscope runs none that stop it, so there is nothing to disable"},
	}
}
