package sim

import (
	"math"

	"github.com/gpuscope/gpuscope/source"
)

// Truth returns what GPU gpu's workload does, as the simulation defines it;
// false for the node-wide DataParallel job, whose stalls are random.
func (s *Source) Truth(gpu int) (Truth, bool) {
	if gpu < 0 || gpu >= len(s.gpus) {
		return Truth{}, false
	}
	g := s.gpus[gpu]
	switch {
	case g.idle:
		return Truth{Workload: IdleAllocated, Bound: "idle", BoundShare: 1}, true
	case g.kind != nil:
		return g.kind.truth(), true
	}
	return Truth{}, false
}

// Process names the sim gives its processes, as nvmlSystemGetProcessName
// gives a process's executable: the training jobs' interpreter, the
// notebook's kernel, and a leftover process that no pod owns.
const (
	trainingProcess = "/usr/bin/python3"
	notebookProcess = "/opt/conda/bin/python3.11"
	orphanProcess   = "/usr/local/bin/stale-inference-server"
)

// processName is the name of the processes of GPU g.
func processName(g *gpuSim) string {
	switch {
	case g.plan != nil && g.plan.orphan:
		return orphanProcess
	case g.light || g.idle:
		return notebookProcess
	}
	return trainingProcess
}

// Processes lists one training process per GPU or MIG instance, two on each
// shared GPU. Their memory adds up to the framebuffer in use.
func (s *Source) Processes() []source.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := s.cfg.Now().UnixNano()
	tsec := 0.0
	if s.started {
		tsec = float64(ns-s.t0*tickNS) / 1e9
	}
	out := []source.Process{} // empty, not nil: the sim can always list
	for _, g := range s.gpus {
		if g.unplugged || g.free {
			continue
		}
		if g.plan != nil {
			out = s.appendPlanProcesses(out, g, tsec)
			continue
		}
		used := s.fbUsed(g, tsec)
		if len(g.gis) > 0 {
			// NVML gives no per-process SM utilisation inside a MIG
			// instance, and the sim says no more than the driver would.
			for _, gi := range g.gis {
				out = append(out, source.Process{PID: gi.pid, UUID: g.ent.UUID, GPUInstanceID: gi.ent.GPUInstanceID,
					UsedMemoryBytes: uint64(gi.fbUsed) * mib, SMUtil: -1, Name: trainingProcess})
			}
			continue
		}
		util := math.Round(s.job.at(tsec).sm * 100)
		if g.kind != nil {
			util = math.Round(g.kind.at(tsec).sm * 100)
		}
		if g.idle {
			util = 0
		}
		if g.light {
			util = math.Round(lightActivity.sm * 100)
		}
		name := processName(g)
		if g.idx < s.cfg.SharedGPUs {
			first := used * 55 / 100
			out = append(out,
				source.Process{PID: g.pids[0], UUID: g.ent.UUID, GPUInstanceID: -1, UsedMemoryBytes: uint64(first) * mib, SMUtil: math.Round(util * 0.6), Name: name},
				source.Process{PID: g.pids[1], UUID: g.ent.UUID, GPUInstanceID: -1, UsedMemoryBytes: uint64(used-first) * mib, SMUtil: util - math.Round(util*0.6), Name: name})
			continue
		}
		out = append(out, source.Process{PID: g.pids[0], UUID: g.ent.UUID, GPUInstanceID: -1, UsedMemoryBytes: uint64(used) * mib, SMUtil: util, Name: name})
	}
	return out
}
