package sim

import (
	"math"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
)

// planActivity is what a GPU of a scenario does at tsec; it sets its MIG
// instances' activity too.
func (s *Source) planActivity(g *gpuSim, tsec float64) activity {
	if len(g.gis) == 0 {
		if g.plan.w == nil {
			return freeActivity
		}
		return g.plan.w.at(tsec)
	}
	a := activity{idle: true}
	for _, gi := range g.gis {
		gi.act = freeActivity
		if gi.w != nil {
			gi.act = gi.w.at(tsec)
		}
		a.blend(&gi.act, float64(gi.prof.compute)/migComputeSlices)
		a.idle = a.idle && gi.act.idle
	}
	// MIG turns off NVLink peer traffic.
	a.nvlink = 0
	return a
}

// planFB is the framebuffer (MiB) a GPU of a scenario uses at tsec; it
// sets its MIG instances' share too.
func (s *Source) planFB(g *gpuSim, tsec float64) int64 {
	if len(g.gis) == 0 {
		if g.plan.w == nil {
			return 0
		}
		return int64(g.plan.w.memMiB(tsec))
	}
	var sum int64
	for _, gi := range g.gis {
		gi.fbUsed = 0
		if gi.w != nil {
			gi.fbUsed = min(int64(gi.w.memMiB(tsec)), gi.fbTotal)
		}
		sum += gi.fbUsed
	}
	return sum
}

// Thermal facts of a card whose fan stopped.
const (
	// stoppedRise is how much warmer (C) than with its fan the heat sink
	// settles at full power without the fan's airflow; the chassis fans
	// still move some air past it.
	stoppedRise = 40.0
	// sinkSeconds is the heat sink's time constant: it warms over minutes,
	// where the die follows power within seconds.
	sinkSeconds = 300.0
)

// stepPlan advances what a scenario adds to one GPU by one tick: the heat a
// stopped fan leaves in the sink, corrected ECC errors, a reset.
func (s *Source) stepPlan(g *gpuSim, t int64, tsec, frac float64) {
	p := g.plan
	if p.fanStopsAt > 0 && tsec >= p.fanStopsAt {
		g.sinkExcess += (stoppedRise*frac - g.sinkExcess) * (tickSec / sinkSeconds)
	}
	if p.sbePerHour != nil {
		if r := p.sbePerHour(tsec); r > 0 && fraction(hash4(s.seed, uint64(g.idx), tagScenario, uint64(t))) < r*tickSec/3600 {
			g.eccSBEVol++
			g.eccSBEAgg++
		}
	}
	if p.fabricDegradedAt > 0 && tsec >= p.fabricDegradedAt {
		g.fabricDegraded = true
	}
	if p.resetAt > 0 && tsec >= p.resetAt && !g.reset {
		// A reset clears the volatile error counts; the aggregate ones
		// live in the InfoROM and stay.
		g.reset = true
		g.eccSBEVol, g.eccDBEVol = 0, 0
	}
}

// fanSpeed is the speed the driver asks of a card's fan at a die
// temperature, in percent: 30% up to 45 °C, full speed from 80 °C. NVML
// reports this intended speed whether the fan turns or not (nvml.h,
// nvmlDeviceGetFanSpeed: "If the fan is physically blocked and unable to
// spin, the output will not match the actual fan speed"), so a stopped fan
// reads high while its card heats.
func fanSpeed(temp float64) float64 {
	return math.Round(30 + 70*clamp01((temp-45)/35))
}

// migUtilNote is why a MIG-enabled GPU has no device utilization: NVML
// refuses it (nvml.h: "On MIG-enabled GPUs, querying device utilization
// rates is not currently supported", and likewise for the encoder and
// decoder), and DCGM, which reads it through NVML, answers NOT_SUPPORTED.
const migUtilNote = "a MIG-enabled GPU has no device utilization: NVML does not serve it (read the DCGM_FI_PROF_* fields of its instances)"

// migUnsupported says whether a field reads the device utilization that a
// MIG-enabled GPU lacks.
func migUnsupported(id uint16) bool {
	switch id {
	case fieldid.GPUUtil, fieldid.MemCopyUtil, fieldid.EncUtil, fieldid.DecUtil:
		return true
	}
	return false
}

// appendPlanProcesses lists the processes of a GPU of a scenario at tsec:
// one per GPU or MIG instance that holds memory, a zombie included.
func (s *Source) appendPlanProcesses(out []source.Process, g *gpuSim, tsec float64) []source.Process {
	used := s.planFB(g, tsec)
	a := s.planActivity(g, tsec)
	if len(g.gis) == 0 {
		if used == 0 {
			return out
		}
		return append(out, source.Process{PID: g.pids[0], UUID: g.ent.UUID, GPUInstanceID: -1,
			UsedMemoryBytes: uint64(used) * mib, SMUtil: math.Round(a.sm * 100), Name: processName(g)})
	}
	// No per-process SM share inside a MIG instance, as with NVML.
	for _, gi := range g.gis {
		if gi.fbUsed == 0 {
			continue
		}
		out = append(out, source.Process{PID: gi.pid, UUID: g.ent.UUID, GPUInstanceID: gi.ent.GPUInstanceID,
			UsedMemoryBytes: uint64(gi.fbUsed) * mib, SMUtil: -1, Name: trainingProcess})
	}
	return out
}
