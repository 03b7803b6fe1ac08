package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/version"
	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/internal/engine/devsel"
	"github.com/gpuscope/gpuscope/internal/serve/dump"
)

// dcgm-exporter's flags that have no gpuscope flag of the same meaning.
// Names, aliases, variables and defaults are dcgm-exporter's (pkg/cmd/app.go
// at d5e5f51); each variable is listed after gpuscope's own.
const (
	flagDevices             = "devices"
	flagSwitchDevices       = "switch-devices"
	flagCPUDevices          = "cpu-devices"
	flagOldNamespace        = "use-old-namespace"
	flagNoHostname          = "no-hostname"
	flagReplaceBlanks       = "replace-blanks-in-model-name"
	flagConfigMapData       = "configmap-data"
	flagEnablePodLabels     = "kubernetes-enable-pod-labels"
	flagPodLabelAllowlist   = "kubernetes-pod-label-allowlist-regex"
	flagGPUIDType           = "kubernetes-gpu-id-type"
	flagVirtualGPUs         = "kubernetes-virtual-gpus"
	flagDRA                 = "kubernetes-enable-dra"
	flagFakeGPUs            = "fake-gpus"
	flagDebug               = "debug"
	flagEnableDCGMLog       = "enable-dcgm-log"
	flagDCGMLogLevel        = "dcgm-log-level"
	flagDumpEnabled         = "dump-enabled"
	flagDumpDirectory       = "dump-directory"
	flagDumpRetention       = "dump-retention"
	flagDumpCompression     = "dump-compression"
	flagDisableStartupCheck = "disable-startup-validate"
	flagBindUnbindWatch     = "enable-gpu-bind-unbind-watch"
	flagBindUnbindPoll      = "gpu-bind-unbind-poll-interval"
	flagEnablePprof         = "enable-pprof"
	flagWebSystemdSocket    = "web-systemd-socket"
	// flagComputeInstances is gpuscope's own: dcgm-exporter's device
	// options have no form that selects MIG compute instances.
	flagComputeInstances     = "mig-compute-instances"
	undefinedConfigMapData   = "none" // dcgm-exporter's "not set" value of -m
	gpuIDTypeUID             = "uid"
	gpuIDTypeDeviceName      = "device-name"
	defaultDCGMLogLevel      = "NONE"
	defaultBindUnbindPolling = time.Second
)

// dcgmLogLevels are the values dcgm-exporter accepts for --dcgm-log-level
// (pkg/cmd/const.go, DCGMDbgLvlValues).
var dcgmLogLevels = []string{"NONE", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "VERB"}

