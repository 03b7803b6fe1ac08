package config

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/internal/enrich/kube/podattr"
	"github.com/gpuscope/gpuscope/source/dcgm"
)

// MinReloadPoll is the shortest --collectors-poll-interval: a poll reads
// and hashes the file, which changes at human speed; at 1ns it would spin
// a core.
const MinReloadPoll = 100 * time.Millisecond

// MinAPIMaxBytes is the smallest --api-max-bytes: one GPU's window of one
// field must fit.
const MinAPIMaxBytes = 64 << 10

// Validate reports every problem of the configuration at once, one per
// line, each naming its flag as the user gave it.
func (c *Config) Validate() error {
	var errs []error
	check := func(flag string, bad bool, format string, args ...any) {
		if bad && !c.bad[flag] {
			errs = append(errs, fmt.Errorf("%s "+format, append([]any{c.Flag(flag)}, args...)...))
		}
	}
	col := c.Collection
	check(FlagCollectInterval, col.DefaultInterval < counters.MinInterval, "%s: below the minimum %s", col.DefaultInterval, counters.MinInterval)
	check(FlagWindow, col.Window < counters.MinInterval, "%s: the window must be at least %s", col.Window, counters.MinInterval)
	poll := c.Counters.ReloadPoll
	check(FlagReloadPoll, poll < 0 || (poll > 0 && poll < MinReloadPoll), "%s: below the minimum %s (0 turns polling off)", poll, MinReloadPoll)
	check(FlagMaxConnections, c.Web.MaxConnections < 1, "%d: at least 1", c.Web.MaxConnections)
	check(FlagAPIMaxStreams, c.Web.MaxStreams < 1, "%d: allow at least 1 stream", c.Web.MaxStreams)
	check(FlagAPIMaxRequests, c.Web.MaxRequests < 1, "%d: allow at least 1 request", c.Web.MaxRequests)
	check(FlagAPIMaxBytes, c.Web.MaxResponseBytes < MinAPIMaxBytes, "%d: at least %d", c.Web.MaxResponseBytes, MinAPIMaxBytes)
	check(FlagInsightWindow, c.Insight.Enabled && c.Insight.Window > engine.MaxInsightWindow,
		"%s: longer than the rings hold; the largest that fits is %s (%d samples at %s)", c.Insight.Window, engine.MaxInsightWindow,
		int(engine.MaxInsightWindow/counters.MinInterval), counters.MinInterval)
	check(FlagInsightWindow, c.Insight.Enabled && c.Insight.Window < engine.MinInsightWindow,
		"%s: the insight window must be at least %s (%d samples at %s)", c.Insight.Window, engine.MinInsightWindow,
		int(engine.MinInsightWindow/counters.MinInterval), counters.MinInterval)
	check(FlagProcessesMax, c.Processes.MaxPerGPU < 0 || (c.Given(FlagProcessesMax) && c.Processes.MaxPerGPU < 1), "%d: keep at least 1 process per GPU (turn the per-process series off with %s=false)",
		c.Processes.MaxPerGPU, c.Flag(FlagProcesses))
	check(FlagProcessesMax, c.Given(FlagProcessesMax) && !c.Processes.Enabled, "only applies with %s (the per-process series are off)",
		c.Flag(FlagProcesses))
	check(FlagHostnameLabel, c.Labels.HostnameLabel != "Hostname" && c.Labels.HostnameLabel != "hostname",
		"%q: want Hostname or hostname", c.Labels.HostnameLabel)
	check(FlagDumpRetention, c.Dump.Enabled && c.Dump.Retention < 0, "%d: use 0 or more hours", int(c.Dump.Retention/time.Hour))
	// Both label the GPUs with pods, and both serve gpuscope_kubernetes_up.
	check(FlagSimPods, c.Sim.Pods && c.Kubernetes.Enabled, "and %s both label GPUs with pods (simulated, or the kubelet's); give one",
		c.Flag(FlagKubernetes))
	if c.Source != SourceSim {
		for _, f := range SimOnly {
			check(f, c.Given(f), "only applies to %s=sim (the source is %s)", c.Flag(FlagSource), c.Source)
		}
	}
	if err := c.validateDCGM(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.validateKubernetes()...)
	if f := c.Web.ConfigFile; f != "" {
		if err := web.Validate(f); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", c.Flag(FlagWebConfig), f, err))
		}
	}
	return errors.Join(errs...)
}

// validateDCGM checks the mode and host-engine address whatever the source:
// a typo must not quietly serve NVML and probe DCGM forever in auto mode.
func (c *Config) validateDCGM() error {
	if c.bad[FlagDCGMMode] {
		return nil
	}
	d := c.DCGM
	err := dcgm.Config{Mode: d.Mode, RemoteHostengine: d.RemoteHostengine}.Validate()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, dcgm.ErrAddressNeedsRemote):
		return fmt.Errorf("%s %q is only used with %s=remote, not %s", c.Flag(FlagDCGMRemote), d.RemoteHostengine, c.Flag(FlagDCGMMode), d.Mode)
	case errors.Is(err, dcgm.ErrRemoteNeedsAddress):
		return fmt.Errorf("%s=remote needs %s (host:port or a unix socket path)", c.Flag(FlagDCGMMode), c.Flag(FlagDCGMRemote))
	case errors.Is(err, dcgm.ErrUnknownMode):
		return fmt.Errorf("%s %q: %w", c.Flag(FlagDCGMMode), d.Mode, dcgm.ErrUnknownMode)
	}
	return fmt.Errorf("%s %q: %w", c.Flag(FlagDCGMRemote), d.RemoteHostengine, err)
}

// validateKubernetes checks what pod attribution reads, when it is on.
func (c *Config) validateKubernetes() []error {
	k := c.Kubernetes
	if !k.Enabled {
		return nil
	}
	var errs []error
	for _, n := range k.ResourceNames {
		if err := podattr.CheckResourceName(n); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.Flag(FlagResourceNames), err))
		}
	}
	if k.LabelGrace < 0 {
		errs = append(errs, fmt.Errorf("%s %s: must not be negative", c.Flag(FlagK8sLabelGrace), k.LabelGrace))
	}
	if k.RefreshInterval < podattr.MinRefreshInterval {
		errs = append(errs, fmt.Errorf("%s %s: below the minimum %s", c.Flag(FlagK8sRefresh), k.RefreshInterval, podattr.MinRefreshInterval))
	}
	return errs
}
