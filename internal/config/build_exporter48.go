package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpuscope/gpuscope/internal/config/exporteryaml"
)

// exporterYAML reads --config-file into the Input for each setting whose
// flag was not given: dcgm-exporter's flags and variables given
// explicitly override its YAML (pkg/cmd/app.go, --config-file's usage).
func (b *builder) exporterYAML() {
	path := strings.TrimSpace(b.in.ConfigFile)
	if path == "" {
		return
	}
	b.cfg.ConfigFile = path
	s, err := exporteryaml.Load(path)
	if err != nil {
		b.fail(FlagConfigFile, fmt.Errorf("%s: %w", b.flag(FlagConfigFile), err))
		return
	}
	in := &b.in
	unset := func(flag string) bool { return !b.cfg.Given(flag) }
	if s.CountersFile != "" && unset(FlagCollectors) && unset(FlagConfigMapData) {
		in.Collectors = s.CountersFile
	}
	if s.CollectInterval != nil && unset(FlagCollectInterval) {
		in.CollectInterval = s.CollectInterval.String()
		// The clock-event count follows the interval, as a given -c does.
		b.yamlInterval = true
	}
	if s.EnableExporterMetrics != nil && unset(FlagEnableExporterMetrics) {
		in.EnableExporterMetrics = *s.EnableExporterMetrics
	}
	if s.MaxConcurrentScrapes != nil && unset(FlagMaxConcurrentScrapes) {
		in.Web.MaxConcurrentScrapes = *s.MaxConcurrentScrapes
	}
	if s.WatchMaxKeepAge != nil && unset(FlagWatchMaxKeepAge) {
		in.WatchMaxKeepAge = *s.WatchMaxKeepAge
		b.yamlWatch = true
	}
	if s.WatchMaxKeepSamples != nil && unset(FlagWatchMaxKeepSamples) {
		in.WatchMaxKeepSamples = *s.WatchMaxKeepSamples
		b.yamlWatch = true
	}
	if s.BindUnbind != nil && unset(FlagBindUnbindWatch) {
		in.BindUnbindWatch = *s.BindUnbind
	}
	if s.BindUnbindPoll != nil && unset(FlagBindUnbindPoll) {
		in.BindUnbindPoll = s.BindUnbindPoll.String()
	}
	b.watchGroups = s.WatchGroups
}

// exporter48 applies dcgm-exporter's flags added after 4.8.2: each works,
// is checked and warned about where gpuscope has nothing to change, or is
// refused with the reason.
func (b *builder) exporter48() {
	c, in := b.cfg, b.in
	c.HealthRequireGPUs = in.HealthRequireGPUs
	c.Collection.WatchMaxKeepAge, c.Collection.WatchMaxKeepSamples = in.WatchMaxKeepAge, in.WatchMaxKeepSamples
	c.Collection.WatchGroups = b.watchGroups
	if in.EnableExporterMetrics {
		if c.Given(FlagDisableExporterMetrics) && in.DisableExporterMetrics {
			b.fail(FlagEnableExporterMetrics, fmt.Errorf("%s and %s contradict each other: give one",
				b.flag(FlagEnableExporterMetrics), b.flag(FlagDisableExporterMetrics)))
		}
		c.DisableExporterMetrics = false
	}
	if (c.Given(FlagWatchMaxKeepAge) || c.Given(FlagWatchMaxKeepSamples) || b.yamlWatch) &&
		in.WatchMaxKeepAge >= 0 && in.WatchMaxKeepSamples >= 0 {
		flag := FlagWatchMaxKeepAge
		if !c.Given(flag) && c.Given(FlagWatchMaxKeepSamples) {
			flag = FlagWatchMaxKeepSamples
		}
		msg := "changes nothing: gpuscope keeps each field's samples in its own bounded rings (--window), not in DCGM's watch history"
		if !c.Given(FlagWatchMaxKeepAge) && !c.Given(FlagWatchMaxKeepSamples) {
			msg = "sources.dcgm.watch in " + c.ConfigFile + " " + msg
		}
		b.warn(flag, msg)
	}
	if in.ContainerLabels {
		b.fail(FlagContainerLabels, fmt.Errorf("%s: not supported: gpuscope does not query container runtimes for labels; "+
			"use --kubernetes for pod labels or --hpc-job-mapping-dir for jobs", b.flag(FlagContainerLabels)))
	}
	if in.ContainerRuntimeSocket != "" {
		b.fail(FlagContainerRuntimeSocket, fmt.Errorf("%s %q: not supported: it only serves dcgm-exporter's --container-labels, which gpuscope does not have",
			b.flag(FlagContainerRuntimeSocket), in.ContainerRuntimeSocket))
	}
}

// hostengineAddress turns dcgm-exporter's DCGM URI forms of -r
// (pkg/cmd/app.go at 0048f87c: tcp://<HOST>:<PORT>, unix:///<SOCKET_PATH>,
// vsock://<CID>:<PORT>) into the address the DCGM source takes.
func (b *builder) hostengineAddress(addr string) string {
	a := strings.TrimSpace(addr)
	scheme, rest, ok := strings.Cut(a, "://")
	if !ok {
		return a
	}
	switch strings.ToLower(scheme) {
	case "tcp":
		if rest == "" {
			b.fail(FlagDCGMRemote, fmt.Errorf("%s %q: no host after tcp://", b.flag(FlagDCGMRemote), addr))
		}
		return rest
	case "unix":
		return "unix://" + rest
	case "vsock":
		cid, port, _ := strings.Cut(rest, ":")
		_, errC := strconv.ParseUint(cid, 10, 32)
		_, errP := strconv.ParseUint(port, 10, 32)
		why := "go-dcgm's Go binding, which gpuscope uses, connects over TCP and unix sockets only"
		if errC != nil || errP != nil {
			why = "use vsock://<CID>:<PORT>; and " + why
		}
		b.fail(FlagDCGMRemote, fmt.Errorf("%s %q: VSOCK host engine connections are not supported: %s; "+
			"run gpuscope inside the VM next to the host engine or reach it over tcp://", b.flag(FlagDCGMRemote), addr, why))
		return ""
	}
	b.fail(FlagDCGMRemote, fmt.Errorf("%s %q: unknown scheme %q; use host:port, tcp://host:port, unix:///path or a socket path",
		b.flag(FlagDCGMRemote), addr, scheme))
	return ""
}