func dcgmExporterFlags() []cli.Flag {
	deviceUsage := "which %s to export, in dcgm-exporter's syntax: f (flexible: %s), g (every %s), g:<id>[,<id>|<from>-<to>...] (these %s), i (every %s) or i:<id>,... (these %s)"
	return []cli.Flag{
		&cli.StringFlag{Name: flagDevices, Aliases: []string{"d"}, Value: "f", EnvVars: env("GPUSCOPE_DEVICES", "DCGM_EXPORTER_DEVICES_STR"),
			Usage: fmt.Sprintf(deviceUsage, "GPUs and MIG instances", "GPUs without MIG and the GPU instances of MIG GPUs", "GPU", "GPU indexes", "MIG GPU instance", "GPU instances, numbered across the node from 0")},
		&cli.StringFlag{Name: flagSwitchDevices, Aliases: []string{"s"}, Value: "f", EnvVars: env("GPUSCOPE_SWITCH_DEVICES", "DCGM_EXPORTER_OTHER_DEVICES_STR"),
			Usage: fmt.Sprintf(deviceUsage, "NvSwitches and their links", "every switch and link", "NvSwitch, without links", "switch IDs", "link of a watched switch", "link indexes")},
		&cli.StringFlag{Name: flagCPUDevices, Aliases: []string{"p"}, Value: "f", EnvVars: env("GPUSCOPE_CPU_DEVICES", "DCGM_EXPORTER_CPU_DEVICES_STR"),
			Usage: fmt.Sprintf(deviceUsage, "CPUs and cores", "every CPU and core", "CPU", "CPU IDs", "core", "core IDs")},
		&cli.BoolFlag{Name: flagOldNamespace, Aliases: []string{"o"}, EnvVars: env("GPUSCOPE_USE_OLD_NAMESPACE", "DCGM_EXPORTER_USE_OLD_NAMESPACE"),
			Usage: "dcgm-exporter 1.x label names: uuid, pod_name, pod_namespace, container_name (the 1.x metric names come from its counters file)"},
		&cli.BoolFlag{Name: flagNoHostname, Aliases: []string{"n"}, EnvVars: env("GPUSCOPE_NO_HOSTNAME", "DCGM_EXPORTER_NO_HOSTNAME"),
			Usage: "leave the Hostname label out"},
		&cli.BoolFlag{Name: flagReplaceBlanks, Aliases: []string{"rbmn"}, EnvVars: env("GPUSCOPE_REPLACE_BLANKS_IN_MODEL_NAME", "DCGM_EXPORTER_REPLACE_BLANKS_IN_MODEL_NAME"),
			Usage: "write the modelName label with dashes for spaces (NVIDIA-H100-80GB-HBM3)"},
		&cli.StringFlag{Name: flagConfigMapData, Aliases: []string{"m"}, Value: undefinedConfigMapData, EnvVars: env("GPUSCOPE_CONFIGMAP_DATA", "DCGM_EXPORTER_CONFIGMAP_DATA"),
			Usage: "read the counters once, at start, from the 'metrics' key of this ConfigMap, as namespace:name, through the API server (needs get on configmaps); none: use --collectors"},
		&cli.BoolFlag{Name: flagEnablePodLabels, EnvVars: env("GPUSCOPE_KUBERNETES_ENABLE_POD_LABELS", "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS"),
			Usage: "with --kubernetes, copy the labels of each GPU's pod onto its series (all, or those --kubernetes-pod-label-allowlist-regex selects); the same as --kubernetes.pod-labels=.*"},
		&cli.StringSliceFlag{Name: flagPodLabelAllowlist, EnvVars: env("GPUSCOPE_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX", "DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX"),
			Usage: "with --kubernetes-enable-pod-labels, copy only the pod labels whose key one of these regular expressions matches (anywhere in the key, as dcgm-exporter matches)"},
		&cli.StringFlag{Name: flagGPUIDType, Value: gpuIDTypeUID, EnvVars: env("GPUSCOPE_KUBERNETES_GPU_ID_TYPE", "DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE"),
			Usage: "how the device plugin names GPUs to the kubelet: uid (GPU-<uuid>) or device-name (nvidia0); gpuscope recognises both forms either way, and checks the value"},
		&cli.BoolFlag{Name: flagVirtualGPUs, EnvVars: env("GPUSCOPE_KUBERNETES_VIRTUAL_GPUS", "KUBERNETES_VIRTUAL_GPUS"),
			Usage: "dcgm-exporter's one copy of each series per pod sharing a GPU; see docs/migrating-from-dcgm-exporter.md"},
		&cli.BoolFlag{Name: flagDRA, EnvVars: env("GPUSCOPE_KUBERNETES_ENABLE_DRA", "KUBERNETES_ENABLE_DRA"),
			Usage: "pod labels for GPUs allocated through DRA ResourceClaims; see docs/migrating-from-dcgm-exporter.md"},
		&cli.BoolFlag{Name: flagFakeGPUs, EnvVars: env("GPUSCOPE_FAKE_GPUS", "DCGM_EXPORTER_USE_FAKE_GPUS"),
			Usage: "serve simulated GPUs: the same as --source=sim"},
		&cli.BoolFlag{Name: flagDebug, EnvVars: env("GPUSCOPE_DEBUG", "DCGM_EXPORTER_DEBUG"),
			Usage: "log at debug level: the same as --log-level=debug"},
		&cli.BoolFlag{Name: flagEnableDCGMLog, EnvVars: env("GPUSCOPE_ENABLE_DCGM_LOG", "DCGM_EXPORTER_ENABLE_DCGM_LOG"),
			Usage: "write the embedded host engine's own log to standard error, at --dcgm-log-level"},
		&cli.StringFlag{Name: flagDCGMLogLevel, Value: defaultDCGMLogLevel, EnvVars: env("GPUSCOPE_DCGM_LOG_LEVEL", "DCGM_EXPORTER_DCGM_LOG_LEVEL"),
			Usage: "level of the embedded host engine's log: " + strings.Join(dcgmLogLevels, ", ")},
		&cli.BoolFlag{Name: flagDumpEnabled, EnvVars: env("GPUSCOPE_DUMP_ENABLED", "DCGM_EXPORTER_DUMP_ENABLED"),
			Usage: "write a debug dump of the entities and the exposition, as JSON, every minute to --dump-directory"},
		&cli.StringFlag{Name: flagDumpDirectory, Value: "/tmp/dcgm-exporter-debug", EnvVars: env("GPUSCOPE_DUMP_DIRECTORY", "DCGM_EXPORTER_DUMP_DIRECTORY"),
			Usage: "directory of the debug dumps"},
		&cli.IntFlag{Name: flagDumpRetention, Value: 24, EnvVars: env("GPUSCOPE_DUMP_RETENTION", "DCGM_EXPORTER_DUMP_RETENTION"),
			Usage: "hours the debug dumps are kept (0: until the 1440 most recent)"},
		&cli.BoolFlag{Name: flagDumpCompression, Value: true, EnvVars: env("GPUSCOPE_DUMP_COMPRESSION", "DCGM_EXPORTER_DUMP_COMPRESSION"),
			Usage: "gzip the debug dumps"},
		&cli.BoolFlag{Name: flagDisableStartupCheck, EnvVars: env("GPUSCOPE_DISABLE_STARTUP_VALIDATE", "DISABLE_STARTUP_VALIDATE"),
			Usage: "dcgm-exporter's switch for its startup checks; gpuscope runs none that stop it, so there is nothing to disable"},
		&cli.BoolFlag{Name: flagBindUnbindWatch, EnvVars: env("GPUSCOPE_ENABLE_GPU_BIND_UNBIND_WATCH", "DCGM_EXPORTER_ENABLE_GPU_BIND_UNBIND_WATCH"),
			Usage: "dcgm-exporter's watch for GPUs bound to or unbound from the driver; see docs/migrating-from-dcgm-exporter.md"},
		&cli.StringFlag{Name: flagBindUnbindPoll, Value: defaultBindUnbindPolling.String(), EnvVars: env("GPUSCOPE_GPU_BIND_UNBIND_POLL_INTERVAL", "DCGM_EXPORTER_GPU_BIND_UNBIND_POLL_INTERVAL"),
			Usage: "poll interval of the bind/unbind watch, a Go duration"},
		&cli.BoolFlag{Name: flagEnablePprof, EnvVars: env("GPUSCOPE_ENABLE_PPROF", "DCGM_EXPORTER_ENABLE_PPROF"),
			Usage: "serve Go's pprof profiles under /debug/pprof/ on the metrics port"},
		&cli.BoolFlag{Name: flagComputeInstances, EnvVars: env("GPUSCOPE_MIG_COMPUTE_INSTANCES"),
			Usage: "also export MIG compute instances (GPU_CI_ID label), with -d f; dcgm-exporter never does"},
		&cli.BoolFlag{Name: flagWebSystemdSocket, EnvVars: env("GPUSCOPE_WEB_SYSTEMD_SOCKET", "DCGM_EXPORTER_SYSTEMD_SOCKET"),
			Usage: "serve on the socket systemd passes in (socket activation) instead of --address"},
	}
}

