package sim

import "math"

// The works of the memory scenarios: memory full by design (a server that
// preallocates, a training job near the top, a warm-up fill), and memory
// that runs out (an out-of-memory loop, a job whose need grows to the top).

// steadyFull is a training job holding between lowMiB and highMiB once it
// has warmed up: its allocator grows and trims its pool by a little as
// batch shapes vary, over periods of minutes.
type steadyFull struct {
	training
	lowMiB, highMiB float64
}

// steadyPeriod is how long one swing of a steady job's memory takes.
const steadyPeriod = 7 * 60

func (w *steadyFull) memMiB(tsec float64) float64 {
	// The training part holds lowMiB once warmed up.
	base := w.training.memMiB(tsec)
	if base < w.lowMiB {
		return base
	}
	return w.lowMiB + (w.highMiB-w.lowMiB)*0.5*(1-math.Cos(2*math.Pi*tsec/steadyPeriod))
}

// warmingUp is a model server that starts at start, loads its weights and
// allocates its cache over fill seconds, running little meanwhile, then
// serves with that memory held.
type warmingUp struct {
	serving
	start, fill float64
}

func (w *warmingUp) at(tsec float64) activity {
	if tsec < w.start+w.fill {
		if tsec < w.start {
			return freeActivity
		}
		return idleActivity
	}
	return w.serving.at(tsec)
}

func (w *warmingUp) memMiB(tsec float64) float64 {
	switch {
	case tsec < w.start:
		return 0
	case tsec < w.start+w.fill:
		return contextMiB + (w.mib-contextMiB)*(tsec-w.start)/w.fill
	}
	return w.mib
}

// oomLoop is a training job that dies of out-of-memory and restarts: each
// run loads for load seconds holding a CUDA context, then its memory climbs
// to the whole of topMiB over climb seconds (a batch too large, activations
// piling up), the allocation past the top fails and the process ends; the
// pod restarts it after backoff seconds.
type oomLoop struct {
	j                    job
	topMiB               float64
	load, climb, backoff float64
}

func (w *oomLoop) cycle() float64 { return w.load + w.climb + w.backoff }

// phase is the seconds since the current run started, and whether it runs.
func (w *oomLoop) phase(tsec float64) (float64, bool) {
	in := math.Mod(max(tsec, 0), w.cycle())
	return in, in < w.load+w.climb
}

func (w *oomLoop) at(tsec float64) activity {
	in, running := w.phase(tsec)
	switch {
	case !running:
		return freeActivity
	case in < w.load:
		return idleActivity
	}
	return w.j.at(in - w.load + w.j.initDur)
}

func (w *oomLoop) memMiB(tsec float64) float64 {
	in, running := w.phase(tsec)
	switch {
	case !running:
		return 0
	case in < w.load:
		return contextMiB
	}
	return contextMiB + (w.topMiB-contextMiB)*(in-w.load)/w.climb
}

// growingNeed is a training job with a sequence-length warm-up: from
// growFrom to growUntil its sequences grow longer, so each step does more
// work and holds more activations, and its memory climbs from fromMiB to
// toMiB with the work.
type growingNeed struct {
	j                   job
	fromMiB, toMiB      float64
	growFrom, growUntil float64
}

func (w *growingNeed) share(tsec float64) float64 {
	return clamp01((tsec - w.growFrom) / (w.growUntil - w.growFrom))
}

func (w *growingNeed) at(tsec float64) activity {
	a := w.j.at(tsec)
	if a.idle {
		return a
	}
	// Short sequences leave the GPU part idle between kernels; the work
	// per step grows with the length.
	k := 0.6 + 0.4*w.share(tsec)
	a.sm, a.occ, a.tensor, a.dram = a.sm*k, a.occ*k, a.tensor*k, a.dram*k
	a.intensity *= 0.8 + 0.2*w.share(tsec)
	return a
}

func (w *growingNeed) memMiB(tsec float64) float64 {
	return w.fromMiB + (w.toMiB-w.fromMiB)*w.share(tsec)
}

// pausing is a training job that stops every `every` seconds for dur
// seconds, after its first period, its memory held: an evaluation run by
// the host or another node, a wait for the next shard of data.
type pausing struct {
	training
	every, dur float64
}

func (w *pausing) at(tsec float64) activity {
	if in := math.Mod(tsec, w.every); tsec >= w.every && in < w.dur {
		return checkpointWait
	}
	return w.training.at(tsec)
}
