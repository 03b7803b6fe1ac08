package sim

import (
	"fmt"
	"math"
	"strings"
)

// Workload is what a simulated GPU runs. Each kind has a known truth (its
// step period, its stall share and what it is bound by), which the workload
// insight metrics are tested against.
type Workload string

const (
	// DataParallel is the node-wide training job of the package comment:
	// every GPU of the node steps together, with random data-loader stalls.
	// It is what a GPU runs when Config.Workloads is empty.
	DataParallel Workload = "data-parallel"
	// ComputeBound is training whose steps are nearly all matmul: a long
	// compute phase and a short gradient all-reduce.
	ComputeBound Workload = "compute"
	// MemoryBound is an inference server: memory-bandwidth-bound decoding
	// with little tensor work and no steps.
	MemoryBound Workload = "memory"
	// CommunicationBound is training dominated by its all-reduce: a short
	// compute phase and a long NVLink collective.
	CommunicationBound Workload = "communication"
	// InputBound is training starved by a slow data loader: each step waits
	// idle for its batch, which arrives over PCIe.
	InputBound Workload = "input"
	// IdleAllocated holds a CUDA context and runs nothing.
	IdleAllocated Workload = "idle"
)

// Mixed is the kind that, given to ParseWorkloads, cycles the kinds over
// the GPUs.
const Mixed = "mixed"

// Kinds lists the workload kinds with a known truth, in the order Mixed
// assigns them.
func Kinds() []Workload {
	return []Workload{ComputeBound, MemoryBound, CommunicationBound, InputBound, IdleAllocated}
}

func (w Workload) valid() bool {
	if w == DataParallel {
		return true
	}
	for _, k := range Kinds() {
		if w == k {
			return true
		}
	}
	return false
}

// ParseWorkloads reads a --sim-workload value for an n-GPU node: "mixed"
// (the kinds in turn, GPU 0 compute-bound), one kind for every GPU, or a
// comma-separated kind per GPU.
func ParseWorkloads(spec string, n int) ([]Workload, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" || spec == Mixed {
		out := make([]Workload, n)
		for i := range out {
			out[i] = Kinds()[i%len(Kinds())]
		}
		return out, nil
	}
	parts := strings.Split(spec, ",")
	if len(parts) != 1 && len(parts) != n {
		return nil, fmt.Errorf("workloads %q: give one kind for every GPU or %d kinds, one per GPU (got %d)", spec, n, len(parts))
	}
	out := make([]Workload, n)
	for i := range out {
		w := Workload(strings.TrimSpace(parts[min(i, len(parts)-1)]))
		if !w.valid() {
			return nil, fmt.Errorf("workloads %q: unknown kind %q (known: %s, %s, or %s)", spec, w, kindNames(), DataParallel, Mixed)
		}
		out[i] = w
	}
	return out, nil
}

