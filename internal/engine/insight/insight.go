// Package insight turns a window of a GPU's high-resolution activity samples
// into answers about the workload: the step period of a training loop, the
// share of time the GPU stalls between busy phases, and what each sample is
// bound by. It is pure computation over slices; the engine feeds it copies of
// its rings in the background, never on the scrape path.
//
// docs/insight.md explains every rule and threshold below and where they can
// be wrong on real workloads.
package insight

import (
	"math"
	"sort"
)

// Class is what one sample is bound by.
type Class int

// The classes, in the order the rules test them (see Classify).
const (
	Compute Class = iota
	Memory
	Communication
	Input
	Idle
	NumClasses
)

// String is the value of the bound label.
func (c Class) String() string {
	switch c {
	case Compute:
		return "compute"
	case Memory:
		return "memory"
	case Communication:
		return "communication"
	case Input:
		return "input"
	case Idle:
		return "idle"
	}
	return "unknown"
}

// Thresholds of the rules. Each is a ratio of cycles (DCGM_FI_PROF_* 0..1) or
// a rate in bytes per second; docs/insight.md gives the reason for each value.
const (
	// PipeBusy: a tensor or FP pipe active this share of cycles means the
	// SMs are doing arithmetic; dense matmul training runs at 0.5 and more.
	PipeBusy = 0.30
	// DRAMBusy: the memory interface active half of the cycles while the
	// pipes are not busy means the kernels wait on bandwidth.
	DRAMBusy = 0.50
	// NVLinkBusy: 50 GB/s in one direction is about a ninth of an H100's
	// aggregate NVLink bandwidth and far above what a compute phase moves;
	// only collectives (all-reduce, all-gather) sustain it.
	NVLinkBusy = 50e9
	// PCIeBusy: 5 GB/s in one direction is a sixth of a PCIe Gen4 x16 link;
	// a compute phase moves a few hundred MB/s, a batch upload much more.
	PCIeBusy = 5e9
	// StallSM: SM activity below this means no kernel of any weight runs;
	// NCCL collectives keep the SMs above it.
	StallSM = 0.10
	// BusySM: SM activity at or above this is a busy phase; a stall is a
	// dip below StallSM between two busy phases.
	BusySM = 0.50
	// MinStallSamples: a dip shorter than this is a kernel-launch gap or a
	// sampling alias, not a stall.
	MinStallSamples = 2
	// MinSwing: an SM signal whose standard deviation is below this is flat
	// (an idle GPU, a steady inference server): no period is looked for.
	MinSwing = 0.05
	// MinConfidence: below this autocorrelation the period is not reported.
	MinConfidence = 0.5
	// MinPeriodSamples: a period shorter than three samples cannot be told
	// from noise.
	MinPeriodSamples = 3
)

// Window is one GPU's samples over the analysed window, oldest first, one
// per sampling interval. SM, Pipe, DRAM, PCIeTX and PCIeRX have the same
// length; NVLink is nil on a GPU without NVLink. Pipe is the busiest of the
// tensor and FP pipes; bus rates are bytes per second in one direction (the
// busier one for NVLink).
type Window struct {
	// Interval is the sampling interval in seconds.
	Interval                       float64
	TS                             []int64
	SM, Pipe, DRAM, PCIeTX, PCIeRX []float64
	NVLink                         []float64
	// Instance marks the window of a MIG GPU instance, which has no bus
	// traffic of its own to read: PCIeTX, PCIeRX and NVLink are not read
	// (they may be nil), and its classes follow the instance's own rules
	// (mig.go).
	Instance bool
}

// Len is the number of samples.
func (w *Window) Len() int { return len(w.SM) }

// Result is what one window tells.
type Result struct {
	Samples int
	// Period is the step period in seconds, 0 when the window shows no
	// clear periodicity (Confidence below MinConfidence).
	Period     float64
	Confidence float64
	// StallRatio is the share of the busy span (first to last busy sample)
	// spent in stalls.
	StallRatio float64
	// StallEnds holds, for each stall episode of the window, the timestamp
	// of the busy sample that ended it, oldest first; the engine counts the
	// ones newer than it has seen.
	StallEnds []int64
	// Bound is the share of the window's samples in each class; it sums to 1.
	Bound [NumClasses]float64
}

// Analyzer holds the scratch memory of Analyze, so that analysing a window
// does not allocate in the steady state. It is not safe for concurrent use.
type Analyzer struct {
	acf  []float64
	ends []int64
	run  []float64
	wait []bool
}

// Analyze computes the result of one window. A window of fewer than
// 2*MinPeriodSamples samples gives a zero Result.
func (a *Analyzer) Analyze(w *Window) Result {
	n := w.Len()
	var r Result
	r.Samples = n
	if n < 2*MinPeriodSamples || w.Interval <= 0 {
		return r
	}
	lag, conf := a.period(w.SM)
	r.Confidence = conf
	if conf >= MinConfidence && lag > 0 {
		r.Period = lag * w.Interval
	}
	r.StallRatio, r.StallEnds = a.stalls(w)
	if w.Instance {
		a.classifyInstance(w, r.Period, &r.Bound)
	} else {
		for i := 0; i < n; i++ {
			r.Bound[classify(w, i)]++
		}
	}
	for c := range r.Bound {
		r.Bound[c] /= float64(n)
	}
	return r
}

// Classify says what sample i of a whole GPU's window is bound by. The rules
// are tested in order; the first that holds decides. A MIG instance's
// samples are classed over the whole window (Analyze), as one sample alone
// cannot tell a wait between steps from idleness there.
func Classify(w *Window, i int) Class { return classify(w, i) }

