package config

// Flag names. The first name of each flag is gpuscope's; where
// dcgm-exporter has a flag of the same meaning, cmd/gpuscope accepts its
// name, short alias and environment variable too, so that an existing
// deployment's arguments work unchanged. Messages name flags through these
// constants, so a flag is named the same in its declaration and its errors.
const (
	FlagCollectors         = "collectors"
	FlagAddress            = "address"
	FlagCollectInterval    = "collect-interval"
	FlagSource             = "source"
	FlagWindow             = "window"
	FlagWebConfig          = "web-config-file"
	FlagLogFormat          = "log-format"
	FlagLogLevel           = "log-level"
	FlagHostname           = "hostname"
	FlagHostnameLabel      = "hostname-label"
	FlagReloadPoll         = "collectors-poll-interval"
	FlagXIDWindow          = "xid-count-window-size"
	FlagClockWindow        = "clock-events-count-window-size"
	FlagDCGMMode           = "dcgm-mode"
	FlagDCGMRemote         = "dcgm-remote-hostengine"
	FlagDCGMConnectTimeout = "dcgm-connect-timeout"
	FlagKubernetes         = "kubernetes"
	FlagPodResources       = "kubernetes-pod-resources-socket"
	FlagResourceNames      = "kubernetes-resource-names"
	FlagK8sRefresh         = "kubernetes-refresh-interval"
	FlagK8sLabelGrace      = "kubernetes-label-grace"
	FlagPodUID             = "kubernetes-pod-uid-label"
	FlagSharedAttribution  = "kubernetes-shared-gpu-attribution"
	FlagProcRoot           = "kubernetes-proc-root"
	FlagPodLabels          = "kubernetes-pod-labels"
	FlagHPCJobDir          = "hpc-job-mapping-dir"
	FlagSimGPUs            = "sim-gpus"
	FlagSimModel           = "sim-model"
	FlagSimSeed            = "sim-seed"
	FlagSimMIG             = "sim-mig"
	FlagSimMIGGPUs         = "sim-mig-gpus"
	FlagSimNVLinks         = "sim-nvlinks"
	FlagSimEventRate       = "sim-event-rate"
	FlagSimPods            = "sim-pods"
	FlagSimSharedGPUs      = "sim-shared-gpus"
	FlagSimWorkload        = "sim-workload"
	FlagSimScenario        = "sim-scenario"
	FlagSimClock           = "sim-clock"
	FlagInsight            = "insight"
	FlagNativeHistograms   = "native-histograms"
	FlagProcesses          = "processes"
	FlagProcessesMax       = "processes-max-per-gpu"
	FlagEnableProfilingAPI = "web-enable-profiling-api"
	FlagMaxConnections     = "web-max-connections"
	// FlagDisableExporterMetrics is node_exporter's flag of the same name.
	FlagDisableExporterMetrics = "web-disable-exporter-metrics"
	// FlagComputeInstances is gpuscope's own: dcgm-exporter's device
	// options have no form that selects MIG compute instances.
	FlagComputeInstances = "mig-compute-instances"
)

// deprecatedNames are gpuscope's earlier spellings of its flags, by the
// flag's name: dotted, where the other flags are dashed. They still work,
// and Build warns about each one given; their variables are the same.
var deprecatedNames = map[string][]string{
	FlagWebConfig:              {"web.config.file"},
	FlagDCGMMode:               {"dcgm.mode"},
	FlagDCGMRemote:             {"dcgm.remote-hostengine"},
	FlagDCGMConnectTimeout:     {"dcgm.connect-timeout"},
	FlagPodResources:           {"kubernetes.pod-resources-socket"},
	FlagResourceNames:          {"kubernetes.resource-names"},
	FlagK8sRefresh:             {"kubernetes.refresh-interval"},
	FlagK8sLabelGrace:          {"kubernetes.label-grace"},
	FlagPodUID:                 {"kubernetes.pod-uid-label"},
	FlagSharedAttribution:      {"kubernetes.shared-gpu-attribution"},
	FlagProcRoot:               {"kubernetes.proc-root"},
	FlagPodLabels:              {"kubernetes.pod-labels"},
	FlagEnableProfilingAPI:     {"web.enable-profiling-api"},
	FlagMaxConnections:         {"web.max-connections"},
	FlagDisableExporterMetrics: {"web.disable-exporter-metrics"},
}

// dcgm-exporter's flags that have no gpuscope flag of the same meaning.
// Names, aliases, variables and defaults are dcgm-exporter's (pkg/cmd/app.go
// at d5e5f51).
const (
	FlagDevices             = "devices"
	FlagSwitchDevices       = "switch-devices"
	FlagCPUDevices          = "cpu-devices"
	FlagOldNamespace        = "use-old-namespace"
	FlagNoHostname          = "no-hostname"
	FlagReplaceBlanks       = "replace-blanks-in-model-name"
	FlagConfigMapData       = "configmap-data"
	FlagEnablePodLabels     = "kubernetes-enable-pod-labels"
	FlagPodLabelAllowlist   = "kubernetes-pod-label-allowlist-regex"
	FlagGPUIDType           = "kubernetes-gpu-id-type"
	FlagVirtualGPUs         = "kubernetes-virtual-gpus"
	FlagDRA                 = "kubernetes-enable-dra"
	FlagFakeGPUs            = "fake-gpus"
	FlagDebug               = "debug"
	FlagEnableDCGMLog       = "enable-dcgm-log"
	FlagDCGMLogLevel        = "dcgm-log-level"
	FlagDumpEnabled         = "dump-enabled"
	FlagDumpDirectory       = "dump-directory"
	FlagDumpRetention       = "dump-retention"
	FlagDumpCompression     = "dump-compression"
	FlagDisableStartupCheck = "disable-startup-validate"
	FlagBindUnbindWatch     = "enable-gpu-bind-unbind-watch"
	FlagBindUnbindPoll      = "gpu-bind-unbind-poll-interval"
	FlagEnablePprof         = "enable-pprof"
	FlagWebSystemdSocket    = "web-systemd-socket"
)

// SimOnly are the flags that only the sim source reads.
var SimOnly = []string{FlagSimGPUs, FlagSimModel, FlagSimSeed, FlagSimMIG, FlagSimNVLinks, FlagSimEventRate,
	FlagSimPods, FlagSimSharedGPUs, FlagSimWorkload, FlagSimScenario, FlagSimClock, FlagSimMIGGPUs}
