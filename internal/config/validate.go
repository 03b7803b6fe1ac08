package config

import (
	"errors"
	"fmt"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/enrich/kube/podattr"
	"github.com/gpuscope/gpuscope/source/dcgm"
)

// Validate reports every problem of the configuration at once, one per
// line, each naming its flag as the user gave it: the checks that read
// several flags, and each Option's own Check.
func (c *Config) Validate() error {
	var errs []error
	check := func(flag string, bad bool, format string, args ...any) {
		if bad && !c.bad[flag] {
			errs = append(errs, fmt.Errorf("%s "+format, append([]any{c.Flag(flag)}, args...)...))
		}
	}
	col := c.Collection
	check(FlagCollectInterval, col.DefaultInterval < counters.MinInterval, "%s: below the minimum %s", col.DefaultInterval, counters.MinInterval)
	for _, o := range Options(&Input{}) {
		if o.Check == nil || c.bad[o.Name] {
			continue
		}
		if err := o.Check(c); err != nil {
			errs = append(errs, fmt.Errorf("%s %w", c.Flag(o.Name), err))
		}
	}
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
	if f := c.Web.WebConfigFile; f != "" {
		if err := web.Validate(f); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", c.Flag(FlagWebConfig), f, err))
		}
	}
	return errors.Join(errs...)
}

// validateDCGM checks the mode and host-engine address whatever the source:
// a typo must not quietly serve NVML and probe DCGM forever in auto mode.
func (c *Config) validateDCGM() error {
	if c.bad[FlagDCGMMode] || c.bad[FlagDCGMRemote] {
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
	k := c.Kubernetes.PodAttr
	if !c.Kubernetes.Enabled {
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
