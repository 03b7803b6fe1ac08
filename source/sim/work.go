package sim

import "math"

// work is what runs on a GPU or MIG instance of a scenario, over the
// seconds since the node started.
type work interface {
	// at is the activity averaged over the 100 ms before tsec.
	at(tsec float64) activity
	// memMiB is the framebuffer the work holds at tsec.
	memMiB(tsec float64) float64
}

// hungActivity is a GPU whose collective waits forever for a peer: the
// NCCL kernel stays resident and spins on a flag, so the GPU counts as
// busy (GPU_UTIL 100) while a few SMs poll, nothing moves over NVLink and
// the board draws little more than at idle.
var hungActivity = activity{gr: 1, sm: 0.02, occ: 0.01, dram: 0.01, intensity: 1}

// checkpointCopy is the first part of a checkpoint: the model and
// optimizer state copied to host memory.
var checkpointCopy = activity{gr: 0.12, sm: 0.04, occ: 0.01, dram: 0.2, pcieTX: 0.55, pcieRX: 0.01, intensity: 0.4}

// checkpointWait is the rest of it: the host writes the state to storage
// while the GPU waits, memory held.
var checkpointWait = activity{gr: 0, sm: 0, pcieTX: 0.002, pcieRX: 0.002, intensity: 0.15, idle: true}

// training is a data-parallel job's part on one GPU. GPUs given the same
// job step together.
type training struct {
	j job
	// mib is the memory the job holds once its allocator has warmed up.
	mib float64
	// start shifts the job: it starts start seconds after the node.
	start float64
	// hangAt, when positive, is when a collective hangs for good.
	hangAt float64
	// ckptEvery and ckptDur, when positive, pause the job for a
	// checkpoint of ckptDur seconds every ckptEvery seconds.
	ckptEvery, ckptDur float64
}

// ckptCopySeconds is how long the copy to host takes within a checkpoint.
const ckptCopySeconds = 30

func (w *training) at(tsec float64) activity {
	t := tsec - w.start
	switch {
	case w.hangAt > 0 && tsec >= w.hangAt:
		return hungActivity
	case w.ckptEvery > 0 && t > w.j.initDur:
		if in := math.Mod(t, w.ckptEvery); t >= w.ckptEvery && in < w.ckptDur {
			if in < ckptCopySeconds {
				return checkpointCopy
			}
			return checkpointWait
		}
	}
	return w.j.at(t)
}

// memMiB follows a job's start: the weights stream in while it loads, then
// the first steps allocate the optimizer state and activations, and the
// caching allocator holds what it has from then on.
func (w *training) memMiB(tsec float64) float64 {
	t := tsec - w.start
	switch {
	case t <= 0:
		return 0
	case t < w.j.initDur:
		return w.mib * (0.02 + weightsShare*t/w.j.initDur)
	}
	return w.mib * (0.02 + weightsShare + (0.98-weightsShare)*(1-math.Exp(-(t-w.j.initDur)/warmupSeconds)))
}

// weightsShare is the part of a training job's memory its weights take;
// warmupSeconds is how fast the rest is allocated once steps begin.
const (
	weightsShare  = 0.43
	warmupSeconds = 30
)

// held is a process that holds memory and runs nothing: a notebook left
// open, an allocation nobody released, a zombie.
type held struct{ mib float64 }

func (w held) at(float64) activity    { return idleActivity }
func (w held) memMiB(float64) float64 { return w.mib }

// serving is an inference server: memory-bound decoding, steady.
type serving struct {
	k kindJob
	// mib is the memory it holds (weights and KV cache, preallocated).
	mib float64
}

func (w *serving) at(tsec float64) activity { return w.k.at(tsec) }
func (w *serving) memMiB(float64) float64   { return w.mib }

// leaking is an inference server whose memory grows without end: each
// minute it keeps growMiB more, and about every freeEvery seconds its
// allocator hands back freeMiB, never as much as it took meanwhile.
type leaking struct {
	serving
	growMiB, freeMiB, freeEvery float64
	seed, key                   uint64
}

