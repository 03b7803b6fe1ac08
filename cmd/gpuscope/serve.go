package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/etc"
	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/internal/enrich/kube/configmap"
	"github.com/gpuscope/gpuscope/internal/serve/reload"
	"github.com/gpuscope/gpuscope/internal/serve/server"
	"github.com/gpuscope/gpuscope/source"
)

func setupLogging(c *cli.Context) (*logrus.Entry, error) {
	log := logrus.New()
	log.SetOutput(os.Stderr)
	switch c.String(flagLogFormat) {
	case "text":
		log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	case "json":
		log.SetFormatter(&logrus.JSONFormatter{})
	default:
		return nil, fmt.Errorf("--%s %q: use text or json", flagLogFormat, c.String(flagLogFormat))
	}
	lvl, err := logrus.ParseLevel(c.String(flagLogLevel))
	if err != nil {
		return nil, fmt.Errorf("--%s %q: use debug, info, warn or error", flagLogLevel, c.String(flagLogLevel))
	}
	log.SetLevel(lvl)
	return logrus.NewEntry(log), nil
}

// minReloadPoll is the shortest --collectors-poll-interval; the file changes
// at human speed.
const minReloadPoll = 100 * time.Millisecond

// selectEntities applies -d and -s. Device IDs the node lacks are logged
// once per distinct set (a GPU may fall off the bus and come back), and the
// rest is served.
func selectEntities(dx *dcgmExporterConfig, log *logrus.Entry) func([]*source.Entity) []*source.Entity {
	if dx.Devices.GPUs.Flex && dx.Devices.Switches.Flex && dx.Devices.CPUs.Flex {
		return nil
	}
	// The engine refreshes entities from each group's loop.
	var mu sync.Mutex
	var lastMissing string
	return func(list []*source.Entity) []*source.Entity {
		mu.Lock()
		defer mu.Unlock()
		if m := strings.Join(dx.Devices.Missing(list), ", "); m != lastMissing {
			lastMissing = m
			if m != "" {
				log.WithFields(logrus.Fields{"devices": dx.Devices.GPUs.String(), "switch_devices": dx.Devices.Switches.String(),
					"cpu_devices": dx.Devices.CPUs.String(), "missing": m}).
					Warn("The device options name devices this node does not have; serving the others")
			}
		}
		return dx.Devices.Filter(list)
	}
}

// loadCountersFrom reads the counters from the ConfigMap -m names, or else
// from --collectors. As in dcgm-exporter (GetCounterSet), a ConfigMap that
// cannot be read stops the start: serving another counters set than the one
// asked for would go unnoticed.
func loadCountersFrom(c *cli.Context, dx *dcgmExporterConfig, log *logrus.Entry) (*counters.Set, error) {
	if dx.ConfigMapName == "" {
		return loadCounters(c.String(flagCollectors))
	}
	ref := configmap.Ref{Namespace: dx.ConfigMapNamespace, Name: dx.ConfigMapName, Key: "metrics"}
	csv, err := configmap.Client{}.Get(c.Context, ref)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flagConfigMapData, err)
	}
	log.WithField("configmap", ref.String()).Info("Counters read from the ConfigMap; the file reload is off")
	return counters.Parse("ConfigMap "+ref.String(), strings.NewReader(csv))
}

// loadCounters reads the counters file, or the built-in default set.
func loadCounters(path string) (*counters.Set, error) {
	if path == "" {
		return counters.Parse("built-in default-counters.csv", etc.DefaultCounters())
	}
	return counters.Load(path)
}

