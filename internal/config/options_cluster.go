package config

import (
	"time"

	"github.com/gpuscope/gpuscope/internal/enrich/kube/podattr"
	"github.com/gpuscope/gpuscope/internal/serve/server"
)

func kubernetesOptions(in *Input) []Option {
	return []Option{
		{Name: FlagKubernetes, Aliases: []string{"k"}, Category: CatKubernetes, Compat: []string{"DCGM_EXPORTER_KUBERNETES"},
			Value: Bool(&in.Kubernetes, false),
			Usage: "add pod, namespace and container labels from the kubelet's PodResources API"},
		{Name: FlagPodResources, Aliases: []string{"pod-resources-kubelet-socket"}, Category: CatKubernetes, Compat: []string{"DCGM_POD_RESOURCES_KUBELET_SOCKET"},
			Value: String(&in.PodAttr.Socket, podattr.DefaultSocket),
			Usage: "kubelet PodResources socket"},
		{Name: FlagResourceNames, Aliases: []string{"nvidia-resource-names"}, Category: CatKubernetes, Compat: []string{"NVIDIA_RESOURCE_NAMES"},
			Value: StringSlice(&in.PodAttr.ResourceNames, nil),
			Usage: "extra resource names that carry GPUs, besides nvidia.com/gpu and nvidia.com/mig-*"},
		{Name: FlagK8sRefresh, Category: CatKubernetes,
			Value: Duration(&in.PodAttr.RefreshInterval, podattr.DefaultRefreshInterval),
			Usage: "how often pod attribution is refreshed from the kubelet"},
		{Name: FlagK8sLabelGrace, Category: CatKubernetes,
			Value: Duration(&in.PodAttr.LabelGrace, 0),
			Usage: "how long the last pod labels stay on the series while the kubelet does not answer (0: three --kubernetes-refresh-interval)"},
		{Name: FlagPodUID, Aliases: []string{"kubernetes-enable-pod-uid"}, Category: CatKubernetes, Compat: []string{"DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID"},
			Value: Bool(&in.PodAttr.PodUIDLabel, false),
			Usage: "also add the pod_uid label"},
		{Name: FlagSharedAttribution, Category: CatKubernetes,
			Value: Bool(&in.PodAttr.SharedGPUAttribution, false),
			Usage: "attribute shared GPUs (time-slicing, MPS) per pod through the GPU processes' cgroups; needs hostPID"},
		{Name: FlagProcRoot, Category: CatKubernetes,
			Value: String(&in.PodAttr.ProcRoot, podattr.DefaultProcRoot),
			Usage: "proc file system for shared-GPU attribution"},
		{Name: FlagGPUIDType, Category: CatKubernetes, Compat: []string{"DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE"},
			Value: String(&in.GPUIDType, string(GPUIDUID)),
			Usage: "how the device plugin names GPUs to the kubelet: uid (GPU-<uuid>) or device-name (nvidia0); gpuscope recognises both forms either way, and checks the value"},
		{Name: FlagVirtualGPUs, Category: CatKubernetes, Compat: []string{"KUBERNETES_VIRTUAL_GPUS"},
			Value: Bool(&in.PodAttr.VirtualGPUs, false),
			Usage: "dcgm-exporter's one copy of each series per pod sharing a GPU; see docs/migrating-from-dcgm-exporter.md"},
		{Name: FlagDRA, Category: CatKubernetes, Compat: []string{"KUBERNETES_ENABLE_DRA"},
			Value: Bool(&in.DRA, false),
			Usage: "pod labels for GPUs allocated through DRA ResourceClaims; see docs/migrating-from-dcgm-exporter.md"},
		{Name: FlagHPCJobDir, Category: CatKubernetes, Compat: []string{"DCGM_HPC_JOB_MAPPING_DIR"},
			Value: String(&in.HPCJobDir, ""),
			Usage: "directory of files named after GPU indexes (or index.gi for MIG) holding job IDs, exported as the hpc_job label"},
	}
}

func podLabelOptions(in *Input) []Option {
	return []Option{
		{Name: FlagPodLabels, Category: CatKubernetes,
			Value: String(&in.PodLabels, ""),
			Usage: "copy the labels of a GPU's pod whose key matches this regular expression (whole key) under the key with [^a-zA-Z0-9_] replaced by _ (dcgm-exporter's names); watches the node's pods on the API server, so it needs RBAC (empty: off)"},
		{Name: FlagEnablePodLabels, Category: CatKubernetes, Compat: []string{"DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS"},
			Value: Bool(&in.EnablePodLabels, false),
			Usage: "with --kubernetes, copy the labels of each GPU's pod onto its series (all, or those --kubernetes-pod-label-allowlist-regex selects); the same as --kubernetes-pod-labels=.*"},
		{Name: FlagPodLabelAllowlist, Category: CatKubernetes, Compat: []string{"DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX"},
			Value: StringSlice(&in.PodLabelAllowlist, nil),
			Usage: "with --kubernetes-enable-pod-labels, copy only the pod labels whose key one of these regular expressions matches (anywhere in the key, as dcgm-exporter matches)"},
	}
}

