package main

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/dcgm/godcgm"
	"github.com/gpuscope/gpuscope/source/nvml"
	"github.com/gpuscope/gpuscope/source/sim"
	"github.com/gpuscope/gpuscope/source/sim/simpods"
)

// openSource opens the source --source names. auto tries DCGM, then NVML;
// sim only runs when asked for.
func openSource(c *cli.Context, log *logrus.Entry, hostname string) (source.Source, error) {
	simOnly := []string{flagSimGPUs, flagSimModel, flagSimSeed, flagSimMIG, flagSimNVLinks, flagSimEventRate, flagSimPods, flagSimSharedGPUs, flagSimWorkload}
	name := c.String(flagSource)
	if name != "sim" {
		for _, f := range simOnly {
			if c.IsSet(f) {
				return nil, fmt.Errorf("--%s only applies to --source=sim (the source is %s)", f, name)
			}
		}
	}
	switch name {
	case "sim":
		return openSim(c, hostname)
	case "nvml":
		return openNVML(c, log, hostname)
	case "dcgm":
		return openDCGM(c, log)
	case "auto":
		return openAuto(c, log, hostname)
	}
	return nil, fmt.Errorf("--%s %q: use auto, dcgm, nvml or sim", flagSource, name)
}

func openSim(c *cli.Context, hostname string) (source.Source, error) {
	cfg := sim.DefaultConfig()
	cfg.GPUs = c.Int(flagSimGPUs)
	cfg.Model = c.String(flagSimModel)
	cfg.Seed = c.Int64(flagSimSeed)
	cfg.MIG = c.String(flagSimMIG)
	if n := c.Int(flagSimNVLinks); n >= 0 {
		cfg.NVLinks = n
	}
	cfg.EventRate = c.Float64(flagSimEventRate)
	cfg.SharedGPUs = c.Int(flagSimSharedGPUs)
	cfg.Hostname = hostname
	cfg.BindUnbindPoll = bindUnbindPoll(c)
	if c.Bool(flagSimPods) {
		cfg.IdleGPUs = simpods.IdleGPUs(cfg.GPUs)
		// Only the training job's GPUs run it; the others do what their
		// pod (or the lack of one) does.
		cfg.FreeGPUs = simpods.FreeGPUs(cfg.GPUs)
		cfg.LightGPUs = simpods.NotebookGPUs(cfg.GPUs)
	}
	// MIG instances each run their own training job; the kinds are for
	// whole GPUs.
	if cfg.MIG == "" || c.IsSet(flagSimWorkload) {
		w, err := sim.ParseWorkloads(c.String(flagSimWorkload), cfg.GPUs)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", flagSimWorkload, err)
		}
		cfg.Workloads = w
	}
	s, err := sim.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("--source=sim: %w", err)
	}
	return s, nil
}

// bindUnbindPoll is the sources' poll interval for GPUs bound to or unbound
// from the driver: --gpu-bind-unbind-poll-interval when
// --enable-gpu-bind-unbind-watch is on, 0 (no watch) otherwise. The value
// was checked by parseDCGMExporterFlags; commands without the flags get 0.
func bindUnbindPoll(c *cli.Context) time.Duration {
	if !c.Bool(flagBindUnbindWatch) {
		return 0
	}
	d, err := time.ParseDuration(c.String(flagBindUnbindPoll))
	if err != nil || d <= 0 {
		return defaultBindUnbindPolling
	}
	return d
}

func openNVML(c *cli.Context, log *logrus.Entry, hostname string) (source.Source, error) {
	s, err := nvml.New(nvml.Config{Hostname: hostname, Logger: log.WithField("source", "nvml"), BindUnbindPoll: bindUnbindPoll(c)})
	if err != nil {
		return nil, fmt.Errorf("--source=nvml: %w", err)
	}
	return s, nil
}

func dcgmConfig(c *cli.Context, log *logrus.Entry) dcgm.Config {
	mode := dcgm.Mode(c.String(flagDCGMMode))
	if c.String(flagDCGMRemote) != "" && !c.IsSet(flagDCGMMode) {
		mode = dcgm.ModeRemote
	}
	return dcgm.Config{Mode: mode, RemoteHostengine: c.String(flagDCGMRemote), Window: c.Duration(flagWindow), Log: log.WithField("source", "dcgm"),
		BindUnbindPoll: bindUnbindPoll(c)}
}

func openDCGM(c *cli.Context, log *logrus.Entry) (source.Source, error) {
	s, err := dcgm.New(godcgm.New(), dcgmConfig(c, log))
	if err != nil {
		return nil, fmt.Errorf("--source=dcgm: %w", err)
	}
	return s, nil
}

// openEnrichers starts the label enrichers the flags ask for and registers
// their own metrics.
func openEnrichers(ctx context.Context, c *cli.Context, set *counters.Set, src source.Source, entities func() []*source.Entity, log *logrus.Entry, reg *prometheus.Registry) ([]enrich.Enricher, error) {
	var out []enrich.Enricher
	if c.Bool(flagSimPods) {
		sp := simpods.New(c.Int(flagSimGPUs))
		reg.MustRegister(sp)
		out = append(out, sp)
	}
	more, err := openClusterEnrichers(ctx, c, set, src, entities, log, reg)
	if err != nil {
		return nil, err
	}
	return append(out, more...), nil
}
