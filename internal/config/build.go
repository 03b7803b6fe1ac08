package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/config/devsel"
	"github.com/gpuscope/gpuscope/internal/config/exporteryaml"
	"github.com/gpuscope/gpuscope/internal/enrich/kube/configmap"
	"github.com/gpuscope/gpuscope/internal/enrich/kube/podlabels"
	"github.com/gpuscope/gpuscope/source"
	_ "github.com/gpuscope/gpuscope/source/all" // the sources --source names
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/sim"
)

// Build parses the command line's values into a Config and checks it. The
// error lists every problem found, one per line, each naming its flag.
func Build(in Input) (*Config, error) {
	b := &builder{in: in, cfg: &Config{given: in.Given, bad: map[string]bool{}}}
	b.exporterYAML()
	b.sources()
	b.counters()
	b.collection()
	b.labels()
	b.logging()
	b.dcgm()
	b.sim()
	b.kubernetes()
	b.serving()
	b.exporter48()
	b.deprecated()
	errs := b.errs
	if err := b.cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return b.cfg, nil
}

// builder collects the problems of one Build.
type builder struct {
	in   Input
	cfg  *Config
	errs []error
	// yamlInterval and yamlWatch say that --config-file set the collect
	// interval and the watch retention.
	yamlInterval, yamlWatch bool
	// watchGroups are the YAML's groups of fields at their own interval.
	watchGroups exporteryaml.WatchGroups
}

// fail records a problem with flag's value.
func (b *builder) fail(flag string, err error) {
	b.cfg.bad[flag] = true
	b.errs = append(b.errs, err)
}

func (b *builder) flag(name string) string { return b.cfg.Flag(name) }

func (b *builder) sources() {
	c, in := b.cfg, b.in
	c.Source = Source(in.Source)
	if _, ok := source.Lookup(in.Source); !ok {
		b.fail(FlagSource, fmt.Errorf("%s %q: use %s", b.flag(FlagSource), in.Source, source.OneOf(source.Names())))
	}
	// dcgm-exporter's --fake-gpus reads the real host engine and keeps GPUs
	// whose identity it cannot read (internal/pkg/deviceinfo/
	// device_info.go, initializeGPUInfo); it never invents GPUs.
	c.DCGM.AcceptFakeGPUs = in.FakeGPUs
	if in.FakeGPUs && (c.Source == SourceNVML || c.Source == SourceSim) {
		b.warn(FlagFakeGPUs, fmt.Sprintf("only the DCGM source reads fake GPUs; with %s=%s it changes nothing (simulated GPUs are %s=sim)",
			b.flag(FlagSource), c.Source, b.flag(FlagSource)))
	}
}

// deprecated warns about each flag given by an earlier spelling.
func (b *builder) deprecated() {
	for _, o := range Options(&Input{}) {
		for _, old := range o.Deprecated {
			if b.cfg.given[o.Name] == "--"+old {
				b.warn(o.Name, fmt.Sprintf("is deprecated: use --%s (the same flag; its variable is unchanged)", o.Name))
			}
		}
	}
}

// warn records an accepted value that gpuscope changes or ignores.
func (b *builder) warn(flag, msg string) {
	b.cfg.Warnings = append(b.cfg.Warnings, Warning{Flag: b.flag(flag), Message: msg})
}

func (b *builder) counters() {
	c, in := b.cfg, b.in
	c.Counters = Counters{File: in.Collectors, ReloadPoll: in.ReloadPoll}
	if m := in.ConfigMapData; m != UndefinedConfigMap && m != "" {
		// dcgm-exporter's readConfigMap (internal/pkg/counters/counter_config.go)
		// splits on ':' into exactly two parts.
		ns, name, ok := strings.Cut(m, ":")
		if !ok || ns == "" || name == "" || strings.Contains(name, ":") {
			b.fail(FlagConfigMapData, fmt.Errorf("%s %q: use namespace:name, or none", b.flag(FlagConfigMapData), m))
			return
		}
		c.Counters.ConfigMap = &configmap.Ref{Namespace: ns, Name: name, Key: "metrics"}
	}
}

