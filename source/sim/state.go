package sim

import (
	"math"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
)

// Rare events, with their base rate per GPU-hour (EventRate 1).
const (
	evSBE = iota
	evPCIeReplay
	evNVLinkErr
	evXID13
	evXID31
	evHWSlowdown
	evHWThermal
	evDBE
	evXID79
	numEvents
)

var eventPerHour = [numEvents]float64{
	evSBE:        0.2,
	evPCIeReplay: 0.5,
	evNVLinkErr:  0.3,
	evXID13:      0.05,
	evXID31:      0.05,
	evHWSlowdown: 0.01,
	evHWThermal:  0.005,
	evDBE:        0.002,
	evXID79:      0.0005,
}

// healthTicks is how long (10 min) a severe XID leaves the health status
// degraded.
const healthTicks = 6000

func (s *Source) setEventRates() {
	cum := 0.0
	for i := 0; i < numEvents; i++ {
		r := eventPerHour[i]
		if i == evNVLinkErr && s.cfg.links == 0 {
			r = 0
		}
		cum += r * s.cfg.EventRate * tickSec / 3600
		s.evCum[i] = cum
	}
}

// advance integrates the node's state up to tick on the absolute 100 ms grid.
func (s *Source) advance(tick int64) {
	if !s.started {
		s.start(tick)
		return
	}
	if tick <= s.last {
		return
	}
	if tick-s.last > maxCatch {
		// A long pause (suspended process, clock jump): integrate only the
		// last hour in detail and account energy for the rest at the
		// last average power.
		skip := tick - maxCatch - s.last
		for _, g := range s.gpus {
			g.energy += g.powerAvg * float64(skip) * tickSec * 1000
		}
		s.last = tick - maxCatch
	}
	for t := s.last + 1; t <= tick; t++ {
		tsec := float64(t-s.t0) * tickSec
		for _, g := range s.gpus {
			s.step(g, t, tsec)
		}
	}
	s.last = tick
}

func (s *Source) start(tick int64) {
	s.started = true
	s.t0, s.last = tick, tick
	m := s.cfg.model
	idle := m.idleW / m.limitW
	for _, g := range s.gpus {
		g.temp = g.ambient + m.tempBase + m.tempRise*idle
		g.memTemp = g.ambient + m.tempBase + m.tempRise*idle + hbmMargin
		g.powerAvg = m.idleW
		uptime := (1 + 29*fraction(hash4(s.seed, uint64(g.idx), tagEnergy, 0))) * 86400
		g.energy = math.Floor(uptime * m.idleW * 1.5 * 1000)
		g.eccSBEAgg = math.Floor(4 * fraction(hash4(s.seed, uint64(g.idx), tagEnergy, 1)))
	}
}

// hbmMargin is how far (C) the HBM stacks sit above the die at rest.
const hbmMargin = 4.0

// step advances one GPU by one tick.
func (s *Source) step(g *gpuSim, t int64, tsec float64) {
	m := s.cfg.model
	a := s.gpuActivity(g, tsec)
	p, capped := s.power(g, &a, t)
	g.energy += p * tickSec * 1000
	g.powerAvg += (p - g.powerAvg) * 0.1
	frac := p / m.limitW
	// First-order lags: the die follows power within tens of seconds, the
	// memory stacks a little slower. HBM runs a few degrees above the die,
	// more when the memory is busy.
	if g.plan != nil {
		s.stepPlan(g, t, tsec, frac)
	}
	g.temp += (g.ambient + m.tempBase + m.tempRise*frac + g.sinkExcess - g.temp) * (tickSec / 25)
	g.memTemp += (g.ambient + m.tempBase + m.tempRise*frac + hbmMargin + 6*a.dram - g.memTemp) * (tickSec / 40)
	const dt = float64(tickNS)
	if capped {
		g.viol[violPower] += dt
	}
	if a.idle {
		g.viol[violLowUtil] += dt
	}
	if t < g.slowUntil {
		g.viol[violBoard] += dt
	}
	if t < g.thermUntil {
		g.viol[violThermal] += dt
	}
	u := fraction(hash4(s.seed, uint64(g.idx), tagEvent, uint64(t)))
	if u < s.evCum[numEvents-1] {
		for ev := 0; ev < numEvents; ev++ {
			if u < s.evCum[ev] {
				s.event(g, ev, t)
				break
			}
		}
	}
}

