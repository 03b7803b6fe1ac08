package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/common/version"
	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/etc"
	"github.com/gpuscope/gpuscope/internal/clock"
	"github.com/gpuscope/gpuscope/internal/config"
	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/internal/enrich/kube/configmap"
	"github.com/gpuscope/gpuscope/internal/serve/reload"
	"github.com/gpuscope/gpuscope/internal/serve/server"
	"github.com/gpuscope/gpuscope/internal/serve/sighup"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/sim/simclock"
)

// defaultMemProfileRate is the Go runtime's default heap sampling rate.
const defaultMemProfileRate = 512 * 1024

// serve runs the exporter until SIGINT or SIGTERM.
func serve(ctx context.Context, cfg *config.Config) error {
	if cfg.Web.Pprof {
		// main turned heap sampling off; /debug/pprof/heap needs it.
		runtime.MemProfileRate = defaultMemProfileRate
	}
	log := newLogger(cfg.Log)
	warnUnsupported(log, cfg)
	set, err := loadCountersFrom(ctx, cfg, log)
	if err != nil {
		return err
	}
	for _, w := range set.Warnings {
		log.WithField("file", set.File).Warn(w)
	}
	noteProcessRoles(cfg, set, log)
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	manual := manualClock(cfg)
	src, err := openSource(cfg, log, manual)
	if err != nil {
		return err
	}
	defer func() {
		if err := src.Close(); err != nil {
			log.WithError(err).Warn("Closing the source failed")
		}
	}()
	reg := prometheus.NewRegistry()
	eng, err := startEngine(ctx, cfg, set, src, reg, log, manual)
	if err != nil {
		return err
	}
	defer eng.Stop()
	if manual != nil {
		manual.Attach(eng.Loops)
		log.WithField("now", manual.Now().Format(time.RFC3339)).Info("The simulated node runs on a manual clock; POST " + simclock.Path + "?by=30s moves it")
	}
	if err := startDumps(ctx, cfg, eng, src.Name(), log); err != nil {
		return err
	}
	reg.MustRegister(eng)
	// The build's, the Go runtime's and the process's families are
	// gathered in the background, not at each scrape (server.Options.Sampled).
	sampled := prometheus.NewRegistry()
	sampled.MustRegister(versioncollector.NewCollector("gpuscope"))
	if !cfg.DisableExporterMetrics {
		sampled.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	startReload(ctx, cfg, eng, reg, log)
	return listenAndServe(ctx, cfg, eng, src, set, gatherers{reg, sampled}, log, manual)
}

// noteProcessRoles says once that the counters file's per-process lines
// (nvidia_gpu_exporter's nvidia_smi_compute_app*) stay empty until
// --processes turns the per-process series on.
func noteProcessRoles(cfg *config.Config, set *counters.Set, log *logrus.Entry) {
	if cfg.Engine.Processes.Enabled {
		return
	}
	for _, f := range set.Fields {
		if f.Export.Role.PerProcess() {
			log.WithFields(logrus.Fields{"file": set.File, "line": f.Line, "field": f.Name}).
				Info("The counters file lists per-process families; they are served with " + cfg.Flag(config.FlagProcesses))
			return
		}
	}
}

func newLogger(cfg config.Log) *logrus.Entry {
	log := logrus.New()
	log.SetOutput(os.Stderr)
	if cfg.Format == config.LogJSON {
		log.SetFormatter(&logrus.JSONFormatter{})
	} else {
		log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	}
	log.SetLevel(cfg.Level)
	return logrus.NewEntry(log)
}

// loadCountersFrom reads the counters from the ConfigMap -m names, or else
// from --collectors. As in dcgm-exporter (GetCounterSet), a ConfigMap that
// cannot be read stops the start: serving another counters set than the one
// asked for would go unnoticed.
func loadCountersFrom(ctx context.Context, cfg *config.Config, log *logrus.Entry) (*counters.Set, error) {
	set, err := readCountersFrom(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	if err := cfg.Collection.WatchGroups.Apply(set); err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Flag(config.FlagConfigFile), err)
	}
	return set, nil
}

func readCountersFrom(ctx context.Context, cfg *config.Config, log *logrus.Entry) (*counters.Set, error) {
	ref := cfg.Counters.ConfigMap
	if ref == nil {
		return loadCounters(cfg.Counters.File)
	}
	csv, err := configmap.Client{}.Get(ctx, *ref)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Flag(config.FlagConfigMapData), err)
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