// interval reads an interval flag in the counters file's grammar (plain
// milliseconds, as dcgm-exporter's integer interval flags take, or a Go
// duration); it must be positive.
func (b *builder) interval(flag, s string) time.Duration {
	d, err := counters.ParseInterval(s)
	if err != nil {
		b.fail(flag, fmt.Errorf("%s %w", b.flag(flag), err))
		return 0
	}
	if d <= 0 {
		b.fail(flag, fmt.Errorf("%s %q: must be positive", b.flag(flag), strings.TrimSpace(s)))
	}
	return d
}

// DCGMExporterCollectInterval is dcgm-exporter's default -c.
const DCGMExporterCollectInterval = 30 * time.Second

// collectInterval reads --collect-interval. dcgm-exporter takes any
// integer (pkg/cmd/app.go: an IntFlag of milliseconds); below the 100ms
// gpuscope samples at most, the interval is raised to it with one warning
// rather than refused.
func (b *builder) collectInterval(s string) time.Duration {
	d, err := counters.ParseInterval(s)
	if err != nil {
		b.fail(FlagCollectInterval, fmt.Errorf("%s %w", b.flag(FlagCollectInterval), err))
		return 0
	}
	if d < counters.MinInterval {
		b.warn(FlagCollectInterval, fmt.Sprintf("%s is below the minimum %s; sampling every %s", d, counters.MinInterval, counters.MinInterval))
		d = counters.MinInterval
	}
	return d
}

func (b *builder) collection() {
	c, in := b.cfg, b.in
	c.Collection = Collection{
		DefaultInterval:   b.collectInterval(in.CollectInterval),
		Window:            in.Window,
		XIDWindow:         b.interval(FlagXIDWindow, in.XIDWindow),
		ClockEventsWindow: b.interval(FlagClockWindow, in.ClockEventsWindow),
		NativeHistograms:  in.NativeHistograms,
	}
	// dcgm-exporter counts the clock-event samples it took every -c (30 s
	// unless given: pkg/cmd/app.go); gpuscope's own default is faster.
	c.Collection.ClockEventsPeriod = DCGMExporterCollectInterval
	if c.Given(FlagCollectInterval) || b.yamlInterval {
		c.Collection.ClockEventsPeriod = c.Collection.DefaultInterval
	}
	for _, d := range []struct {
		flag, value string
		dst         *devsel.Options
	}{
		{FlagDevices, in.Devices, &c.Collection.Devices.GPUs},
		{FlagSwitchDevices, in.SwitchDevices, &c.Collection.Devices.Switches},
		{FlagCPUDevices, in.CPUDevices, &c.Collection.Devices.CPUs},
	} {
		o, err := devsel.Parse(d.value)
		if err != nil {
			b.fail(d.flag, fmt.Errorf("%s %w", b.flag(d.flag), err))
			continue
		}
		*d.dst = o
	}
	// dcgm-exporter falls back to 1s on a bad interval (parseDuration);
	// gpuscope says so instead of guessing.
	poll := DefaultBindUnbindPoll
	if s := in.BindUnbindPoll; s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			b.fail(FlagBindUnbindPoll, fmt.Errorf("%s %q: use a positive Go duration such as 1s or 500ms", b.flag(FlagBindUnbindPoll), s))
		}
		poll = d
	}
	if in.BindUnbindWatch {
		c.Collection.BindUnbindPoll = poll
	}
}