func (s *Source) event(g *gpuSim, ev int, t int64) {
	v := fraction(hash4(s.seed, uint64(g.idx), tagEventPick, uint64(t)))
	switch ev {
	case evSBE:
		g.eccSBEVol++
		g.eccSBEAgg++
		if v < 0.1 {
			g.remapCorr++
		}
	case evDBE:
		g.eccDBEVol++
		g.eccDBEAgg++
		g.remapUncorr++
		s.xid(g, 48, t)
		g.health, g.healthUntil = 10, t+healthTicks
	case evPCIeReplay:
		g.pcieReplay += 1 + math.Floor(v*3)
	case evNVLinkErr:
		link := int(v * float64(s.cfg.links))
		k := fraction(hash4(s.seed, uint64(g.idx), tagEventDur, uint64(t)))
		switch {
		case k < 0.6:
			g.nvlErr[0][link]++
		case k < 0.8:
			g.nvlErr[1][link]++
		case k < 0.95:
			g.nvlErr[2][link]++
		default:
			g.nvlErr[3][link]++
		}
	case evXID13:
		s.xid(g, 13, t)
	case evXID31:
		s.xid(g, 31, t)
	case evXID79:
		s.xid(g, 79, t)
		g.health, g.healthUntil = 20, t+healthTicks
	case evHWSlowdown:
		g.slowUntil = t + 20 + int64(v*80)
	case evHWThermal:
		g.thermUntil = t + 30 + int64(v*120)
	}
}

// xid records an XID; the ring holds events until the watching group's next
// Collect hands them to the sink, and drops the oldest when full.
func (s *Source) xid(g *gpuSim, code uint64, t int64) {
	g.lastXID = float64(code)
	if !s.xidWatched {
		return
	}
	if g.ringLen == xidRing {
		g.ringStart = (g.ringStart + 1) % xidRing
		g.ringLen--
	}
	g.ring[(g.ringStart+g.ringLen)%xidRing] = xidEvent{xid: code, ts: t * tickNS}
	g.ringLen++
}

// noise is a deterministic value in [-1, 1) for one sample of one field.
func (s *Source) noise(g *gpuSim, sub int, id uint16) float64 {
	return 2*fraction(hash4(s.seed, uint64(g.idx)<<8|uint64(sub), uint64(id)|tagNoise<<16, uint64(s.nowTick))) - 1
}

// value is the current value of one planned (entity, field).
func (s *Source) value(o *op) float64 {
	g := o.g
	id := o.f.id
	if o.f.scope == scopeLink {
		return s.linkValue(g, o.f.kind, o.f.link)
	}
	if o.gi != nil {
		gi := o.gi
		switch id {
		case fieldid.FBTotal:
			return float64(gi.fbTotal)
		case fieldid.FBUsed:
			return float64(gi.fbUsed)
		case fieldid.FBFree:
			return float64(gi.fbTotal - gi.fbUsed)
		case fieldid.FBReserved:
			return 0
		}
		return s.profValue(&gi.act, id, s.noise(g, gi.idx+1, id), float64(gi.prof.compute)/migComputeSlices)
	}
	if o.ent.Kind == source.NVLink {
		switch id {
		case fieldid.ProfNVLinkTXBytes:
			return s.linkBytes(g, o.ent.Link, false)
		case fieldid.ProfNVLinkRXBytes:
			return s.linkBytes(g, o.ent.Link, true)
		}
	}
	if v, ok := s.clockPowerValue(g, id); ok {
		return v
	}
	if v, ok := s.pcieLinkValue(g, id); ok {
		return v
	}
	if v, ok := s.memoryValue(g, id); ok {
		return v
	}
	if v, ok := s.eventValue(g, id); ok {
		return v
	}
	v := s.profValue(&g.act, id, s.noise(g, 0, id), 1)
	if s.cfg.Noise > 0 && g.kind != nil {
		v = s.extraNoise(g, id, v)
	}
	return v
}