// dcgmExporterConfig is what dcgm-exporter's own flags set.
type dcgmExporterConfig struct {
	Devices                  devsel.Selector
	OldNamespace             bool
	NoHostname               bool
	ReplaceBlanksInModelName bool
	// ConfigMap is namespace and name, empty when -m is none.
	ConfigMapNamespace, ConfigMapName string
	// PodLabels is the --kubernetes.pod-labels expression that
	// --kubernetes-enable-pod-labels and its allowlist amount to ("" when off).
	PodLabels       string
	GPUIDType       string
	VirtualGPUs     bool
	DRA             bool
	FakeGPUs        bool
	Debug           bool
	EnableDCGMLog   bool
	DCGMLogLevel    string
	Dump            dumpConfig
	DisableStartup  bool
	BindUnbindWatch bool
	BindUnbindPoll  time.Duration
	Pprof           bool
	SystemdSocket   bool
	// ComputeInstances is --mig-compute-instances.
	ComputeInstances bool
}

type dumpConfig struct {
	Enabled     bool
	Directory   string
	Retention   int
	Compression bool
}

// parseDCGMExporterFlags reads and checks dcgm-exporter's flags. Its errors
// name the flag, the bad value and the accepted forms.
func parseDCGMExporterFlags(c *cli.Context) (*dcgmExporterConfig, error) {
	cfg := &dcgmExporterConfig{
		OldNamespace:             c.Bool(flagOldNamespace),
		NoHostname:               c.Bool(flagNoHostname),
		ReplaceBlanksInModelName: c.Bool(flagReplaceBlanks),
		GPUIDType:                c.String(flagGPUIDType),
		VirtualGPUs:              c.Bool(flagVirtualGPUs),
		DRA:                      c.Bool(flagDRA),
		FakeGPUs:                 c.Bool(flagFakeGPUs),
		Debug:                    c.Bool(flagDebug),
		EnableDCGMLog:            c.Bool(flagEnableDCGMLog),
		DCGMLogLevel:             c.String(flagDCGMLogLevel),
		Dump: dumpConfig{
			Enabled: c.Bool(flagDumpEnabled), Directory: c.String(flagDumpDirectory),
			Retention: c.Int(flagDumpRetention), Compression: c.Bool(flagDumpCompression),
		},
		DisableStartup:  c.Bool(flagDisableStartupCheck),
		BindUnbindWatch: c.Bool(flagBindUnbindWatch),
		Pprof:           c.Bool(flagEnablePprof),
		SystemdSocket:   c.Bool(flagWebSystemdSocket),

		ComputeInstances: c.Bool(flagComputeInstances),
	}
	var err error
	for _, d := range []struct {
		flag string
		dst  *devsel.Options
	}{{flagDevices, &cfg.Devices.GPUs}, {flagSwitchDevices, &cfg.Devices.Switches}, {flagCPUDevices, &cfg.Devices.CPUs}} {
		if *d.dst, err = devsel.Parse(d.flag, c.String(d.flag)); err != nil {
			return nil, err
		}
	}
	if m := c.String(flagConfigMapData); m != undefinedConfigMapData && m != "" {
		// dcgm-exporter's readConfigMap (internal/pkg/counters/counter_config.go)
		// splits on ':' into exactly two parts.
		ns, name, ok := strings.Cut(m, ":")
		if !ok || ns == "" || name == "" || strings.Contains(name, ":") {
			return nil, fmt.Errorf("--%s %q: use namespace:name, or none", flagConfigMapData, m)
		}
		cfg.ConfigMapNamespace, cfg.ConfigMapName = ns, name
	}
	if cfg.GPUIDType != gpuIDTypeUID && cfg.GPUIDType != gpuIDTypeDeviceName {
		return nil, fmt.Errorf("--%s %q: use %s or %s", flagGPUIDType, cfg.GPUIDType, gpuIDTypeUID, gpuIDTypeDeviceName)
	}
	// dcgm-exporter: contextToConfig refuses a level outside DCGMDbgLvlValues.
	if !slices.Contains(dcgmLogLevels, cfg.DCGMLogLevel) {
		return nil, fmt.Errorf("--%s %q: use one of %s", flagDCGMLogLevel, cfg.DCGMLogLevel, strings.Join(dcgmLogLevels, ", "))
	}
	// dcgm-exporter falls back to 1s on a bad interval (parseDuration);
	// gpuscope says so instead of guessing.
	cfg.BindUnbindPoll = defaultBindUnbindPolling
	if s := c.String(flagBindUnbindPoll); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("--%s %q: use a positive Go duration such as 1s or 500ms", flagBindUnbindPoll, s)
		}
		cfg.BindUnbindPoll = d
	}
	if c.Bool(flagEnablePodLabels) {
		expr, err := podLabelExpr(c.StringSlice(flagPodLabelAllowlist))
		if err != nil {
			return nil, err
		}
		cfg.PodLabels = expr
	} else if len(c.StringSlice(flagPodLabelAllowlist)) > 0 {
		return nil, fmt.Errorf("--%s needs --%s: the allowlist filters the pod labels that flag copies", flagPodLabelAllowlist, flagEnablePodLabels)
	}
	return cfg, nil
}