func (b *builder) labels() {
	c, in := b.cfg, b.in
	c.Labels = Labels{Hostname: in.Hostname, HostnameGiven: in.Hostname != ""}
	if in.NoHostname {
		// dcgm-exporter reads -n into its config and has used it nowhere
		// since 4.0.0 (pkg/cmd/app.go; internal/pkg/hostname): every
		// release writes the host label, so gpuscope does too.
		b.warn(FlagNoHostname, "is ignored, as dcgm-exporter 4.x ignores it: series keep the host label")
	}
	if c.Labels.Hostname == "" && in.DCGMRemote != "" && !in.Kubernetes {
		// Without Kubernetes the series describe the remote host engine's
		// machine (internal/pkg/hostname/hostname.go, GetHostname).
		c.Labels.Hostname = remoteHost(in.DCGMRemote)
	}
	if c.Labels.Hostname == "" {
		h, err := os.Hostname()
		if err != nil {
			b.fail(FlagHostname, fmt.Errorf("reading the host name (set %s): %w", b.flag(FlagHostname), err))
		}
		c.Labels.Hostname = h
	}
}

// remoteHost is the host part of a host engine address, or the address
// itself when it has no port, as dcgm-exporter's parseRemoteHostname reads
// it.
func remoteHost(addr string) string {
	addr = strings.TrimPrefix(addr, "tcp://")
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return host
}

func (b *builder) logging() {
	c, in := b.cfg, b.in
	c.Log.Format = LogFormat(in.LogFormat)
	if c.Log.Format != LogText && c.Log.Format != LogJSON {
		b.fail(FlagLogFormat, fmt.Errorf("%s %q: use text or json", b.flag(FlagLogFormat), in.LogFormat))
	}
	level := in.LogLevel
	if in.Debug && !c.Given(FlagLogLevel) {
		level = "debug"
	}
	lvl, err := logrus.ParseLevel(level)
	if err != nil {
		b.fail(FlagLogLevel, fmt.Errorf("%s %q: use debug, info, warn or error", b.flag(FlagLogLevel), level))
	}
	c.Log.Level = lvl
}

// dcgm resolves the DCGM mode: remote when an address is given without a
// mode.
func (b *builder) dcgm() {
	c, in := b.cfg, b.in
	c.DCGM.RemoteHostengine = b.hostengineAddress(in.DCGMRemote)
	c.DCGM.ConnectTimeout = in.DCGMConnectTimeout
	mode := in.DCGMMode
	if in.DCGMRemote != "" && !c.Given(FlagDCGMMode) {
		mode = string(dcgm.ModeRemote)
	}
	m, err := dcgm.ParseMode(mode)
	if err != nil {
		b.fail(FlagDCGMMode, fmt.Errorf("%s %q: %w", b.flag(FlagDCGMMode), mode, err))
	}
	c.DCGM.Mode = m
	// dcgm-exporter: contextToConfig refuses a level outside DCGMDbgLvlValues.
	if !slices.Contains(DCGMLogLevels, in.DCGMLogLevel) {
		b.fail(FlagDCGMLogLevel, fmt.Errorf("%s %q: use one of %s", b.flag(FlagDCGMLogLevel), in.DCGMLogLevel, strings.Join(DCGMLogLevels, ", ")))
	} else if in.EnableDCGMLog {
		c.DCGM.HostEngineLogLevel = in.DCGMLogLevel
	}
}

