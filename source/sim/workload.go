package sim

import "math"

// Stream tags keep the pseudo-random draws of different quantities
// independent of each other.
const (
	tagStall uint64 = iota + 1
	tagStallStart
	tagStallDur
	tagStep
	tagHeavy
	tagPeriod
	tagFrac
	tagInit
	tagOffset
	tagMem
	tagNoise
	tagEvent
	tagEventPick
	tagAmbient
	tagIdentity
	tagPID
	tagEnergy
	tagEventDur
	tagScenario
	tagFabric
)

// mix is the splitmix64 finaliser: a cheap, well-spread 64-bit hash.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// hash4 hashes a seed and three coordinates. Every simulated quantity is a
// function of such hashes, which makes the simulation reproducible from the
// seed and the sample times alone.
func hash4(seed, a, b, c uint64) uint64 {
	x := mix(seed ^ 0x9e3779b97f4a7c15)
	x = mix(x ^ a)
	x = mix(x ^ (b + 0x632be59bd9b4e019))
	return mix(x ^ (c + 0x8cb92ba72f3d8dd7))
}

// fraction maps a hash to a number in [0, 1).
func fraction(h uint64) float64 { return float64(h>>11) / (1 << 53) }

func clamp01(v float64) float64 {
	switch {
	case v < 0:
		return 0
	case v > 1:
		return 1
	}
	return v
}

// job is one training process's timing: a data-parallel job spanning all
// GPUs of a node (they step together), or an independent job per MIG instance.
type job struct {
	seed uint64
	key  uint64
	// period of one training step (s) and the part of it spent computing;
	// the rest is the gradient all-reduce.
	period, computeFrac float64
	// initDur is the start-up time (s): weights loading, little compute.
	initDur float64
	offset  float64
}

func newJob(seed, key uint64) job {
	return job{
		seed:        seed,
		key:         key,
		period:      1 + fraction(hash4(seed, key, tagPeriod, 0)),
		computeFrac: 0.72 + 0.12*fraction(hash4(seed, key, tagFrac, 0)),
		initDur:     20 + 40*fraction(hash4(seed, key, tagInit, 0)),
		offset:      fraction(hash4(seed, key, tagOffset, 0)) * 2,
	}
}

// activity is what the GPU (or MIG instance) is doing at one instant.
// Ratios are 0..1; pcie and nvlink are fractions of the bus's capacity.
type activity struct {
	gr, sm, occ, tensor, dram, fp64, fp32, fp16 float64
	pcieTX, pcieRX                              float64
	nvlink                                      float64
	// intensity scales power: heavier steps push the board to its limit.
	intensity float64
	// idle is true when no kernel runs (start-up, data-loader stall).
	idle bool
}

// stallWindow is the span (s) in which at most one data-loader stall happens.
const stallWindow = 25.0

// at returns the job's activity tsec seconds after the simulation started.
func (j *job) at(tsec float64) activity {
	if tsec < 0 {
		tsec = 0
	}
	if tsec < j.initDur {
		// Start-up: reading the checkpoint from host memory, occasional
		// small kernels.
		burst := 0.0
		if math.Mod(tsec, 7) < 1 {
			burst = 0.15
		}
		return activity{gr: 0.02 + burst, sm: 0.01 + burst*0.6, occ: 0.005 + burst*0.2, dram: 0.01 + burst*0.3,
			fp32: burst * 0.2, pcieRX: 0.55, pcieTX: 0.01, intensity: 0.3, idle: burst == 0}
	}
	w := math.Floor(tsec / stallWindow)
	wi := uint64(int64(w))
	if fraction(hash4(j.seed, j.key, tagStall, wi)) < 0.6 {
		start := w*stallWindow + fraction(hash4(j.seed, j.key, tagStallStart, wi))*(stallWindow-2)
		dur := 0.5 + 1.5*fraction(hash4(j.seed, j.key, tagStallDur, wi))
		if tsec >= start && tsec < start+dur {
			// Data-loader stall: the GPU waits for the next batch, which
			// arrives over PCIe at the end.
			return activity{gr: 0.02, sm: 0.01, occ: 0.004, dram: 0.01, pcieRX: 0.3, pcieTX: 0.01, intensity: 0.2, idle: true}
		}
	}
	pos := (tsec + j.offset) / j.period
	step := math.Floor(pos)
	frac := pos - step
	si := uint64(int64(step))
	intensity := 0.9 + 0.12*fraction(hash4(j.seed, j.key, tagStep, si))
	if fraction(hash4(j.seed, j.key, tagHeavy, si)) < 0.015 {
		intensity = 1.16
	}
	if frac < j.computeFrac {
		return activity{
			gr: 0.97, sm: clamp01(0.88 * intensity), occ: 0.42 * intensity, tensor: clamp01(0.6 * intensity),
			dram: clamp01(0.52 * intensity), fp64: 0.0004, fp32: 0.1, fp16: 0.07,
			pcieRX: 0.04, pcieTX: 0.01, nvlink: 0.03, intensity: intensity,
		}
	}
	// Gradient all-reduce: NCCL kernels move data over NVLink.
	return activity{
		gr: 0.9, sm: 0.34, occ: 0.12, tensor: 0.02, dram: 0.3, fp32: 0.05, fp16: 0.03,
		pcieRX: 0.02, pcieTX: 0.02, nvlink: 0.7, intensity: 0.55,
	}
}

// blend adds a weighted activity into a (MIG instances into their GPU).
func (a *activity) blend(b *activity, w float64) {
	a.gr += b.gr * w
	a.sm += b.sm * w
	a.occ += b.occ * w
	a.tensor += b.tensor * w
	a.dram += b.dram * w
	a.fp64 += b.fp64 * w
	a.fp32 += b.fp32 * w
	a.fp16 += b.fp16 * w
	a.pcieTX += b.pcieTX * w
	a.pcieRX += b.pcieRX * w
	a.intensity += b.intensity * w
}

// memRamp is the fraction of its steady framebuffer a job holds tsec after
// the start: the framework allocates weights, optimizer state and its
// caching pool over the first minutes, then stays flat.
func (j *job) memRamp(tsec float64) float64 {
	if tsec <= 0 {
		return 0.02
	}
	return 0.02 + 0.98*(1-math.Exp(-tsec/(j.initDur+40)))
}