// podLabelExpr turns dcgm-exporter's allowlist (any pattern matching
// anywhere in the key keeps the label; none means every label:
// internal/pkg/transformation/kubernetes.go, shouldIncludeLabel) into the
// whole-key expression of --kubernetes.pod-labels.
func podLabelExpr(patterns []string) (string, error) {
	if len(patterns) == 0 {
		return ".*", nil
	}
	alts := make([]string, 0, len(patterns))
	for _, p := range patterns {
		if _, err := regexp.Compile(p); err != nil {
			return "", fmt.Errorf("--%s %q: not a regular expression: %w", flagPodLabelAllowlist, p, err)
		}
		alts = append(alts, ".*(?:"+p+").*")
	}
	return strings.Join(alts, "|"), nil
}

// applyDCGMExporterFlags turns dcgm-exporter's flags that have a gpuscope
// equivalent into it, before anything reads the equivalent.
func applyDCGMExporterFlags(c *cli.Context, cfg *dcgmExporterConfig) error {
	if cfg.FakeGPUs {
		if c.IsSet(flagSource) && c.String(flagSource) != "sim" {
			return fmt.Errorf("--%s serves simulated GPUs, but --%s is %s", flagFakeGPUs, flagSource, c.String(flagSource))
		}
		if err := c.Set(flagSource, "sim"); err != nil {
			return err
		}
	}
	if cfg.Debug && !c.IsSet(flagLogLevel) {
		if err := c.Set(flagLogLevel, "debug"); err != nil {
			return err
		}
	}
	if cfg.PodLabels != "" {
		if c.IsSet(flagPodLabels) {
			return fmt.Errorf("--%s and --%s both choose pod labels; give one", flagEnablePodLabels, flagPodLabels)
		}
		if err := c.Set(flagPodLabels, cfg.PodLabels); err != nil {
			return err
		}
	}
	// dcgm-exporter sets these before an embedded host engine starts
	// (internal/pkg/dcgmprovider/dcgm.go); DCGM reads them at start.
	if cfg.EnableDCGMLog {
		if err := os.Setenv("__DCGM_DBG_FILE", "-"); err != nil {
			return err
		}
		if err := os.Setenv("__DCGM_DBG_LVL", cfg.DCGMLogLevel); err != nil {
			return err
		}
	}
	return nil
}

