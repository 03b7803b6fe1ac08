package main

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/config"
	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/dcgm/godcgm"
	"github.com/gpuscope/gpuscope/source/nvml"
	"github.com/gpuscope/gpuscope/source/sim/simclock"
)

// openSource opens the source --source names. auto tries DCGM, then NVML;
// sim only runs when asked for.
func openSource(cfg *config.Config, log *logrus.Entry, manual *simclock.Clock) (source.Source, error) {
	switch cfg.Source {
	case config.SourceSim:
		return openSim(cfg, manual)
	case config.SourceNVML:
		return openNVML(cfg, log)
	case config.SourceDCGM:
		return openDCGM(cfg, log)
	}
	return openAuto(cfg, log)
}

func openNVML(cfg *config.Config, log *logrus.Entry) (source.Source, error) {
	s, err := nvml.New(nvml.Config{Hostname: cfg.Labels.Hostname, Logger: log.WithField("source", "nvml"),
		BindUnbindPoll: cfg.Collection.BindUnbindPoll})
	if err != nil {
		return nil, fmt.Errorf("%s=nvml: %w", cfg.Flag(config.FlagSource), err)
	}
	return s, nil
}

func dcgmConfig(cfg *config.Config, log *logrus.Entry) dcgm.Config {
	c := dcgm.Config{Mode: cfg.DCGM.Mode, RemoteHostengine: cfg.DCGM.RemoteHostengine, Window: cfg.Collection.Window,
		Log: log.WithField("source", "dcgm"), BindUnbindPoll: cfg.Collection.BindUnbindPoll}
	if k := cfg.Kubernetes; cfg.Engine.Processes.Enabled || (k.Enabled && (k.SharedGPUAttribution || k.VirtualGPUs)) {
		// DCGM lists no processes; NVML beside it does (docs/dcgm.md).
		c.Processes.Open = func() (dcgm.ProcessReader, error) {
			r, err := nvml.OpenProcessReader(nvml.ReaderConfig{Logger: log.WithField("source", "dcgm")})
			if err != nil {
				return nil, err
			}
			return r, nil
		}
	}
	return c
}

func openDCGM(cfg *config.Config, log *logrus.Entry) (source.Source, error) {
	client := godcgm.New()
	client.HostEngineLogLevel = cfg.DCGM.HostEngineLogLevel
	client.AcceptFakeGPUs = cfg.DCGM.AcceptFakeGPUs
	s, err := dcgm.New(client, dcgmConfig(cfg, log))
	if err != nil {
		return nil, fmt.Errorf("%s=dcgm: %w", cfg.Flag(config.FlagSource), err)
	}
	return s, nil
}

// openEnrichers starts the label enrichers the flags ask for and registers
// their own metrics.
func openEnrichers(ctx context.Context, cfg *config.Config, set *counters.Set, src source.Source, entities func() []*source.Entity,
	log *logrus.Entry, reg *prometheus.Registry) ([]enrich.Enricher, error) {
	out := simEnrichers(cfg, reg)
	more, err := openClusterEnrichers(ctx, cfg, set, src, entities, log, reg)
	if err != nil {
		return nil, err
	}
	return append(out, more...), nil
}
