package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuscope/gpuscope/internal/config"
	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/internal/enrich/simjobs"
	"github.com/gpuscope/gpuscope/internal/enrich/simpods"
	"github.com/gpuscope/gpuscope/source/sim"
	"github.com/gpuscope/gpuscope/source/sim/simclock"
)

// simConfig is the simulated node --sim-* ask for, on the manual clock when
// there is one.
func simConfig(cfg *config.Config, manual *simclock.Clock) sim.Config {
	c := sim.DefaultConfig()
	s := cfg.Sim
	c.GPUs, c.Model, c.Seed, c.MIG, c.EventRate, c.SharedGPUs = s.GPUs, s.Model, s.Seed, s.MIG, s.EventRate, s.SharedGPUs
	c.MIGGPUs = s.MIGGPUs
	if s.NVLinks >= 0 {
		c.NVLinks = s.NVLinks
	}
	c.Hostname = cfg.Labels.Hostname
	c.BindUnbindPoll = cfg.Collection.BindUnbindPoll
	if s.Pods {
		c.IdleGPUs = simpods.IdleGPUs(c.GPUs)
		// Only the training job's GPUs run it; the others do what their
		// pod (or the lack of one) does.
		c.FreeGPUs = simpods.FreeGPUs(c.GPUs)
		c.LightGPUs = simpods.NotebookGPUs(c.GPUs)
	}
	c.Workloads = s.Workloads
	if s.Scenario != "" {
		// The scenario lays out the node; config refused the flags that
		// would say otherwise.
		c.Scenario, c.GPUs, c.Model, c.MIG = s.Scenario, 0, "", ""
	}
	if manual != nil {
		c.Now = manual.Now
	}
	return c
}

// manualClock is the manual clock --sim-clock=manual asks for, nil for the
// wall clock. Each move samples the span the window statistics and the
// insight metrics look back over, so that a scrape after it shows what a
// node running in real time would.
func manualClock(cfg *config.Config) *simclock.Clock {
	if cfg.Source != config.SourceSim || cfg.Sim.Clock != config.SimClockManual {
		return nil
	}
	opts := cfg.Engine
	opts.Window = cfg.Collection.Window
	return simclock.New(opts.LookBack())
}

// simEnrichers are the simulated pods and jobs: those of --sim-pods, or
// those of the scenario.
func simEnrichers(cfg *config.Config, reg *prometheus.Registry) []enrich.Enricher {
	var out []enrich.Enricher
	if cfg.Sim.Pods {
		sp := simpods.New(cfg.Sim.GPUs)
		reg.MustRegister(sp)
		out = append(out, sp)
	}
	if cfg.Source != config.SourceSim || cfg.Sim.Scenario == "" {
		return out
	}
	pods, jobs := scenarioHolders(cfg.Sim.Scenario)
	if len(pods) > 0 {
		sp := simpods.NewLayout(pods)
		reg.MustRegister(sp)
		out = append(out, sp)
	}
	if len(jobs) > 0 {
		out = append(out, simjobs.New(jobs))
	}
	return out
}

// simLabelNames are the labels the simulated pods and jobs write.
func simLabelNames(cfg *config.Config) []string {
	if cfg.Sim.Pods {
		return simpods.LabelNames
	}
	if cfg.Source != config.SourceSim || cfg.Sim.Scenario == "" {
		return nil
	}
	var out []string
	pods, jobs := scenarioHolders(cfg.Sim.Scenario)
	if len(pods) > 0 {
		out = append(out, simpods.LabelNames...)
	}
	if len(jobs) > 0 {
		out = append(out, simjobs.LabelNames...)
	}
	return out
}

// scenarioHolders splits the owners of a scenario's GPUs into pods and HPC
// jobs; config checked the name.
func scenarioHolders(name string) ([]simpods.Holder, map[int]string) {
	sc, err := sim.ScenarioByName(name)
	if err != nil {
		return nil, nil
	}
	var pods []simpods.Holder
	jobs := map[int]string{}
	for _, o := range sc.Owners() {
		if o.Job != "" {
			jobs[o.GPU] = o.Job
			continue
		}
		pods = append(pods, simpods.Holder{GPU: o.GPU, GPUInstanceID: o.GPUInstanceID,
			Pod: simpods.Pod{Namespace: o.Namespace, Name: o.Pod, Container: o.Container}})
	}
	return pods, jobs
}