func serve(c *cli.Context) error {
	if c.NArg() > 0 {
		return usage(fmt.Errorf("unexpected argument %q; see gpuscope --help", c.Args().First()))
	}
	dx, err := parseDCGMExporterFlags(c)
	if err != nil {
		return usage(err)
	}
	if err := applyDCGMExporterFlags(c, dx); err != nil {
		return usage(err)
	}
	log, err := setupLogging(c)
	if err != nil {
		return usage(err)
	}
	interval, err := parseInterval(flagCollectInterval, c.String(flagCollectInterval))
	if err != nil {
		return usage(err)
	}
	if interval < counters.MinInterval {
		return usage(fmt.Errorf("--%s %s: below the minimum %s", flagCollectInterval, interval, counters.MinInterval))
	}
	// A poll reads and hashes the file; at 1ns it would spin a core.
	if poll := c.Duration(flagReloadPoll); poll < 0 || (poll > 0 && poll < minReloadPoll) {
		return usage(fmt.Errorf("--%s %s: below the minimum %s (0 turns polling off)", flagReloadPoll, poll, minReloadPoll))
	}
	if err := validateEnums(c); err != nil {
		return usage(err)
	}
	if n := c.Int(flagMaxConnections); n < 1 {
		return usage(fmt.Errorf("--%s %d: at least 1", flagMaxConnections, n))
	}
	xidWindow, err := parseInterval(flagXIDWindow, c.String(flagXIDWindow))
	if err != nil {
		return usage(err)
	}
	clockWindow, err := parseInterval(flagClockWindow, c.String(flagClockWindow))
	if err != nil {
		return usage(err)
	}
	if c.Duration(flagWindow) < counters.MinInterval {
		return usage(fmt.Errorf("--%s %s: the window must be at least %s", flagWindow, c.Duration(flagWindow), counters.MinInterval))
	}
	warnUnsupported(log, dx)
	if dx.DRA && !c.Bool(flagKubernetes) {
		log.WithField("flag", "--"+flagDRA).Warn("DRA pod labels are part of the Kubernetes pod attribution; without --kubernetes they change nothing")
	}
	if n := c.Int(flagAPIMaxStreams); n < 1 {
		return usage(fmt.Errorf("--%s %d: allow at least 1 stream", flagAPIMaxStreams, n))
	}
	if c.Bool(flagInsight) && c.Duration(flagInsightWindow) < 2*time.Second {
		return usage(fmt.Errorf("--%s %s: the insight window must be at least 2s (20 samples at 100ms)", flagInsightWindow, c.Duration(flagInsightWindow)))
	}
	if f := c.String(flagWebConfig); f != "" {
		if err := web.Validate(f); err != nil {
			return fmt.Errorf("--%s %s: %w", flagWebConfig, f, err)
		}
	}
	set, err := loadCountersFrom(c, dx, log)
	if err != nil {
		return err
	}
	for _, w := range set.Warnings {
		log.WithField("file", set.File).Warn(w)
	}
	hostLabel := c.String(flagHostnameLabel)
	if hostLabel != "Hostname" && hostLabel != "hostname" {
		return fmt.Errorf("--%s %q: want Hostname or hostname", flagHostnameLabel, hostLabel)
	}
	hostname := c.String(flagHostname)
	if hostname == "" {
		if hostname, err = os.Hostname(); err != nil {
			return fmt.Errorf("reading the host name (set --%s): %w", flagHostname, err)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	src, err := openSource(c, log, hostname)
	if err != nil {
		return err
	}
	defer func() {
		if err := src.Close(); err != nil {
			log.WithError(err).Warn("Closing the source failed")
		}
	}()
	reg := prometheus.NewRegistry()
	// Enrichers start before the engine exists; they read its entity list,
	// never the source's, so they do not race with collection.
	var engRef atomic.Pointer[engine.Engine]
	entities := func() []*source.Entity {
		if e := engRef.Load(); e != nil {
			return e.Entities()
		}
		return nil
	}
	enrichers, err := openEnrichers(ctx, c, set, src, entities, log, reg)
	if err != nil {
		return err
	}
	eng, err := engine.New(engine.Options{
		Source:            src,
		Counters:          set,
		DefaultInterval:   interval,
		Window:            c.Duration(flagWindow),
		XIDWindow:         xidWindow,
		ClockEventsWindow: clockWindow,
		Hostname:          hostname,
		HostnameLabel:     hostLabel,
		Enrichers:         enrichers,
		LabelOptions:      labelOptions(),
		Log:               log.WithField("component", "engine"),
		Select:            selectEntities(dx, log),
		ComputeInstances:  dx.ComputeInstances,

		NoHostname:               dx.NoHostname,
		OldNamespace:             dx.OldNamespace,
		ReplaceBlanksInModelName: dx.ReplaceBlanksInModelName,
		Insight:                  c.Bool(flagInsight),
		InsightWindow:            c.Duration(flagInsightWindow),
	})
	if err != nil {
		return err
	}
	engRef.Store(eng)
	if err := eng.Start(ctx); err != nil {
		return err
	}
	defer eng.Stop()
	if err := startDumps(ctx, dx, eng, src.Name(), log); err != nil {
		return err
	}

	reg.MustRegister(
		versioncollector.NewCollector("gpuscope"),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		eng,
	)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	if path := c.String(flagCollectors); path != "" && dx.ConfigMapName == "" {
		w := reload.New(path, eng.Reload, c.Duration(flagReloadPoll), log.WithField("component", "reload"))
		reg.MustRegister(w)
		go w.Run(ctx, hup)
	} else {
		go func() {
			for range hup {
				log.Info("SIGHUP: the counters come from the built-in set or a ConfigMap read at start, not a file; pass --collectors to reload one")
			}
		}()
	}

	var prof source.ProfilingController
	if pc, ok := src.(source.ProfilingController); ok {
		prof = pc
	}
	srv, err := server.New(server.Options{
		Address:       c.String(flagAddress),
		WebConfigFile: c.String(flagWebConfig),
		Engine:        eng,
		Gatherer:      reg,
		Profiling:     prof,
		Samples:       eng,
		MaxStreams:    c.Int(flagAPIMaxStreams),
		Registerer:    reg,
		Version:       version.Version,
		Log:           log.WithField("component", "http"),
		Pprof:         dx.Pprof,
		SystemdSocket: dx.SystemdSocket,

		EnableProfilingAPI: c.Bool(flagEnableProfilingAPI),
		MaxConnections:     c.Int(flagMaxConnections),
		OnServing: func(addr string) {
			log.WithFields(logrus.Fields{
				"address": addr, "source": src.Name(), "fields": len(set.Fields), "counters": set.File,
				"version": version.Version,
			}).Info("gpuscope is serving")
		},
	})
	if err != nil {
		return err
	}
	if err := srv.ListenAndServe(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	log.Info("gpuscope stopped")
	return nil
}