// startEngine starts the enrichers and the engine over them.
func startEngine(ctx context.Context, cfg *config.Config, set *counters.Set, src source.Source, reg *prometheus.Registry, log *logrus.Entry,
	manual *simclock.Clock) (*engine.Engine, error) {
	// Enrichers start before the engine exists; they read its entity list,
	// never the source's, so they do not race with collection.
	var engRef atomic.Pointer[engine.Engine]
	entities := func() []*source.Entity {
		if e := engRef.Load(); e != nil {
			return e.Entities()
		}
		return nil
	}
	enrichers, err := openEnrichers(ctx, cfg, set, src, entities, log, reg)
	if err != nil {
		return nil, err
	}
	col, lab := cfg.Collection, cfg.Labels
	var clk clock.Clock
	var now func() time.Time
	if manual != nil {
		clk, now = manual.Clock(), manual.Now
	}
	// The options flags set as they are come with the configuration.
	opts := cfg.Engine
	opts.Clock = clk
	opts.Now = now
	opts.Source = src
	opts.Counters = set
	opts.DefaultInterval = col.DefaultInterval
	opts.Window = col.Window
	opts.XIDWindow = col.XIDWindow
	opts.ClockEventsWindow = col.ClockEventsWindow
	opts.ClockEventsPeriod = col.ClockEventsPeriod
	opts.Hostname = lab.Hostname
	opts.Enrichers = enrichers
	opts.LabelOptions = labelOptions(cfg)
	opts.Log = log.WithField("component", "engine")
	opts.Select = selectEntities(col.Devices, log)
	opts.NoNativeHistograms = !col.NativeHistograms
	eng, err := engine.New(opts)
	if err != nil {
		return nil, nameWindow(cfg, err)
	}
	engRef.Store(eng)
	if err := eng.Start(ctx); err != nil {
		return nil, err
	}
	return eng, nil
}

// nameWindow names a window the engine refused by the flag that set it.
// What wraps the refusal ("reload: ") was written out with the engine's
// generic name, so the message is rebuilt around the named one.
func nameWindow(cfg *config.Config, err error) error {
	var we *engine.WindowError
	if !errors.As(err, &we) {
		return err
	}
	prefix, ok := strings.CutSuffix(err.Error(), we.Error())
	if !ok {
		return err
	}
	we.Option = cfg.Flag(config.FlagWindow)
	if we.ClockEvents {
		we.Option = cfg.Flag(config.FlagClockWindow)
	}
	return fmt.Errorf("%s%w", prefix, we)
}

// startReload reloads the counters file on SIGHUP and when it changes.
// Counters from the built-in set or a ConfigMap are read once.
func startReload(ctx context.Context, cfg *config.Config, eng *engine.Engine, reg *prometheus.Registry, log *logrus.Entry) {
	// The handler has been installed since the process started; a SIGHUP
	// that came meanwhile is waiting in the channel and reloads now.
	hup := sighup.Channel()
	if path := cfg.Counters.File; path != "" && cfg.Counters.ConfigMap == nil {
		// The YAML's watch groups apply to each file read, as at start.
		apply := func(set *counters.Set) error {
			if err := cfg.Collection.WatchGroups.Apply(set); err != nil {
				return fmt.Errorf("%s: %w", cfg.Flag(config.FlagConfigFile), err)
			}
			return nameWindow(cfg, eng.Reload(set))
		}
		w := reload.New(path, apply, cfg.Counters.ReloadPoll, log.WithField("component", "reload"))
		reg.MustRegister(w)
		go w.Run(ctx, hup)
		return
	}
	go func() {
		for range hup {
			log.Info("SIGHUP: the counters come from the built-in set or a ConfigMap read at start, not a file; pass --collectors to reload one")
		}
	}()
}

// gatherers are gpuscope's own families: live, gathered at each
// exposition, and sampled, gathered in the background.
type gatherers struct{ live, sampled *prometheus.Registry }

// listenAndServe serves the HTTP endpoints until ctx ends.
func listenAndServe(ctx context.Context, cfg *config.Config, eng *engine.Engine, src source.Source, set *counters.Set,
	regs gatherers, log *logrus.Entry, manual *simclock.Clock) error {
	var prof source.ProfilingController
	if pc, ok := src.(source.ProfilingController); ok {
		prof = pc
	}
	var srv *server.Server
	fields, err := fieldsPage(eng, src, cfg.Collection.Window, log, func() []byte { return srv.Exposition() })
	if err != nil {
		return err
	}
	var now func() time.Time
	var advance http.Handler
	if manual != nil {
		now, advance = manual.Now, manual.Handler()
	}
	// The options flags set as they are come with the configuration.
	opts := cfg.Web
	opts.Now, opts.SimClock = now, advance
	opts.Engine = server.Snapshots(eng.Snapshot, eng.Ready)
	// Without histograms the protobuf exposition would hold what the text
	// does, at a larger size: every scraper gets the text.
	opts.Protobuf = cfg.Collection.NativeHistograms
	opts.Gatherer, opts.Sampled, opts.Registerer = regs.live, regs.sampled, regs.live
	opts.Profiling, opts.Samples = prof, eng
	opts.Version = version.Version
	opts.Log = log.WithField("component", "http")
	opts.Health = gpuHealth(cfg.HealthRequireGPUs, eng)
	opts.Fields = fields
	opts.OnServing = func(addr string) {
		log.WithFields(logrus.Fields{
			"address": addr, "source": src.Name(), "fields": len(set.Fields), "counters": set.File,
			"version": version.Version,
		}).Info("gpuscope is serving")
	}
	srv, err = server.New(opts)
	if err != nil {
		return err
	}
	if err := srv.ListenAndServe(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	log.Info("gpuscope stopped")
	return nil
}
