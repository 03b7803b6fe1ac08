package config

import (
	"time"

	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/internal/enrich/kube/podattr"
	"github.com/gpuscope/gpuscope/internal/serve/server"
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/sim"
)

// Input is the command line as given: each flag's value in the type its
// flag declares, before parsing and checks. Build turns it into a Config.
type Input struct {
	Collectors, Address, CollectInterval, Source string
	Window                                       time.Duration
	WebConfigFile, LogFormat, LogLevel           string
	Hostname, HostnameLabel                      string
	ReloadPoll                                   time.Duration
	XIDWindow, ClockEventsWindow                 string
	DCGMMode, DCGMRemote                         string

	Kubernetes, PodUIDLabel, SharedGPUAttribution bool
	PodResourcesSocket, ProcRoot, PodLabels       string
	ResourceNames                                 []string
	K8sRefresh, K8sLabelGrace                     time.Duration
	HPCJobDir                                     string

	SimGPUs, SimNVLinks, SimSharedGPUs int
	SimModel, SimMIG, SimWorkload      string
	SimScenario, SimClock, SimMIGGPUs  string
	SimSeed                            int64
	SimEventRate                       float64
	SimPods                            bool

	Insight       bool
	InsightWindow time.Duration

	NativeHistograms bool

	Processes          bool
	ProcessesMaxPerGPU int

	EnableProfilingAPI            bool
	MaxConnections, APIMaxStreams int
	DisableExporterMetrics        bool
	APIMaxRequests, APIMaxBytes   int

	// dcgm-exporter's flags.
	Devices, SwitchDevices, CPUDevices      string
	OldNamespace, NoHostname, ReplaceBlanks bool
	ConfigMapData                           string
	EnablePodLabels                         bool
	PodLabelAllowlist                       []string
	GPUIDType                               string
	VirtualGPUs, DRA, FakeGPUs, Debug       bool
	EnableDCGMLog                           bool
	DCGMLogLevel                            string
	DumpEnabled, DumpCompression            bool
	DumpDirectory                           string
	DumpRetention                           int
	DisableStartupValidate                  bool
	BindUnbindWatch                         bool
	BindUnbindPoll                          string
	Pprof, SystemdSocket, ComputeInstances  bool

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

// Defaults is what each flag means when it is not given. Flag declarations
// show these values; where a library has a default of its own, this is it.
func Defaults() Input {
	s := sim.DefaultConfig()
	return Input{
		Address:            ":9400",
		CollectInterval:    "1s",
		Source:             string(SourceAuto),
		Window:             engine.DefaultWindow,
		LogFormat:          string(LogText),
		LogLevel:           "info",
		HostnameLabel:      engine.DefaultHostnameLabel,
		ReloadPoll:         5 * time.Second,
		XIDWindow:          engine.DefaultEventWindow.String(),
		ClockEventsWindow:  engine.DefaultEventWindow.String(),
		DCGMMode:           string(dcgm.ModeEmbedded),
		PodResourcesSocket: podattr.DefaultSocket,
		ProcRoot:           podattr.DefaultProcRoot,
		K8sRefresh:         podattr.DefaultRefreshInterval,
		SimGPUs:            s.GPUs,
		SimNVLinks:         -1,
		SimModel:           s.Model,
		SimWorkload:        sim.Mixed,
		SimClock:           string(SimClockReal),
		SimSeed:            1,
		SimEventRate:       s.EventRate,
		InsightWindow:      engine.DefaultInsightWindow,
		NativeHistograms:   true,
		ProcessesMaxPerGPU: engine.DefaultMaxProcessesPerGPU,
		MaxConnections:     server.DefaultMaxConnections,
		APIMaxStreams:      server.DefaultMaxStreams,
		APIMaxRequests:     server.DefaultMaxRequests,
		APIMaxBytes:        server.DefaultMaxResponseBytes,
		Devices:            "f",
		SwitchDevices:      "f",
		CPUDevices:         "f",
		ConfigMapData:      UndefinedConfigMap,
		GPUIDType:          string(GPUIDUID),
		DCGMLogLevel:       DefaultDCGMLogLevel,
		DumpDirectory:      "/tmp/dcgm-exporter-debug",
		DumpRetention:      24,
		DumpCompression:    true,
		BindUnbindPoll:     DefaultBindUnbindPoll.String(),
	}
}
