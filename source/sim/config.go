package sim

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// MaxGPUs is the largest node the simulator builds (an HGX board has 16).
const MaxGPUs = 16

// Config describes the simulated node. Start from DefaultConfig: the zero
// value of EventRate disables rare events.
type Config struct {
	// GPUs is the number of GPUs, 1..MaxGPUs; 0 means 8.
	GPUs int
	// Model is one of Models(); "" means h100.
	Model string
	// Seed makes the node reproducible: the same seed and the same sample
	// times give the same identities and the same values.
	Seed int64
	// MIG is the MIG layout of every GPU: "" (off), "all" (seven instances
	// of the model's smallest profile) or a comma-separated list of
	// "[N x]PROFILE" items such as "7x1g.10gb" or "3g.40gb,2x2g.20gb".
	// The layout must fit in 7 compute and 8 memory slices.
	MIG string
	// MIGGPUs are the indexes of the GPUs in MIG mode, when MIG is set;
	// empty puts every GPU in MIG mode. The others run without MIG, as on
	// a node of the GPU operator's mixed strategy.
	MIGGPUs []int
	// NVLinks per GPU; 0 means the model's (H100/H200 18, A100 12, L4 none).
	NVLinks int
	// Hostname is the node name the simulated GPUs live on.
	Hostname string
	// Now is the clock samples are taken at; nil means time.Now.
	Now func() time.Time
	// EventRate multiplies the rate of rare events (XIDs, ECC errors, PCIe
	// replays, NVLink errors, hardware slowdowns); 0 disables them.
	EventRate float64
	// SharedGPUs puts two processes of different pods on each of the first
	// SharedGPUs GPUs, to demonstrate shared-GPU attribution.
	SharedGPUs int
	// IdleGPUs are indexes of GPUs that are allocated but run no work: a
	// process holds a CUDA context and nothing else, the waste that
	// "allocated but idle" views look for.
	IdleGPUs []int
	// FreeGPUs are indexes of GPUs no pod holds: no process, no memory in
	// use, idle power.
	FreeGPUs []int
	// LightGPUs are indexes of GPUs an interactive pod (a notebook) holds:
	// its process keeps a third of the memory and runs little.
	LightGPUs []int
	// Workloads picks each GPU's workload (ParseWorkloads reads the flag);
	// empty runs the node-wide DataParallel job on every GPU. An IdleGPUs
	// entry wins over the GPU's workload. With MIG it holds one per MIG
	// instance, GPU 0's instances first (ParseMIGWorkloads), each one of
	// MIGKinds or DataParallel (the instance's own training job).
	Workloads []Workload
	// StepJitter moves each step boundary of the workload kinds by up to
	// ±StepJitter/2 of a period (0..0.5); 0 keeps steps regular.
	StepJitter float64
	// Noise adds uniform noise of this amplitude (0..0.5) to the activity
	// ratios of GPUs running a workload kind, beyond the sensor noise every
	// GPU has.
	Noise float64
	// Scenario, when set, names one of Scenarios: it lays out the node
	// itself (GPUs, model, MIG layout and what each GPU runs), in place of
	// GPUs, Model and MIG; Workloads, IdleGPUs, FreeGPUs, LightGPUs and
	// SharedGPUs must then be empty.
	Scenario string
	// BindUnbindPoll, when positive, is how often Collect notices GPUs
	// unplugged or replugged (Source.Unplug, Source.Replug) and changes its
	// entities, as the NVML and DCGM sources do for GPUs unbound from or
	// bound to the driver. Zero keeps the entities: an unplugged GPU is
	// then reported lost.
	BindUnbindPoll time.Duration
}

// DefaultConfig is eight H100s with rare events at their normal rate.
func DefaultConfig() Config {
	return Config{GPUs: 8, Model: "h100", EventRate: 1, Hostname: "gpuscope-sim"}
}

