package sim

import (
	"fmt"
	"strings"
)

// MIGKinds lists the workload kinds a MIG instance can run, in the order
// Mixed assigns them there. A communication-bound workload has no place on
// a MIG instance: MIG turns NVLink peer traffic off.
func MIGKinds() []Workload {
	return []Workload{ComputeBound, MemoryBound, InputBound, IdleAllocated}
}

// ParseMIGWorkloads reads a --sim-workload value for a node of gpus GPUs
// each split by the MIG layout: one kind per MIG instance, the instances of
// GPU 0 first. "mixed" cycles MIGKinds over the instances; one kind runs on
// every instance; a comma-separated list names one per instance.
func ParseMIGWorkloads(spec string, gpus int, modelName, layout string) ([]Workload, error) {
	r, err := resolve(Config{GPUs: gpus, Model: modelName, MIG: layout})
	if err != nil {
		return nil, err
	}
	n := gpus * len(r.mig)
	if n == 0 {
		return nil, fmt.Errorf("workloads %q: MIG %q has no instances", spec, layout)
	}
	spec = strings.TrimSpace(spec)
	if spec == "" || spec == Mixed {
		out := make([]Workload, n)
		for i := range out {
			out[i] = MIGKinds()[i%len(MIGKinds())]
		}
		return out, nil
	}
	out, err := ParseWorkloads(spec, n)
	if err != nil {
		return nil, fmt.Errorf("%w (with MIG, one per MIG instance: %d GPUs x %d instances)", err, gpus, len(r.mig))
	}
	for _, w := range out {
		if w == CommunicationBound {
			return nil, fmt.Errorf("workloads %q: %s does not run on a MIG instance, which has no NVLink peer traffic", spec, w)
		}
	}
	return out, nil
}

// checkMIGWorkloads checks a workload per MIG instance.
func (r *resolved) checkMIGWorkloads() error {
	if want := r.GPUs * len(r.mig); len(r.Workloads) != want {
		return fmt.Errorf("sim: Workloads with MIG %q: %d given for %d MIG instances (%d GPUs x %d)", r.MIG, len(r.Workloads), want, r.GPUs, len(r.mig))
	}
	for i, w := range r.Workloads {
		switch {
		case !w.valid():
			return fmt.Errorf("sim: Workloads: MIG instance %d: unknown kind %q (known: %s, %s)", i, w, kindNames(), DataParallel)
		case w == CommunicationBound:
			return fmt.Errorf("sim: Workloads: MIG instance %d: %s does not run on a MIG instance, which has no NVLink peer traffic", i, w)
		}
	}
	return nil
}

// assignMIGKinds gives each MIG instance its workload from Workloads, the
// instances of GPU 0 first; DataParallel keeps the instance's own training
// job.
func (s *Source) assignMIGKinds() {
	r := s.cfg
	if len(r.mig) == 0 || len(r.Workloads) == 0 {
		return
	}
	for i, g := range s.gpus {
		for k, gi := range g.gis {
			w := r.Workloads[i*len(r.mig)+k]
			if w == DataParallel {
				continue
			}
			kj := newKindJob(w, s.seed, uint64(6000+i*16+k), r.StepJitter)
			gi.kind = &kj
		}
	}
}

// activity is what the instance runs at tsec: its workload kind, or its
// training job.
func (gi *giSim) activity(tsec float64) activity {
	if gi.kind != nil {
		return gi.kind.at(tsec)
	}
	return gi.job.at(tsec)
}

// InstanceTruth returns what the inst-th MIG instance of GPU gpu runs, as
// the simulation defines it; false for an instance that runs its training
// job, whose stalls are random, and for one that does not exist.
func (s *Source) InstanceTruth(gpu, inst int) (Truth, bool) {
	if gpu < 0 || gpu >= len(s.gpus) {
		return Truth{}, false
	}
	g := s.gpus[gpu]
	if inst < 0 || inst >= len(g.gis) {
		return Truth{}, false
	}
	switch gi := g.gis[inst]; {
	case g.idle:
		return Truth{Workload: IdleAllocated, Bound: "idle", BoundShare: 1}, true
	case gi.kind != nil:
		return gi.kind.truth(), true
	}
	return Truth{}, false
}