// pcieLinkValue reads the PCIe link fields of a GPU: the link at its
// model's maximum, but for a GeForce card at rest (its idle generation) and
// a GPU of a scenario whose link trained lower (fewer lanes, an older
// generation); false for the other fields.
func (s *Source) pcieLinkValue(g *gpuSim, id uint16) (float64, bool) {
	m := s.cfg.model
	switch id {
	case fieldid.PCIeLinkGen:
		switch {
		case m.pcieIdleGen > 0 && g.act.idle:
			return float64(m.pcieIdleGen), true
		case g.plan != nil && g.plan.pcieGen > 0:
			return float64(g.plan.pcieGen), true
		}
		return float64(m.pcieGen), true
	case fieldid.PCIeMaxLinkGen:
		return float64(m.pcieGen), true
	case fieldid.PCIeLinkWidth:
		if g.plan != nil && g.plan.pcieLanes > 0 {
			return float64(g.plan.pcieLanes), true
		}
		return float64(m.pcieWidth), true
	case fieldid.PCIeMaxLinkWidth:
		return float64(m.pcieWidth), true
	}
	return 0, false
}

// clockPowerValue reads the clock, temperature, power and utilisation
// fields of a GPU; false for the others.
func (s *Source) clockPowerValue(g *gpuSim, id uint16) (float64, bool) {
	m := s.cfg.model
	switch id {
	case fieldid.SMClock:
		switch {
		case g.act.idle:
			return m.idleSMClock, true
		case g.plan != nil && g.plan.smClock > 0:
			return g.plan.smClock, true
		case g.capped:
			return math.Round(m.maxSMClock*(0.88+0.06*fraction(hash4(s.seed, uint64(g.idx), uint64(id), uint64(s.nowTick))))/15) * 15, true
		}
		return m.maxSMClock, true
	case fieldid.MemClock:
		return m.memClock, true
	case fieldid.VideoClock:
		return videoClock(m, g.act.idle), true
	case fieldid.Pstate, fieldid.ComputeMode, fieldid.GetGPURecoveryAction:
		// Data-center GPUs stay in P0 under persistence mode, busy or not;
		// the compute mode is Default and no recovery action is pending.
		return 0, true
	case fieldid.PersistenceMode:
		return 1, true
	case fieldid.MIGMode:
		if len(g.gis) > 0 {
			return 1, true
		}
		return 0, true
	case fieldid.FabricManagerStatus, fieldid.FabricManagerError, fieldid.FabricCliqueID,
		fieldid.FabricHealthMask, fieldid.FabricHealthSummary:
		return fabricValue(g, id), true
	case fieldid.PowerMgmtLimitDef:
		return m.limitW, true
	case fieldid.PowerMgmtLimitMin, fieldid.PowerMgmtLimitMax:
		return powerLimitRange(m, id == fieldid.PowerMgmtLimitMax), true
	case fieldid.PCIeTXThroughput:
		return math.Round(g.act.pcieTX * m.pcieBytes / 1024), true
	case fieldid.PCIeRXThroughput:
		return math.Round(g.act.pcieRX * m.pcieBytes / 1024), true
	case fieldid.ClocksEventReasons:
		return float64(g.reasons), true
	case fieldid.MaxSMClock:
		return m.maxSMClock, true
	case fieldid.MaxMemClock:
		return m.memClock, true
	case fieldid.FanSpeed:
		return fanSpeed(g.temp), true
	case fieldid.MemoryTemp:
		return math.Round(g.memTemp), true
	case fieldid.GPUTemp:
		return math.Round(g.temp), true
	case fieldid.PowerUsage:
		return math.Round(g.powerAvg*1000) / 1000, true
	case fieldid.TotalEnergyConsumption:
		return math.Floor(g.energy), true
	case fieldid.PowerUsageInstant:
		return math.Round(g.powerInst*1000) / 1000, true
	case fieldid.PowerMgmtLimit, fieldid.EnforcedPowerLimit:
		return m.limitW, true
	case fieldid.PCIeReplayCounter:
		return g.pcieReplay, true
	case fieldid.GPUUtil:
		return math.Round(100 * clamp01(g.act.gr/0.95*(1+0.03*s.noise(g, 0, id)))), true
	case fieldid.MemCopyUtil:
		return math.Round(100 * clamp01(0.9*g.act.dram*(1+0.05*s.noise(g, 0, id)))), true
	case fieldid.EncUtil, fieldid.DecUtil:
		return 0, true
	}
	return 0, false
}

