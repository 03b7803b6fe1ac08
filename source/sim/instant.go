package sim

// sample computes each GPU's instantaneous state at ns.
func (s *Source) sample(ns, tick int64) {
	s.nowTick = tick
	tsec := float64(ns-s.t0*tickNS) / 1e9
	for _, g := range s.gpus {
		g.act = s.gpuActivity(g, tsec)
		g.powerInst, g.capped = s.power(g, &g.act, tick)
		g.fbUsed = s.fbUsed(g, tsec)
		var r uint64
		if g.act.idle {
			r |= reasonGPUIdle
		}
		if g.capped {
			r |= reasonSWPowerCap
		}
		if tick < g.slowUntil {
			r |= reasonHWSlowdown
		}
		if tick < g.thermUntil {
			r |= reasonHWThermal
		}
		g.reasons = r
	}
}

// Clock event reason bits, as NVML and DCGM define them.
const (
	reasonGPUIdle    = 0x1
	reasonSWPowerCap = 0x4
	reasonHWSlowdown = 0x8
	reasonHWThermal  = 0x40
)

// idleActivity is a GPU with a CUDA context and no kernels.
var idleActivity = activity{intensity: 0.15, idle: true}

// freeActivity is a GPU without any process.
var freeActivity = activity{intensity: 0.1, idle: true}

// lightActivity is a notebook: a few small kernels now and then, a little
// host traffic.
var lightActivity = activity{gr: 0.05, sm: 0.04, occ: 0.02, tensor: 0.01, dram: 0.03, fp32: 0.02, pcieTX: 0.01, pcieRX: 0.02, intensity: 0.3}

func (s *Source) gpuActivity(g *gpuSim, tsec float64) activity {
	if g.plan != nil {
		return s.planActivity(g, tsec)
	}
	if g.free || g.light {
		a := freeActivity
		if g.light {
			a = lightActivity
		}
		for _, gi := range g.gis {
			gi.act = a
		}
		return a
	}
	if g.idle {
		for _, gi := range g.gis {
			gi.act = idleActivity
		}
		return idleActivity
	}
	if g.kind != nil {
		return g.kind.at(tsec)
	}
	if len(g.gis) == 0 {
		return s.job.at(tsec)
	}
	a := activity{idle: true}
	for _, gi := range g.gis {
		gi.act = gi.activity(tsec)
		a.blend(&gi.act, float64(gi.prof.compute)/migComputeSlices)
		a.idle = a.idle && gi.act.idle
	}
	// MIG turns off NVLink peer traffic.
	a.nvlink = 0
	return a
}

// fbUsed returns the GPU's used framebuffer (MiB) tsec after the start and
// updates its MIG instances' share.
func (s *Source) fbUsed(g *gpuSim, tsec float64) int64 {
	if g.plan != nil {
		return s.planFB(g, tsec)
	}
	if g.free || g.light {
		share := 0.0
		if g.light {
			share = lightMemShare
		}
		var sum int64
		for _, gi := range g.gis {
			gi.fbUsed = int64(share * float64(gi.fbTotal))
			sum += gi.fbUsed
		}
		if len(g.gis) == 0 {
			sum = int64(share * float64(s.cfg.model.fbTotal-s.cfg.model.fbReserved))
		}
		return sum
	}
	if g.idle {
		var sum int64
		for _, gi := range g.gis {
			gi.fbUsed = contextMiB
			sum += contextMiB
		}
		if len(g.gis) == 0 {
			sum = contextMiB
		}
		return sum
	}
	if len(g.gis) == 0 {
		usable := s.cfg.model.fbTotal - s.cfg.model.fbReserved
		return int64(g.memFrac * float64(usable) * s.job.memRamp(tsec))
	}
	var sum int64
	for _, gi := range g.gis {
		gi.fbUsed = int64(gi.memFrac * float64(gi.fbTotal) * gi.job.memRamp(tsec))
		sum += gi.fbUsed
	}
	return sum
}

// lightMemShare is the part of the framebuffer a notebook holds.
const lightMemShare = 0.35

// power returns the board power (W) for an activity and whether the power
// limit capped it.
func (s *Source) power(g *gpuSim, a *activity, tick int64) (float64, bool) {
	m := s.cfg.model
	load := (0.05 + 0.45*a.sm + 0.4*a.tensor + 0.2*a.dram) * a.intensity
	load *= 1 + 0.04*(fraction(hash4(s.seed, uint64(g.idx), tagNoise, uint64(tick)))-0.5)
	if g.plan != nil && g.plan.powerScale > 0 {
		load *= g.plan.powerScale
	}
	demand := m.idleW + (m.limitW-m.idleW)*load
	if demand > m.limitW {
		return m.limitW * (0.99 + 0.01*fraction(hash4(s.seed, uint64(g.idx), tagNoise+100, uint64(tick)))), true
	}
	return demand, false
}
