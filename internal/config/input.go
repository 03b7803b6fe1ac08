package config

import (
	"time"

	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/internal/enrich/kube/podattr"
	"github.com/gpuscope/gpuscope/internal/serve/server"
)

// Input is the command line as given: each flag's value in the type its
// flag declares, before parsing and checks. Build turns it into a Config.
type Input struct {
	Collectors, CollectInterval, Source string
	Window                              time.Duration
	LogFormat, LogLevel                 string
	Hostname                            string
	ReloadPoll                          time.Duration
	XIDWindow, ClockEventsWindow        string
	DCGMMode, DCGMRemote                string
	DCGMConnectTimeout                  time.Duration

	Kubernetes           bool
	PodLabels, HPCJobDir string

	SimGPUs, SimNVLinks, SimSharedGPUs int
	SimModel, SimMIG, SimWorkload      string
	SimScenario, SimClock, SimMIGGPUs  string
	SimSeed                            int64
	SimEventRate                       float64
	SimPods                            bool

	NativeHistograms bool

	DisableExporterMetrics bool

	// dcgm-exporter's flags.
	Devices, SwitchDevices, CPUDevices string
	NoHostname                         bool
	ConfigMapData                      string
	EnablePodLabels                    bool
	PodLabelAllowlist                  []string
	GPUIDType                          string
	DRA, FakeGPUs, Debug               bool
	EnableDCGMLog                      bool
	DCGMLogLevel                       string
	DumpEnabled, DumpCompression       bool
	DumpDirectory                      string
	DumpRetention                      int
	DisableStartupValidate             bool
	BindUnbindWatch                    bool
	BindUnbindPoll                     string

	// dcgm-exporter's flags after 4.8.2.
	ConfigFile                               string
	EnableExporterMetrics, HealthRequireGPUs bool
	WatchMaxKeepAge                          time.Duration
	WatchMaxKeepSamples                      int64
	ContainerLabels                          bool
	ContainerRuntimeSocket                   string

	// Engine and Web hold the engine's and the HTTP server's options that
	// flags set as they are (an option binds to its field); cmd/gpuscope
	// adds the rest.
	Engine engine.Options
	Web    server.Options
	// PodAttr holds the kubelet pod attribution's options that flags set
	// as they are.
	PodAttr podattr.Config

	// Given holds the flags given on the command line or through a
	// variable, by first name, each with the name messages call it by:
	// the long name the user typed ("--remote-hostengine-info"), else the
	// flag's first name.
	Given map[string]string
}

// Values of dcgm-exporter's flags that gpuscope checks.
const (
	// UndefinedConfigMap is dcgm-exporter's "not set" value of -m.
	UndefinedConfigMap = "none"
	// DefaultBindUnbindPoll is dcgm-exporter's interval of the bind/unbind
	// watch.
	DefaultBindUnbindPoll = time.Second
	// DefaultDCGMLogLevel is dcgm-exporter's level of the host engine's log.
	DefaultDCGMLogLevel = "NONE"
)

// DCGMLogLevels are the values dcgm-exporter accepts for --dcgm-log-level
// (pkg/cmd/const.go, DCGMDbgLvlValues).
var DCGMLogLevels = []string{"NONE", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "VERB"}