// resolved is a validated Config with its defaults applied.
type resolved struct {
	Config
	model *model
	links int
	mig   []migProfile
	// migOn says which GPUs are in MIG mode, by index.
	migOn []bool
	// plans is what each GPU does in the scenario; nil without one.
	plans []*gpuPlan
}

// resolve validates cfg and applies its defaults.
func resolve(cfg Config) (*resolved, error) {
	r := &resolved{Config: cfg}
	if err := r.resolveScenario(); err != nil {
		return nil, err
	}
	if r.GPUs == 0 {
		r.GPUs = 8
	}
	if r.GPUs < 1 || r.GPUs > MaxGPUs {
		return nil, fmt.Errorf("sim: GPUs %d: must be between 1 and %d", cfg.GPUs, MaxGPUs)
	}
	if err := r.resolveModel(); err != nil {
		return nil, err
	}
	for _, check := range []func() error{r.checkRates, r.checkGPURoles, r.checkMIGGPUs, r.checkWorkloads} {
		if err := check(); err != nil {
			return nil, err
		}
	}
	if r.Hostname == "" {
		r.Hostname = "gpuscope-sim"
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	return r, nil
}

// resolveModel looks the GPU model up and settles its NVLinks and MIG
// layout.
func (r *resolved) resolveModel() error {
	name := strings.ToLower(strings.TrimSpace(r.Model))
	if name == "" {
		name = "h100"
	}
	m, ok := models[name]
	if !ok {
		return fmt.Errorf("sim: unknown model %q (known: %s)", r.Model, strings.Join(Models(), ", "))
	}
	r.model = m
	switch {
	case r.NVLinks < 0:
		return fmt.Errorf("sim: NVLinks %d: must not be negative", r.NVLinks)
	case r.NVLinks == 0:
		r.links = m.links
	case m.links == 0:
		return fmt.Errorf("sim: NVLinks %d: model %s has no NVLink", r.NVLinks, m.key)
	case r.NVLinks > m.links:
		return fmt.Errorf("sim: NVLinks %d: model %s has at most %d", r.NVLinks, m.key, m.links)
	default:
		r.links = r.NVLinks
	}
	mig, err := parseMIG(m, r.MIG)
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	r.mig = mig
	return nil
}

// checkRates checks the event rate, the step jitter, the noise and the
// bind/unbind poll.
func (r *resolved) checkRates() error {
	switch {
	case math.IsNaN(r.EventRate) || math.IsInf(r.EventRate, 0) || r.EventRate < 0:
		return fmt.Errorf("sim: EventRate %v: must be a finite number >= 0", r.EventRate)
	case math.IsNaN(r.StepJitter) || r.StepJitter < 0 || r.StepJitter > 0.5:
		return fmt.Errorf("sim: StepJitter %v: must be between 0 and 0.5", r.StepJitter)
	case math.IsNaN(r.Noise) || r.Noise < 0 || r.Noise > 0.5:
		return fmt.Errorf("sim: Noise %v: must be between 0 and 0.5", r.Noise)
	case r.BindUnbindPoll < 0:
		return fmt.Errorf("sim: BindUnbindPoll %s: must not be negative", r.BindUnbindPoll)
	}
	return nil
}

// checkGPURoles checks the GPUs given a role: shared, free, light or idle
// GPUs are in range, and a GPU has at most one of the free and light roles.
func (r *resolved) checkGPURoles() error {
	if r.SharedGPUs < 0 || r.SharedGPUs > r.GPUs {
		return fmt.Errorf("sim: SharedGPUs %d: must be between 0 and GPUs (%d)", r.SharedGPUs, r.GPUs)
	}
	if r.SharedGPUs > 0 && len(r.mig) > 0 {
		return fmt.Errorf("sim: SharedGPUs %d with MIG %q: MIG already gives each pod its own instance", r.SharedGPUs, r.MIG)
	}
	role := map[int]string{}
	for _, l := range []struct {
		name string
		idx  []int
	}{{"FreeGPUs", r.FreeGPUs}, {"LightGPUs", r.LightGPUs}} {
		for _, i := range l.idx {
			if i < 0 || i >= r.GPUs {
				return fmt.Errorf("sim: %s: index %d out of range 0..%d", l.name, i, r.GPUs-1)
			}
			if prev, ok := role[i]; ok {
				return fmt.Errorf("sim: %s: GPU %d is already in %s", l.name, i, prev)
			}
			role[i] = l.name
		}
	}
	seen := make(map[int]bool, len(r.IdleGPUs))
	for _, i := range r.IdleGPUs {
		if i < 0 || i >= r.GPUs {
			return fmt.Errorf("sim: IdleGPUs: index %d out of range 0..%d", i, r.GPUs-1)
		}
		if seen[i] {
			return fmt.Errorf("sim: IdleGPUs: index %d repeated", i)
		}
		seen[i] = true
	}
	return nil
}

// checkWorkloads checks that the workloads, when given, name a known kind
// for each GPU, or for each MIG instance of a node with MIG.
func (r *resolved) checkWorkloads() error {
	if len(r.Workloads) == 0 {
		return nil
	}
	if len(r.mig) > 0 {
		return r.checkMIGWorkloads()
	}
	if len(r.Workloads) != r.GPUs {
		return fmt.Errorf("sim: Workloads: %d given for %d GPUs", len(r.Workloads), r.GPUs)
	}
	for i, w := range r.Workloads {
		if !w.valid() {
			return fmt.Errorf("sim: Workloads: GPU %d: unknown kind %q (known: %s, %s)", i, w, kindNames(), DataParallel)
		}
	}
	return nil
}

// resolveScenario lays out the node of the scenario, when one is named.
func (r *resolved) resolveScenario() error {
	if r.Scenario == "" {
		return nil
	}
	sc, err := ScenarioByName(r.Scenario)
	if err != nil {
		return fmt.Errorf("sim: Scenario: %w", err)
	}
	if len(r.Workloads)+len(r.IdleGPUs)+len(r.FreeGPUs)+len(r.LightGPUs) > 0 || r.SharedGPUs > 0 {
		return fmt.Errorf("sim: Scenario %q lays out the node itself; leave Workloads, IdleGPUs, FreeGPUs, LightGPUs and SharedGPUs empty", r.Scenario)
	}
	b := sc.build(uint64(r.Seed))
	r.GPUs, r.Model, r.MIG, r.plans = len(b.gpus), b.model, b.mig, b.gpus
	// Every node of a scenario across nodes runs the same jobs from the
	// same seed (its ranks step together), but its GPUs are others: their
	// identities and sensor noise follow a seed of the node's own.
	r.Seed += int64(sc.Host()) * 1_000_003
	r.MIGGPUs = nil
	for i, g := range b.gpus {
		if len(g.instances) > 0 {
			r.MIGGPUs = append(r.MIGGPUs, i)
		}
	}
	return nil
}

// checkMIGGPUs settles which GPUs are in MIG mode: MIGGPUs, in range and
// each once, or all of them.
func (r *resolved) checkMIGGPUs() error {
	r.migOn = make([]bool, r.GPUs)
	if len(r.mig) == 0 {
		if len(r.MIGGPUs) > 0 {
			return fmt.Errorf("sim: MIGGPUs %v without a MIG layout", r.MIGGPUs)
		}
		return nil
	}
	if len(r.MIGGPUs) == 0 {
		for i := range r.migOn {
			r.migOn[i] = true
		}
		return nil
	}
	for _, i := range r.MIGGPUs {
		if i < 0 || i >= r.GPUs {
			return fmt.Errorf("sim: MIGGPUs: index %d out of range 0..%d", i, r.GPUs-1)
		}
		if r.migOn[i] {
			return fmt.Errorf("sim: MIGGPUs: index %d repeated", i)
		}
		r.migOn[i] = true
	}
	return nil
}
