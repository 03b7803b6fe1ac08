// Package config is gpuscope's one serving configuration: typed values
// built from the command line, with every default and every check in one
// place, and errors that name the flag the user gave.
package config

import (
	"regexp"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/internal/config/devsel"
	"github.com/gpuscope/gpuscope/internal/config/exporteryaml"
	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/internal/enrich/kube/configmap"
	"github.com/gpuscope/gpuscope/internal/enrich/kube/podattr"
	"github.com/gpuscope/gpuscope/internal/serve/server"
	"github.com/gpuscope/gpuscope/source/auto"
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/nvml"
	"github.com/gpuscope/gpuscope/source/sim"
)

// Source names where GPU data comes from.
type Source string

// The sources the configuration itself tells apart; --source accepts every
// registered one (source.Lookup).
const (
	SourceAuto Source = auto.Name
	SourceDCGM Source = dcgm.Name
	SourceNVML Source = nvml.Name
	SourceSim  Source = sim.Name
)

// LogFormat is how log lines are written.
type LogFormat string

// The log formats --log-format accepts.
const (
	LogText LogFormat = "text"
	LogJSON LogFormat = "json"
)

// GPUIDType is how the device plugin names GPUs to the kubelet.
type GPUIDType string

// The values of --kubernetes-gpu-id-type.
const (
	GPUIDUID        GPUIDType = "uid"
	GPUIDDeviceName GPUIDType = "device-name"
)

// Config is a checked serving configuration.
type Config struct {
	Source     Source
	Counters   Counters
	Collection Collection
	Labels     Labels
	Log        Log
	DCGM       DCGM
	Sim        Sim
	Kubernetes Kubernetes
	// HPCJobDir is the directory of job-ID files; empty: off.
	HPCJobDir string
	// Web is the HTTP server's options that flags set as they are, each
	// bound to its field by its Option; the runtime ones (engine, handlers,
	// log) are added when the server starts.
	Web server.Options
	// DisableExporterMetrics leaves out the Go runtime's (go_*) and the
	// process's (process_*) families, as node_exporter's flag does.
	DisableExporterMetrics bool
	// HealthRequireGPUs makes /health fail while no GPU is seen.
	HealthRequireGPUs bool
	Dump              Dump
	// ConfigFile is dcgm-exporter's YAML configuration the values came
	// from where no flag was given; empty: none.
	ConfigFile string
	// Engine is the engine's options that flags set as they are, each
	// bound to its field by its Option; the runtime ones (source, counters,
	// clock, log) are added when the engine starts.
	Engine engine.Options
	// DisableStartupValidate is dcgm-exporter's switch for checks gpuscope
	// does not run; it only earns a warning.
	DisableStartupValidate bool
	// Warnings are the values accepted as dcgm-exporter accepts them but
	// changed or ignored, each to be logged once at start.
	Warnings []Warning

	// given names each flag given, for messages; bad holds the flags whose
	// value did not parse, so that Validate does not report them twice.
	given map[string]string
	bad   map[string]bool
}

// Warning is one accepted value that gpuscope changes or ignores.
type Warning struct {
	// Flag names the flag as the user gave it.
	Flag    string
	Message string
}

// Counters says where the counters come from.
type Counters struct {
	// File is the counters CSV; empty: the built-in set.
	File string
	// ConfigMap, when set, is read once at start instead of File.
	ConfigMap *configmap.Ref
	// ReloadPoll is how often File is checked for changes; 0: only SIGHUP.
	ReloadPoll time.Duration
}

