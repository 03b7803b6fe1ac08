package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/version"
	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/internal/config"
	"github.com/gpuscope/gpuscope/internal/config/devsel"
	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/internal/serve/dump"
	"github.com/gpuscope/gpuscope/source"
)

// warnUnsupported logs once, at startup, each dcgm-exporter option that is
// accepted but changes nothing here, and why.
func warnUnsupported(log *logrus.Entry, cfg *config.Config) {
	warn := func(flag, why string) { log.WithField("flag", cfg.Flag(flag)).Warn(why) }
	for _, w := range cfg.Warnings {
		log.WithField("flag", w.Flag).Warn(w.Message)
	}
	if cfg.DisableStartupValidate {
		warn(config.FlagDisableStartupCheck, "gpuscope runs no startup validation that could stop it, so there is nothing to disable")
	}
	dev := cfg.Collection.Devices
	if cfg.Engine.ComputeInstances && !dev.GPUs.Flex {
		warn(config.FlagComputeInstances, "compute instances are exported with -d f only: g and i select GPUs and GPU instances, as in dcgm-exporter")
	}
	if len(dev.CPUs.Major)+len(dev.CPUs.Minor) > 0 || dev.CPUs.AllMajor || dev.CPUs.AllMinor {
		warn(config.FlagCPUDevices, "only the DCGM source reads CPUs and CPU cores (when the counters file has CPU fields); with NVML or the sim there is nothing to select")
	}
	if cfg.Kubernetes.DRA && !cfg.Kubernetes.Enabled {
		warn(config.FlagDRA, "DRA pod labels are part of the Kubernetes pod attribution; without --kubernetes they change nothing")
	}
}

// selectEntities applies -d, -s and -p. Device IDs the node lacks are
// logged once per distinct set (a GPU may fall off the bus and come back),
// and the rest is served.
func selectEntities(dev devsel.Selector, log *logrus.Entry) func([]*source.Entity) []*source.Entity {
	if dev.GPUs.Flex && dev.Switches.Flex && dev.CPUs.Flex {
		return nil
	}
	// The engine refreshes entities from each group's loop.
	var mu sync.Mutex
	var lastMissing string
	return func(list []*source.Entity) []*source.Entity {
		mu.Lock()
		defer mu.Unlock()
		if m := strings.Join(dev.Missing(list), ", "); m != lastMissing {
			lastMissing = m
			if m != "" {
				log.WithFields(logrus.Fields{"devices": dev.GPUs.String(), "switch_devices": dev.Switches.String(),
					"cpu_devices": dev.CPUs.String(), "missing": m}).
					Warn("The device options name devices this node does not have; serving the others")
			}
		}
		return dev.Filter(list)
	}
}

// dumpInterval is how often a debug dump is written. dcgm-exporter writes one
// at every scrape; a timer keeps the count independent of the scrapers.
const dumpInterval = time.Minute

// startDumps writes --dump-enabled's debug dumps in the background.
func startDumps(ctx context.Context, cfg *config.Config, eng *engine.Engine, sourceName string, log *logrus.Entry) error {
	dc := cfg.Dump
	if !dc.Enabled {
		return nil
	}
	d, err := dump.New(dump.Config{
		Dir: dc.Directory, Retention: dc.Retention, Compress: dc.Compress,
		Interval: dumpInterval, Log: log.WithField("component", "dump"),
	}, func() any {
		return map[string]any{
			"time": time.Now().UTC(), "source": sourceName, "version": version.Version,
			"entities": eng.Entities(), "exposition": string(eng.Render(nil)),
		}
	})
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.Flag(config.FlagDumpDirectory), err)
	}
	log.WithFields(logrus.Fields{"directory": dc.Directory, "interval": dumpInterval, "retention_hours": int(dc.Retention / time.Hour)}).
		Info("Writing debug dumps")
	go d.Run(ctx)
	return nil
}

// gpuHealth is /health's check under --health-require-gpus: unhealthy while
// the source shows no GPU nor MIG instance, so that a liveness probe
// restarts an exporter that started before the driver was ready.
func gpuHealth(require bool, eng interface{ Entities() []*source.Entity }) func() (bool, string) {
	if !require {
		return nil
	}
	return func() (bool, string) {
		for _, e := range eng.Entities() {
			if e.Kind == source.GPU || e.Kind == source.GPUInstance {
				return true, "ok"
			}
		}
		return false, "no GPU seen (" + "--" + config.FlagHealthRequireGPUs + ")"
	}
}