func classify(w *Window, i int) Class {
	nvl := 0.0
	if w.NVLink != nil {
		nvl = w.NVLink[i]
	}
	sm := w.SM[i]
	switch {
	case w.Pipe[i] >= PipeBusy:
		return Compute
	case nvl >= NVLinkBusy || (w.PCIeTX[i] >= PCIeBusy && w.PCIeRX[i] >= PCIeBusy):
		return Communication
	case w.DRAM[i] >= DRAMBusy:
		return Memory
	case sm >= BusySM:
		// The SMs are busy but no pipe, bus or memory is: latency-bound
		// kernels (small batches, launch-bound loops) still make the SMs
		// the limit.
		return Compute
	case w.PCIeRX[i] >= PCIeBusy:
		return Input
	}
	return Idle
}

// period finds the dominant period of x in samples (fractional) by the
// autocorrelation method, and the autocorrelation at that lag as confidence.
func (a *Analyzer) period(x []float64) (float64, float64) {
	n := len(x)
	mean := 0.0
	for _, v := range x {
		mean += v
	}
	mean /= float64(n)
	variance := 0.0
	for _, v := range x {
		d := v - mean
		variance += d * d
	}
	variance /= float64(n)
	if math.Sqrt(variance) < MinSwing {
		return 0, 0
	}
	maxLag := n / 2
	if cap(a.acf) < maxLag+2 {
		a.acf = make([]float64, maxLag+2)
	}
	acf := a.acf[:maxLag+2]
	for k := 0; k <= maxLag+1 && k < n; k++ {
		s := 0.0
		for i := 0; i+k < n; i++ {
			s += (x[i] - mean) * (x[i+k] - mean)
		}
		acf[k] = s / (float64(n-k) * variance)
	}
	// The highest local maximum in [MinPeriodSamples, maxLag]; among peaks
	// nearly as high, the shortest lag, since a period's multiples
	// correlate as well as the period itself.
	best, bestV := -1, 0.0
	for k := MinPeriodSamples; k <= maxLag; k++ {
		if acf[k] >= acf[k-1] && acf[k] >= acf[k+1] && acf[k] > bestV {
			best, bestV = k, acf[k]
		}
	}
	if best < 0 || bestV <= 0 {
		return 0, 0
	}
	// A period's multiples correlate nearly as well as the period itself,
	// and jitter can lift one of them above it: take the shortest divisor
	// of the best lag that still has a clear peak, and its (lower)
	// autocorrelation as the confidence.
	for m := best / MinPeriodSamples; m >= 2; m-- {
		k, ok := peakNear(acf, int(math.Round(float64(best)/float64(m))), maxLag)
		if ok && acf[k] >= 0.5*bestV {
			best, bestV = k, acf[k]
			break
		}
	}
	lag := interpolate(acf, best)
	// Refine on the farthest multiple of the period inside the window: the
	// error of one peak's position is divided by the multiple.
	for m := int(float64(maxLag) / lag); m >= 2; m-- {
		c := int(math.Round(lag * float64(m)))
		k, ok := peakNear(acf, c, maxLag)
		if ok && acf[k] >= 0.8*bestV {
			lag = interpolate(acf, k) / float64(m)
			break
		}
	}
	return lag, math.Min(1, bestV)
}

// peakNear returns the highest local maximum of acf within two samples of
// c, inside [MinPeriodSamples, maxLag].
func peakNear(acf []float64, c, maxLag int) (int, bool) {
	best, ok := 0, false
	for k := c - 2; k <= c+2; k++ {
		if k < MinPeriodSamples || k > maxLag {
			continue
		}
		if acf[k] >= acf[k-1] && acf[k] >= acf[k+1] && (!ok || acf[k] > acf[best]) {
			best, ok = k, true
		}
	}
	return best, ok
}

// interpolate fits a parabola through the peak and its neighbours, which
// places the peak between samples.
func interpolate(acf []float64, k int) float64 {
	y0, y1, y2 := acf[k-1], acf[k], acf[k+1]
	d := y0 - 2*y1 + y2
	if d >= 0 {
		return float64(k)
	}
	off := 0.5 * (y0 - y2) / d
	if off > 0.5 || off < -0.5 {
		return float64(k)
	}
	return float64(k) + off
}

// stalls measures the dips of SM activity between two busy samples: runs of
// samples below BusySM whose median is below StallSM, over the busy span of
// the window. Counting every sample of the run below BusySM, about the
// midpoint of a busy and a stalled GPU, keeps samples that straddle a
// stall's edge from biasing the share either way; judging the run by its
// median keeps sensor noise from splitting one stall into several, and
// edge samples from hiding a short one.
func (a *Analyzer) stalls(w *Window) (float64, []int64) {
	a.ends = a.ends[:0]
	first, last := -1, -1
	for i, v := range w.SM {
		if v >= BusySM {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 || last <= first {
		return 0, a.ends
	}
	stalled, start := 0, first
	for i := first; i <= last; i++ {
		if w.SM[i] < BusySM {
			continue
		}
		if a.isStall(w.SM[start:i]) {
			stalled += i - start
			if i < len(w.TS) {
				a.ends = append(a.ends, w.TS[i])
			}
		}
		start = i + 1
	}
	return float64(stalled) / float64(last-first+1), a.ends
}

// isStall says whether a run of SM samples below BusySM is a stall: at least
// MinStallSamples long, with a median below StallSM.
func (a *Analyzer) isStall(run []float64) bool {
	n := len(run)
	if n < MinStallSamples {
		return false
	}
	a.run = append(a.run[:0], run...)
	sort.Float64s(a.run)
	return a.run[(n-1)/2] < StallSM
}