func (b *builder) sim() {
	c, in := b.cfg, b.in
	// Checked first: the workload and MIG lists are sized by it (-1
	// panicked in make), and the sim took 0 for its default of 8.
	if in.SimGPUs < 1 || in.SimGPUs > sim.MaxGPUs {
		b.fail(FlagSimGPUs, fmt.Errorf("%s %d: must be between 1 and %d", b.flag(FlagSimGPUs), in.SimGPUs, sim.MaxGPUs))
		return
	}
	c.Sim = Sim{GPUs: in.SimGPUs, NVLinks: in.SimNVLinks, SharedGPUs: in.SimSharedGPUs, Model: in.SimModel, MIG: in.SimMIG,
		Seed: in.SimSeed, EventRate: in.SimEventRate, Pods: in.SimPods}
	c.Sim.MIGGPUs = b.gpuList(FlagSimMIGGPUs, in.SimMIGGPUs, in.SimGPUs)
	if len(c.Sim.MIGGPUs) > 0 && in.SimMIG == "" {
		b.fail(FlagSimMIGGPUs, fmt.Errorf("%s %q needs %s, the layout of the GPUs in MIG mode", b.flag(FlagSimMIGGPUs), in.SimMIGGPUs, b.flag(FlagSimMIG)))
	}
	c.Sim.Clock = SimClock(in.SimClock)
	if c.Sim.Clock != SimClockReal && c.Sim.Clock != SimClockManual {
		b.fail(FlagSimClock, fmt.Errorf("%s %q: use %s or %s", b.flag(FlagSimClock), in.SimClock, SimClockReal, SimClockManual))
	}
	if c.Source != SourceSim {
		return
	}
	if in.SimScenario != "" {
		b.simScenario()
		return
	}
	// MIG instances each run their own training job unless a workload is
	// asked for: then one per instance.
	var w []sim.Workload
	var err error
	switch {
	case in.SimMIG == "":
		w, err = sim.ParseWorkloads(in.SimWorkload, in.SimGPUs)
	case c.Given(FlagSimWorkload) && c.Given(FlagSimMIGGPUs):
		err = fmt.Errorf("a workload per MIG instance needs every GPU in MIG mode; leave out %s or %s", b.flag(FlagSimMIGGPUs), b.flag(FlagSimWorkload))
	case c.Given(FlagSimWorkload):
		w, err = sim.ParseMIGWorkloads(in.SimWorkload, in.SimGPUs, in.SimModel, in.SimMIG)
	}
	if err != nil {
		b.fail(FlagSimWorkload, fmt.Errorf("%s: %w", b.flag(FlagSimWorkload), err))
	}
	c.Sim.Workloads = w
}

// gpuList reads a comma-separated list of the indexes of distinct GPUs of an
// n-GPU node.
func (b *builder) gpuList(flag, s string, n int) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		i, err := strconv.Atoi(f)
		switch {
		case err != nil || i < 0 || i >= n:
			b.fail(flag, fmt.Errorf("%s %q: %q is not a GPU of the node (0 to %d)", b.flag(flag), s, f, n-1))
			return nil
		case slices.Contains(out, i):
			b.fail(flag, fmt.Errorf("%s %q: GPU %d is given twice", b.flag(flag), s, i))
			return nil
		}
		out = append(out, i)
	}
	return out
}

// simScenario checks --sim-scenario: a known name, and none of the flags
// that shape the node, which the scenario lays out itself.
func (b *builder) simScenario() {
	c, in := b.cfg, b.in
	sc, err := sim.ScenarioByName(in.SimScenario)
	if err != nil {
		b.fail(FlagSimScenario, fmt.Errorf("%s: %w", b.flag(FlagSimScenario), err))
		return
	}
	c.Sim.Scenario = sc.Name
	c.Sim.GPUs = sc.GPUs()
	for _, f := range []string{FlagSimGPUs, FlagSimModel, FlagSimMIG, FlagSimMIGGPUs, FlagSimNVLinks, FlagSimPods, FlagSimSharedGPUs, FlagSimWorkload} {
		if c.Given(f) {
			b.fail(f, fmt.Errorf("%s with %s %s: the scenario lays out the node (GPUs, model, MIG, workloads, pods and jobs) itself; leave %s out",
				b.flag(f), b.flag(FlagSimScenario), sc.Name, b.flag(f)))
		}
	}
	// Random XIDs and ECC errors would raise alerts of their own; a
	// scenario shows its one trouble unless events are asked for.
	if !c.Given(FlagSimEventRate) {
		c.Sim.EventRate = 0
	}
}