func kindNames() string {
	var names []string
	for _, k := range Kinds() {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
}

// Truth is what a GPU's workload does, as the simulation defines it.
type Truth struct {
	Workload Workload
	// Period is the mean step period in seconds; 0 for a workload without
	// steps.
	Period float64
	// StallShare is the share of the busy span the GPU waits idle between
	// busy phases.
	StallShare float64
	// Bound is the class that holds the GPU most of the time, as the
	// insight rules name it: compute, memory, communication, input or idle.
	Bound string
	// BoundShare is the share of time in that class.
	BoundShare float64
}

// kindJob is one GPU's workload of a known kind.
type kindJob struct {
	kind   Workload
	seed   uint64
	key    uint64
	period float64
	// busyFrac is the share of a step in its first phase (compute); the
	// rest is the all-reduce or the data-loader wait.
	busyFrac float64
	offset   float64
	// jitter moves each step boundary by up to ±jitter/2 of a period.
	jitter float64
}

func newKindJob(kind Workload, seed, key uint64, jitter float64) kindJob {
	j := kindJob{kind: kind, seed: seed, key: key, jitter: jitter,
		period: 0.8 + 1.2*fraction(hash4(seed, key, tagPeriod, 1)),
		offset: fraction(hash4(seed, key, tagOffset, 1)) * 2,
	}
	u := fraction(hash4(seed, key, tagFrac, 1))
	switch kind {
	case ComputeBound:
		j.busyFrac = 0.80 + 0.06*u
	case CommunicationBound:
		j.busyFrac = 0.30 + 0.10*u
	case InputBound:
		j.busyFrac = 0.35 + 0.13*u
	}
	return j
}

// truth is the kind's known behaviour.
func (j *kindJob) truth() Truth {
	t := Truth{Workload: j.kind}
	switch j.kind {
	case ComputeBound:
		t.Period, t.Bound, t.BoundShare = j.period, "compute", j.busyFrac
	case CommunicationBound:
		t.Period, t.Bound, t.BoundShare = j.period, "communication", 1-j.busyFrac
	case InputBound:
		t.Period, t.StallShare, t.Bound, t.BoundShare = j.period, 1-j.busyFrac, "input", 1-j.busyFrac
	case MemoryBound:
		t.Bound, t.BoundShare = "memory", 1
	case IdleAllocated:
		t.Bound, t.BoundShare = "idle", 1
	}
	return t
}

// boundary is the start time (s) of step k.
func (j *kindJob) boundary(k float64) float64 {
	b := k*j.period - j.offset
	if j.jitter > 0 {
		b += j.jitter * j.period * (fraction(hash4(j.seed, j.key, tagStep, uint64(int64(k))+1<<40)) - 0.5)
	}
	return b
}

// phase returns the fraction of the current step elapsed at tsec and the
// step's index.
func (j *kindJob) phase(tsec float64) (float64, float64) {
	k := math.Floor((tsec + j.offset) / j.period)
	start := j.boundary(k)
	if tsec < start {
		k--
		start = j.boundary(k)
	} else if next := j.boundary(k + 1); tsec >= next {
		k++
		start = next
	}
	end := j.boundary(k + 1)
	return (tsec - start) / (end - start), k
}

// computePhase is the matmul part of a training step.
var computePhase = activity{
	gr: 0.97, sm: 0.93, occ: 0.45, tensor: 0.72, dram: 0.45, fp64: 0.0004, fp32: 0.1, fp16: 0.08,
	pcieRX: 0.02, pcieTX: 0.01, nvlink: 0.02, intensity: 1,
}

// allReducePhase is NCCL moving gradients over NVLink.
var allReducePhase = activity{
	gr: 0.9, sm: 0.3, occ: 0.1, tensor: 0.01, dram: 0.3, fp32: 0.04, fp16: 0.02,
	pcieRX: 0.02, pcieTX: 0.02, nvlink: 0.75, intensity: 0.55,
}

// loaderWait is a GPU waiting for its next batch, which arrives over PCIe.
var loaderWait = activity{gr: 0.02, sm: 0.01, occ: 0.004, dram: 0.02, pcieRX: 0.4, pcieTX: 0.01, intensity: 0.2, idle: true}

// avgSubsamples is how finely at averages the last sampling interval.
const avgSubsamples = 10

// at returns the activity averaged over the 100 ms before tsec, as DCGM's
// profiling metrics average over their sample period: a phase shorter than
// a sample shows as a partial dip instead of vanishing between two samples.
func (j *kindJob) at(tsec float64) activity {
	var a activity
	idle := true
	for i := 0; i < avgSubsamples; i++ {
		b := j.instant(tsec - tickSec + (float64(i)+0.5)*tickSec/avgSubsamples)
		a.blend(&b, 1.0/avgSubsamples)
		a.nvlink += b.nvlink / avgSubsamples
		idle = idle && b.idle
	}
	a.idle = idle
	return a
}

func (j *kindJob) instant(tsec float64) activity {
	if tsec < 0 {
		tsec = 0
	}
	switch j.kind {
	case IdleAllocated:
		return idleActivity
	case MemoryBound:
		// Decoding batches of varying size, 100 ms apart: no period.
		u := fraction(hash4(j.seed, j.key, tagStep, uint64(int64(tsec*10))))
		return activity{gr: 0.9, sm: 0.5 + 0.2*u, occ: 0.3, tensor: 0.08 + 0.06*u, dram: 0.78 + 0.12*u,
			fp32: 0.06, fp16: 0.12, pcieRX: 0.03, pcieTX: 0.03, nvlink: 0.01, intensity: 0.8}
	}
	frac, _ := j.phase(tsec)
	if frac < j.busyFrac {
		return computePhase
	}
	if j.kind == InputBound {
		return loaderWait
	}
	return allReducePhase
}