// warnUnsupported logs once, at startup, each dcgm-exporter option that is
// accepted but changes nothing here, and why.
func warnUnsupported(log *logrus.Entry, cfg *dcgmExporterConfig) {
	warn := func(flag, why string) { log.WithField("flag", "--"+flag).Warn(why) }
	if cfg.DisableStartup {
		warn(flagDisableStartupCheck, "gpuscope runs no startup validation that could stop it, so there is nothing to disable")
	}
	if cfg.ComputeInstances && !cfg.Devices.GPUs.Flex {
		warn(flagComputeInstances, "compute instances are exported with -d f only: g and i select GPUs and GPU instances, as in dcgm-exporter")
	}
	if len(cfg.Devices.CPUs.Major)+len(cfg.Devices.CPUs.Minor) > 0 || cfg.Devices.CPUs.AllMajor || cfg.Devices.CPUs.AllMinor {
		warn(flagCPUDevices, "only the DCGM source reads CPUs and CPU cores (when the counters file has CPU fields); with NVML or the sim there is nothing to select")
	}
}

// dumpInterval is how often a debug dump is written. dcgm-exporter writes one
// at every scrape; a timer keeps the count independent of the scrapers.
const dumpInterval = time.Minute

// startDumps writes --dump-enabled's debug dumps in the background.
func startDumps(ctx context.Context, dx *dcgmExporterConfig, eng *engine.Engine, sourceName string, log *logrus.Entry) error {
	if !dx.Dump.Enabled {
		return nil
	}
	if dx.Dump.Retention < 0 {
		return usage(fmt.Errorf("--%s %d: use 0 or more hours", flagDumpRetention, dx.Dump.Retention))
	}
	d, err := dump.New(dump.Config{
		Dir: dx.Dump.Directory, Retention: time.Duration(dx.Dump.Retention) * time.Hour, Compress: dx.Dump.Compression,
		Interval: dumpInterval, Log: log.WithField("component", "dump"),
	}, func() any {
		return map[string]any{
			"time": time.Now().UTC(), "source": sourceName, "version": version.Version,
			"entities": eng.Entities(), "exposition": string(eng.Render(nil)),
		}
	})
	if err != nil {
		return fmt.Errorf("--%s: %w", flagDumpDirectory, err)
	}
	log.WithFields(logrus.Fields{"directory": dx.Dump.Directory, "interval": dumpInterval, "retention_hours": dx.Dump.Retention}).Info("Writing debug dumps")
	go d.Run(ctx)
	return nil
}