func (b *builder) kubernetes() {
	c, in := b.cfg, b.in
	c.Kubernetes = Kubernetes{Enabled: in.Kubernetes, PodAttr: in.PodAttr, DRA: in.DRA, GPUIDType: GPUIDType(in.GPUIDType)}
	if c.Kubernetes.GPUIDType != GPUIDUID && c.Kubernetes.GPUIDType != GPUIDDeviceName {
		b.fail(FlagGPUIDType, fmt.Errorf("%s %q: use %s or %s", b.flag(FlagGPUIDType), in.GPUIDType, GPUIDUID, GPUIDDeviceName))
	}
	b.podLabels()
}

// podLabels resolves the pod-label selection, from --kubernetes-pod-labels
// or from dcgm-exporter's --kubernetes-enable-pod-labels and its allowlist.
func (b *builder) podLabels() {
	c, in := b.cfg, b.in
	expr, flag := in.PodLabels, FlagPodLabels
	switch {
	case in.EnablePodLabels && c.Given(FlagPodLabels):
		b.fail(FlagEnablePodLabels, fmt.Errorf("%s and %s both choose pod labels; give one", b.flag(FlagEnablePodLabels), b.flag(FlagPodLabels)))
		return
	case in.EnablePodLabels:
		e, err := allowlistExpr(in.PodLabelAllowlist)
		if err != nil {
			b.fail(FlagPodLabelAllowlist, fmt.Errorf("%s %w", b.flag(FlagPodLabelAllowlist), err))
			return
		}
		expr, flag = e, FlagEnablePodLabels
	case len(in.PodLabelAllowlist) > 0:
		// dcgm-exporter reads the allowlist only with pod labels on
		// (internal/pkg/transformation/kubernetes.go, shouldIncludeLabel).
		b.warn(FlagPodLabelAllowlist, fmt.Sprintf("has no effect without %s, as in dcgm-exporter: no pod labels are copied",
			b.flag(FlagEnablePodLabels)))
	}
	if expr == "" {
		return
	}
	// dcgm-exporter ignores its pod-label flags without --kubernetes; the
	// own flag says it has no effect.
	if flag == FlagPodLabels && !in.Kubernetes {
		b.fail(FlagPodLabels, fmt.Errorf("%s needs %s: pod labels go on the series of the pods the kubelet attributes GPUs to",
			b.flag(FlagPodLabels), b.flag(FlagKubernetes)))
		return
	}
	re, err := podlabels.CompileAllowlist(expr)
	if err != nil {
		b.fail(flag, fmt.Errorf("%s: %w", b.flag(flag), err))
		return
	}
	c.Kubernetes.PodLabels = &PodLabels{Expr: expr, Allowlist: re, Flag: b.flag(flag)}
}

// allowlistExpr turns dcgm-exporter's allowlist (any pattern matching
// anywhere in the key keeps the label; none means every label:
// internal/pkg/transformation/kubernetes.go, shouldIncludeLabel) into the
// whole-key expression of --kubernetes-pod-labels.
func allowlistExpr(patterns []string) (string, error) {
	if len(patterns) == 0 {
		return ".*", nil
	}
	alts := make([]string, 0, len(patterns))
	for _, p := range patterns {
		if _, err := regexp.Compile(p); err != nil {
			return "", fmt.Errorf("%q: not a regular expression: %w", p, err)
		}
		alts = append(alts, ".*(?:"+p+").*")
	}
	return strings.Join(alts, "|"), nil
}

func (b *builder) serving() {
	c, in := b.cfg, b.in
	c.HPCJobDir = in.HPCJobDir
	c.Engine, c.Web = in.Engine, in.Web
	c.DisableExporterMetrics = in.DisableExporterMetrics
	c.Dump = Dump{Enabled: in.DumpEnabled, Directory: in.DumpDirectory, Retention: time.Duration(in.DumpRetention) * time.Hour,
		Compress: in.DumpCompression}
	c.DisableStartupValidate = in.DisableStartupValidate
}