// memoryValue reads the frame buffer, ECC and row-remapping fields of a
// GPU; false for the others.
func (s *Source) memoryValue(g *gpuSim, id uint16) (float64, bool) {
	m := s.cfg.model
	switch id {
	case fieldid.FBTotal:
		return float64(m.fbTotal), true
	case fieldid.FBUsed:
		return float64(g.fbUsed), true
	case fieldid.FBFree:
		return float64(m.fbTotal - m.fbReserved - g.fbUsed), true
	case fieldid.FBReserved:
		return float64(m.fbReserved), true
	case fieldid.ECCSBEVolTotal:
		return g.eccSBEVol, true
	case fieldid.ECCDBEVolTotal:
		return g.eccDBEVol, true
	case fieldid.ECCSBEAggTotal:
		return g.eccSBEAgg, true
	case fieldid.ECCDBEAggTotal:
		return g.eccDBEAgg, true
	case fieldid.RetiredSBE, fieldid.RetiredDBE, fieldid.RetiredPending:
		// These boards repair memory by row remapping; pages are not retired.
		return 0, true
	case fieldid.UncorrectableRemappedRows:
		return g.remapUncorr, true
	case fieldid.CorrectableRemappedRows:
		return g.remapCorr, true
	case fieldid.RowRemapPending:
		// An uncorrectable error's remap only takes effect at the next GPU
		// reset, which the simulated node never does.
		if g.remapUncorr > 0 {
			return 1, true
		}
		return 0, true
	case fieldid.RowRemapFailure, fieldid.VGPULicenseStatus:
		return 0, true
	}
	return 0, false
}

// eventValue reads the XID, violation and NVLink counter fields of a GPU;
// false for the others.
func (s *Source) eventValue(g *gpuSim, id uint16) (float64, bool) {
	switch id {
	case fieldid.XIDErrors:
		return g.lastXID, true
	case fieldid.PowerViolation:
		return g.viol[violPower], true
	case fieldid.ThermalViolation:
		return g.viol[violThermal], true
	case fieldid.BoardLimitViolation:
		return g.viol[violBoard], true
	case fieldid.LowUtilViolation:
		return g.viol[violLowUtil], true
	case fieldid.SyncBoostViolation, fieldid.ReliabilityViolation:
		return 0, true
	case fieldid.NVLinkCRCFlitErrorCountTotal:
		return s.linkErrTotal(g, 0), true
	case fieldid.NVLinkCRCDataErrorCountTotal:
		return s.linkErrTotal(g, 1), true
	case fieldid.NVLinkReplayErrorCountTotal:
		return s.linkErrTotal(g, 2), true
	case fieldid.NVLinkRecoveryErrorCountTotal:
		return s.linkErrTotal(g, 3), true
	case fieldid.NVLinkBandwidthTotal:
		sum := 0.0
		for l := 0; l < s.cfg.links; l++ {
			sum += s.linkValue(g, linkBandwidth, l)
		}
		return sum, true
	case fieldid.ProfNVLinkTXBytes, fieldid.ProfNVLinkRXBytes:
		sum := 0.0
		for l := 0; l < s.cfg.links; l++ {
			sum += s.linkBytes(g, l, id == fieldid.ProfNVLinkRXBytes)
		}
		return sum, true
	}
	return 0, false
}

// extraNoise adds Config.Noise to a profiling activity of a GPU running a
// workload kind, drawn independently of the sensor noise.
func (s *Source) extraNoise(g *gpuSim, id uint16, v float64) float64 {
	n := 2*fraction(hash4(s.seed, uint64(g.idx)<<8|0xFF, uint64(id)|tagNoise<<16, uint64(s.nowTick)|1<<62)) - 1
	switch id {
	case fieldid.ProfPCIeTXBytes, fieldid.ProfPCIeRXBytes:
		return math.Max(0, math.Round(v*(1+2*s.cfg.Noise*n)))
	case fieldid.ProfGREngineActive, fieldid.ProfSMActive, fieldid.ProfSMOccupancy, fieldid.ProfPipeTensorActive,
		fieldid.ProfDRAMActive, fieldid.ProfPipeFP64Active, fieldid.ProfPipeFP32Active, fieldid.ProfPipeFP16Active:
		return clamp01(v + s.cfg.Noise*n)
	}
	return v
}

