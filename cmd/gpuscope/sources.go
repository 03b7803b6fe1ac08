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
	_ "github.com/gpuscope/gpuscope/source/all" // the sources --source names
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/dcgm/godcgm"
	"github.com/gpuscope/gpuscope/source/nvml"
	"github.com/gpuscope/gpuscope/source/sim"
	"github.com/gpuscope/gpuscope/source/sim/simclock"
)

// openSource opens the registered source --source names, with the
// settings of the sources that have flags of their own.
func openSource(cfg *config.Config, log *logrus.Entry, manual *simclock.Clock) (source.Source, error) {
	env := source.Env{Hostname: cfg.Labels.Hostname, Log: log, Window: cfg.Collection.Window,
		BindUnbindPoll: cfg.Collection.BindUnbindPoll, Settings: map[string]any{
			dcgm.Name: godcgm.Settings{Source: dcgmConfig(cfg, log), HostEngineLogLevel: cfg.DCGM.HostEngineLogLevel,
				AcceptFakeGPUs: cfg.DCGM.AcceptFakeGPUs},
			sim.Name: simConfig(cfg, manual),
		}}
	env.Open = func(name string) (source.Source, error) {
		k, ok := source.Lookup(name)
		if !ok {
			return nil, fmt.Errorf("%s %q: use %s", cfg.Flag(config.FlagSource), name, source.OneOf(source.Names()))
		}
		s, err := k.Open(env)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", cfg.Flag(config.FlagSource), name, err)
		}
		return s, nil
	}
	return env.Open(string(cfg.Source))
}

func dcgmConfig(cfg *config.Config, log *logrus.Entry) dcgm.Config {
	c := dcgm.Config{Mode: cfg.DCGM.Mode, RemoteHostengine: cfg.DCGM.RemoteHostengine, Window: cfg.Collection.Window,
		Log: log.WithField("source", dcgm.Name), BindUnbindPoll: cfg.Collection.BindUnbindPoll, ConnectTimeout: cfg.DCGM.ConnectTimeout}
	if k := cfg.Kubernetes; cfg.Engine.Processes.Enabled || (k.Enabled && (k.PodAttr.SharedGPUAttribution || k.PodAttr.VirtualGPUs)) {
		// DCGM lists no processes; NVML beside it does (docs/dcgm.md).
		c.Processes.Open = func() (dcgm.ProcessReader, error) {
			r, err := nvml.OpenProcessReader(nvml.ReaderConfig{Logger: log.WithField("source", dcgm.Name)})
			if err != nil {
				return nil, err
			}
			return r, nil
		}
	}
	return c
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