func webOptions(in *Input) []Option {
	return []Option{
		{Name: FlagAddress, Aliases: []string{"a"}, Category: CatWeb, Compat: []string{"DCGM_EXPORTER_LISTEN"},
			Value: String(&in.Web.Address, ":9400"),
			Usage: "address to serve /metrics on"},
		{Name: FlagWebConfig, Category: CatWeb, Compat: []string{"DCGM_EXPORTER_WEB_CONFIG_FILE"},
			Value: String(&in.Web.WebConfigFile, ""),
			Usage: "exporter-toolkit web config file for TLS and basic auth"},
		{Name: FlagWebSystemdSocket, Category: CatWeb, Compat: []string{"DCGM_EXPORTER_SYSTEMD_SOCKET"},
			Value: Bool(&in.Web.SystemdSocket, false),
			Usage: "serve on the socket systemd passes in (socket activation) instead of --address"},
		{Name: FlagDisableExporterMetrics, Category: CatWeb,
			Value: Bool(&in.DisableExporterMetrics, false),
			Usage: "leave the Go runtime's (go_*) and the process's (process_*) families out of /metrics, as node_exporter's flag of the same name"},
		{Name: FlagMaxConnections, Category: CatWeb,
			Value: Int(&in.Web.MaxConnections, server.DefaultMaxConnections),
			Usage: "connections served at once; the excess is answered 503 and closed",
			Check: func(c *Config) error {
				return problem(c.Web.MaxConnections < 1, "%d: at least 1", c.Web.MaxConnections)
			}},
		{Name: "api-max-streams", Category: CatAPI,
			Value: Int(&in.Web.MaxStreams, server.DefaultMaxStreams),
			Usage: "most /api/v1/stream clients (gpuscope top, gpuscope capture) served at once; more are refused with 429",
			Check: func(c *Config) error {
				return problem(c.Web.MaxStreams < 1, "%d: allow at least 1 stream", c.Web.MaxStreams)
			}},
		{Name: "api-max-requests", Category: CatAPI,
			Value: Int(&in.Web.MaxRequests, server.DefaultMaxRequests),
			Usage: "most /api/v1/samples answers and /fields pages built at once; more are refused with 429, so that a burst of reads cannot slow scrapes or grow memory",
			Check: func(c *Config) error {
				return problem(c.Web.MaxRequests < 1, "%d: allow at least 1 request", c.Web.MaxRequests)
			}},
		{Name: "api-max-bytes", Category: CatAPI,
			Value: Int(&in.Web.MaxResponseBytes, server.DefaultMaxResponseBytes),
			Usage: "largest /api/v1/samples answer (and first stream event) in bytes; a larger one is refused with 413 naming field=, gpu= and since= to ask for less",
			Check: func(c *Config) error {
				return problem(c.Web.MaxResponseBytes < MinAPIMaxBytes, "%d: at least %d", c.Web.MaxResponseBytes, MinAPIMaxBytes)
			}},
		{Name: FlagEnableProfilingAPI, Category: CatAPI,
			Value: Bool(&in.Web.EnableProfilingAPI, false),
			Usage: "serve POST /api/v1/profiling/{pause,resume} (for `gpuscope profiling`); off by default, like Prometheus' --web.enable-admin-api: protect it with a web config"},
	}
}

func loggingOptions(in *Input) []Option {
	return []Option{
		{Name: FlagLogFormat, Category: CatLogging, Compat: []string{"DCGM_EXPORTER_LOG_FORMAT"},
			Value: String(&in.LogFormat, string(LogText)),
			Usage: "log format: text or json"},
		{Name: FlagLogLevel, Category: CatLogging,
			Value: String(&in.LogLevel, "info"),
			Usage: "log level: debug, info, warn, error"},
		{Name: FlagDebug, Category: CatLogging, Compat: []string{"DCGM_EXPORTER_DEBUG"},
			Value: Bool(&in.Debug, false),
			Usage: "log at debug level: the same as --log-level=debug"},
		{Name: FlagEnablePprof, Category: CatLogging, Compat: []string{"DCGM_EXPORTER_ENABLE_PPROF"},
			Value: Bool(&in.Web.Pprof, false),
			Usage: "serve Go's pprof profiles under /debug/pprof/ on the metrics port"},
		{Name: FlagDumpEnabled, Category: CatLogging, Compat: []string{"DCGM_EXPORTER_DUMP_ENABLED"},
			Value: Bool(&in.DumpEnabled, false),
			Usage: "write a debug dump of the entities and the exposition, as JSON, every minute to --dump-directory"},
		{Name: FlagDumpDirectory, Category: CatLogging, Compat: []string{"DCGM_EXPORTER_DUMP_DIRECTORY"},
			Value: String(&in.DumpDirectory, "/tmp/dcgm-exporter-debug"),
			Usage: "directory of the debug dumps"},
		{Name: FlagDumpRetention, Category: CatLogging, Compat: []string{"DCGM_EXPORTER_DUMP_RETENTION"},
			Value: Int(&in.DumpRetention, 24),
			Usage: "hours the debug dumps are kept (0: until the 1440 most recent; at most 512 MiB in all, oldest removed first)",
			Check: func(c *Config) error {
				return problem(c.Dump.Enabled && c.Dump.Retention < 0, "%d: use 0 or more hours", int(c.Dump.Retention/time.Hour))
			}},
		{Name: FlagDumpCompression, Category: CatLogging, Compat: []string{"DCGM_EXPORTER_DUMP_COMPRESSION"},
			Value: Bool(&in.DumpCompression, true),
			Usage: "gzip the debug dumps"},
		{Name: FlagDisableStartupCheck, Category: CatLogging, Compat: []string{"DISABLE_STARTUP_VALIDATE"},
			Value: Bool(&in.DisableStartupValidate, false),
			Usage: "dcgm-exporter's switch for its startup checks; gpuscope runs none that stop it, so there is nothing to disable"},
	}
}