// Collection is how and what the sources sample.
type Collection struct {
	// DefaultInterval is the watch interval of fields whose line has none.
	DefaultInterval time.Duration
	// Window is the span of the window statistics.
	Window            time.Duration
	XIDWindow         time.Duration
	ClockEventsWindow time.Duration
	// ClockEventsPeriod is the period DCGM_EXP_CLOCK_EVENTS_COUNT counts
	// samples at: dcgm-exporter samples the field every -c.
	ClockEventsPeriod time.Duration
	Devices           devsel.Selector
	// NativeHistograms serves a native histogram of every field with
	// window statistics to scrapers that negotiate protobuf.
	NativeHistograms bool
	// BindUnbindPoll is how often the sources look for GPUs bound to or
	// unbound from the driver; 0 when the watch is off.
	BindUnbindPoll time.Duration
	// WatchMaxKeepAge and WatchMaxKeepSamples are dcgm-exporter's field
	// watch retention; gpuscope keeps its own rings and only checks them.
	WatchMaxKeepAge     time.Duration
	WatchMaxKeepSamples int64
	// WatchGroups are --config-file's groups of fields at their own
	// interval, applied to every counters set read.
	WatchGroups exporteryaml.WatchGroups
}

// Labels shapes the identity labels.
type Labels struct {
	// Hostname is the Hostname label's value: the one given, else the
	// remote host engine's host outside Kubernetes, else the host name.
	// HostnameGiven says it was given (the node name in Kubernetes).
	Hostname      string
	HostnameGiven bool
}

// Log is the logging setup.
type Log struct {
	Format LogFormat
	Level  logrus.Level
}

// DCGM is how the host engine is reached.
type DCGM struct {
	// Mode is resolved: remote when only a host engine address is given.
	Mode             dcgm.Mode
	RemoteHostengine string
	// ConnectTimeout bounds a connect; 0: the mode's default
	// (dcgm.DefaultConnectTimeout).
	ConnectTimeout time.Duration
	// HostEngineLogLevel, when set, is the level the embedded host engine
	// logs at to standard error (--enable-dcgm-log).
	HostEngineLogLevel string
	// AcceptFakeGPUs keeps a GPU whose identity the host engine cannot
	// read (DCGM's fake GPUs) as fake<ID>, as dcgm-exporter's --fake-gpus.
	AcceptFakeGPUs bool
}

// Sim configures the simulated GPUs.
type Sim struct {
	GPUs int
	// NVLinks per GPU; negative: the model's.
	NVLinks, SharedGPUs int
	Model, MIG          string
	// MIGGPUs are the GPUs in MIG mode; nil puts all of them in it.
	MIGGPUs   []int
	Seed      int64
	EventRate float64
	Pods      bool
	// Workloads is the workload of each GPU; nil leaves the choice to
	// the sim (MIG instances run their own training jobs).
	Workloads []sim.Workload
	// Scenario names one of sim.Scenarios, which lays out the node, its
	// pods and its HPC jobs; empty for none.
	Scenario string
	// Clock is the clock the sim and the engine run on.
	Clock SimClock
}

// SimClock is the clock of a simulated node.
type SimClock string

const (
	// SimClockReal is the wall clock.
	SimClockReal SimClock = "real"
	// SimClockManual stands still at the Unix epoch until POST
	// /api/v1/sim/advance moves it (package simclock).
	SimClockManual SimClock = "manual"
)

// Kubernetes is pod attribution.
type Kubernetes struct {
	Enabled bool
	// PodAttr is the pod attribution's options that flags set as they
	// are, each bound to its field by its Option; the runtime ones
	// (entities, processes, DRA devices, pod labels, log) are added when
	// it starts.
	PodAttr   podattr.Config
	DRA       bool
	GPUIDType GPUIDType
	// PodLabels is nil when no pod labels are copied.
	PodLabels *PodLabels
}

// PodLabels selects the pod labels copied onto series.
type PodLabels struct {
	// Expr is the whole-key expression; Allowlist is it compiled.
	Expr      string
	Allowlist *regexp.Regexp
	// Flag is the flag that chose them, for messages.
	Flag string
}

// Dump is the debug dumps of --dump-enabled.
type Dump struct {
	Enabled   bool
	Directory string
	// Retention is how long dumps are kept; 0: until the most recent ones.
	Retention time.Duration
	Compress  bool
}

// Flag is how messages name a flag: as the user gave it, else by its
// first name.
func (c *Config) Flag(name string) string {
	if n, ok := c.given[name]; ok && n != "" {
		return n
	}
	return "--" + name
}

// Given says whether the flag was given, on the command line or through a
// variable.
func (c *Config) Given(name string) bool {
	_, ok := c.given[name]
	return ok
}