func (w *leaking) memMiB(tsec float64) float64 {
	if tsec <= 0 {
		return w.mib
	}
	frees := 0.0
	for k := w.freeEvery; k <= tsec; k += w.freeEvery {
		// Each free comes up to a fifth of the period early or late.
		jitter := (fraction(hash4(w.seed, w.key, tagScenario, uint64(k))) - 0.5) * 0.4 * w.freeEvery
		if k+jitter <= tsec {
			frees++
		}
	}
	return w.mib + w.growMiB*tsec/60 - w.freeMiB*frees
}

// bursty is a lightly loaded inference server with its memory
// preallocated: requests arrive in bursts of busyMin to busyMax seconds, one
// at a random place in each slot of slot seconds, idle between them; and for
// lull seconds every lullEvery seconds no request comes at all.
type bursty struct {
	mib                    float64
	busyMin, busyMax, slot float64
	lullEvery, lull        float64
	seed, key              uint64
}

// burstActivity is a batch of requests being decoded.
var burstActivity = activity{gr: 0.95, sm: 0.62, occ: 0.35, tensor: 0.28, dram: 0.72, fp16: 0.1, fp32: 0.05,
	pcieRX: 0.03, pcieTX: 0.03, intensity: 0.8}

func (w *bursty) at(tsec float64) activity {
	if w.lullEvery > 0 && math.Mod(tsec, w.lullEvery) >= w.lullEvery-w.lull {
		return idleActivity
	}
	k := uint64(int64(math.Floor(tsec / w.slot)))
	dur := w.busyMin + (w.busyMax-w.busyMin)*fraction(hash4(w.seed, w.key, tagScenario, k<<1))
	start := float64(k)*w.slot + (w.slot-dur)*fraction(hash4(w.seed, w.key, tagScenario, k<<1|1))
	if in := tsec - start; in >= 0 && in < dur {
		return burstActivity
	}
	return idleActivity
}

func (w *bursty) memMiB(float64) float64 { return w.mib }

// saturating is a serving GPU whose load grows past what it can serve:
// from growFrom to fullAt the request rate ramps up, the batch (and its KV
// cache) grows, and the GPU runs flat out from then on.
type saturating struct {
	k                kindJob
	mib, peakMiB     float64
	growFrom, fullAt float64
}

func (w *saturating) load(tsec float64) float64 {
	return clamp01((tsec - w.growFrom) / (w.fullAt - w.growFrom))
}

func (w *saturating) at(tsec float64) activity {
	a := w.k.at(tsec)
	l := w.load(tsec)
	if l <= 0 {
		return a
	}
	full := activity{gr: 1, sm: 0.97, occ: 0.6, tensor: 0.55, dram: 0.92, fp16: 0.2, fp32: 0.08,
		pcieRX: 0.06 + 0.04*l, pcieTX: 0.05, intensity: 0.82}
	var out activity
	out.blend(&a, 1-l)
	out.blend(&full, l)
	return out
}

func (w *saturating) memMiB(tsec float64) float64 {
	return w.mib + (w.peakMiB-w.mib)*w.load(tsec)
}

// restarting is a single-GPU job whose process ends at stopAt, after which
// the GPU is reset at resetAt and the job starts again, from its
// checkpoint, at restartAt.
type restarting struct {
	first, again               training
	stopAt, resetAt, restartAt float64
}

func (w *restarting) at(tsec float64) activity {
	switch {
	case tsec < w.stopAt:
		return w.first.at(tsec)
	case tsec < w.restartAt:
		return freeActivity
	}
	return w.again.at(tsec)
}

func (w *restarting) memMiB(tsec float64) float64 {
	switch {
	case tsec < w.stopAt:
		return w.first.memMiB(tsec)
	case tsec < w.restartAt:
		return 0
	}
	return w.again.memMiB(tsec)
}