// profValue is a DCGM_FI_PROF_* activity of a GPU or MIG instance; share is
// the instance's part of the GPU, which scales its PCIe traffic.
func (s *Source) profValue(a *activity, id uint16, n, share float64) float64 {
	switch id {
	case fieldid.ProfGREngineActive:
		return clamp01(a.gr + 0.01*n)
	case fieldid.ProfSMActive:
		return clamp01(a.sm + 0.02*n)
	case fieldid.ProfSMOccupancy:
		return clamp01(a.occ + 0.02*n)
	case fieldid.ProfPipeTensorActive:
		return clamp01(a.tensor + 0.02*n)
	case fieldid.ProfDRAMActive:
		return clamp01(a.dram + 0.02*n)
	case fieldid.ProfPipeFP64Active:
		return clamp01(a.fp64 * (1 + 0.2*n))
	case fieldid.ProfPipeFP32Active:
		return clamp01(a.fp32 + 0.01*n)
	case fieldid.ProfPipeFP16Active:
		return clamp01(a.fp16 + 0.01*n)
	case fieldid.ProfPCIeTXBytes:
		return math.Round(a.pcieTX * (1 + 0.1*n) * s.cfg.model.pcieBytes * share)
	case fieldid.ProfPCIeRXBytes:
		return math.Round(a.pcieRX * (1 + 0.1*n) * s.cfg.model.pcieBytes * share)
	}
	return 0
}

// linkBytes is one link's traffic in one direction, bytes/s.
func (s *Source) linkBytes(g *gpuSim, link int, rx bool) float64 {
	sub := 2 * link
	if rx {
		sub++
	}
	n := s.noise(g, 0, 0xF800+uint16(sub))
	return math.Round(clamp01(g.act.nvlink*(1+0.1*n)) * s.cfg.model.linkBytes)
}

func (s *Source) linkValue(g *gpuSim, kind linkKind, link int) float64 {
	switch kind {
	case linkCRCFlit:
		return g.nvlErr[0][link]
	case linkCRCData:
		return g.nvlErr[1][link]
	case linkReplay:
		return g.nvlErr[2][link]
	case linkRecovery:
		return g.nvlErr[3][link]
	case linkBandwidth:
		return math.Round((s.linkBytes(g, link, false) + s.linkBytes(g, link, true)) / 1e6)
	case linkProfTX:
		return s.linkBytes(g, link, false)
	case linkProfRX:
		return s.linkBytes(g, link, true)
	}
	return 0
}

func (s *Source) linkErrTotal(g *gpuSim, k int) float64 {
	sum := 0.0
	for l := 0; l < s.cfg.links; l++ {
		sum += g.nvlErr[k][l]
	}
	return sum
}

// Static strings of label-type fields.
const (
	driverVersion = "570.133.20"
	nvmlVersion   = "12.570.133.20"
)

func (s *Source) text(g *gpuSim, id uint16) string {
	switch id {
	case fieldid.DriverVersion:
		return driverVersion
	case fieldid.NVMLVersion:
		return nvmlVersion
	case fieldid.Name:
		return s.cfg.model.name
	case fieldid.Brand:
		return "NVIDIA"
	case fieldid.Serial:
		return g.serial
	case fieldid.UUID:
		return g.ent.UUID
	case fieldid.OEMInforomVer:
		return "2.1"
	case fieldid.PCIBusID:
		return g.ent.PCIBusID
	case fieldid.ECCInforomVer:
		return "7.16"
	case fieldid.PowerInforomVer:
		return "N/A"
	case fieldid.InforomImageVer:
		return "G520.0200.00.05"
	case fieldid.VBIOSVersion:
		return s.cfg.model.vbios
	case fieldid.CUDADriverVersion:
		// DCGM's integer for CUDA 12.8, the version driver 570 carries.
		return "12080"
	case fieldid.CUDAComputeCapability:
		return s.cfg.model.computeCap
	case fieldid.FabricClusterUUID:
		return s.fabricCluster
	}
	return ""
}

// videoClock is the model's video clock idle or busy; a model without
// measured ones follows its SM clock at the ratio an H100 shows.
func videoClock(m *model, idle bool) float64 {
	switch {
	case idle && m.idleVideo > 0:
		return m.idleVideo
	case !idle && m.busyVideo > 0:
		return m.busyVideo
	case idle:
		return math.Round(m.maxSMClock * 0.386)
	}
	return math.Round(m.maxSMClock * 0.886)
}

// powerLimitRange is the lowest or highest power limit an operator may
// set; a model without measured ones allows 2/7 of its limit up to the
// limit, as an H100 SXM allows 200 W to 700 W.
func powerLimitRange(m *model, highest bool) float64 {
	switch {
	case highest && m.maxLimitW > 0:
		return m.maxLimitW
	case highest:
		return m.limitW
	case m.minLimitW > 0:
		return m.minLimitW
	}
	return math.Round(m.limitW * 2 / 7)
}
