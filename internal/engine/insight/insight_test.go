package insight

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

// square builds a window of n samples at 100 ms: busy samples (SM 0.9,
// tensor 0.7) for busy of every step samples, and the rest filled by gap.
func square(n, step, busy int, gap func(w *Window, i int)) *Window {
	w := &Window{Interval: 0.1}
	for i := 0; i < n; i++ {
		w.TS = append(w.TS, int64(i)*100_000_000)
		w.SM = append(w.SM, 0.9)
		w.Pipe = append(w.Pipe, 0.7)
		w.DRAM = append(w.DRAM, 0.4)
		w.PCIeTX = append(w.PCIeTX, 1e8)
		w.PCIeRX = append(w.PCIeRX, 1e8)
		if i%step >= busy {
			gap(w, i)
		}
	}
	return w
}

func loaderGap(w *Window, i int) {
	w.SM[i], w.Pipe[i], w.DRAM[i], w.PCIeRX[i] = 0.01, 0, 0.02, 20e9
}

func allReduceGap(w *Window, i int) {
	w.SM[i], w.Pipe[i], w.DRAM[i] = 0.3, 0.01, 0.3
	for len(w.NVLink) < len(w.SM) {
		w.NVLink = append(w.NVLink, 0)
	}
	w.NVLink[i] = 300e9
}

func TestAnalyzeFindsPeriodStallsAndClasses(t *testing.T) {
	tests := []struct {
		name       string
		w          *Window
		period     float64 // 0: none
		stall      float64
		stalls     int
		bound      Class
		boundShare float64
	}{
		{"input-bound steps of 1.5 s", square(300, 15, 9, loaderGap), 1.5, 6.0 / 15, 19, Input, 0},
		{"communication-bound steps of 1.2 s", square(300, 12, 4, allReduceGap), 1.2, 0, 0, Communication, 8.0 / 12},
		{"flat compute", square(300, 10, 10, loaderGap), 0, 0, 0, Compute, 1},
		{"idle", square(300, 10, 0, func(w *Window, i int) { w.SM[i], w.Pipe[i], w.DRAM[i], w.PCIeRX[i] = 0, 0, 0, 0 }), 0, 0, 0, Idle, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a Analyzer
			r := a.Analyze(tt.w)
			if tt.period == 0 {
				assert.Zero(t, r.Period, "confidence %v", r.Confidence)
			} else {
				assert.InEpsilon(t, tt.period, r.Period, 0.01)
				assert.Greater(t, r.Confidence, 0.9)
			}
			assert.InDelta(t, tt.stall, r.StallRatio, 0.03)
			assert.Len(t, r.StallEnds, tt.stalls)
			best := Class(0)
			sum := 0.0
			for c := Class(0); c < NumClasses; c++ {
				sum += r.Bound[c]
				if r.Bound[c] > r.Bound[best] {
					best = c
				}
			}
			assert.InDelta(t, 1, sum, 1e-9)
			if tt.boundShare > 0 {
				assert.Equal(t, tt.bound, best)
				assert.InDelta(t, tt.boundShare, r.Bound[tt.bound], 0.01)
			}
		})
	}
}

func TestClassifyRulesInOrder(t *testing.T) {
	tests := []struct {
		name                        string
		sm, pipe, dram, nvl, tx, rx float64
		want                        Class
	}{
		{"busy tensor pipe wins over memory and links", 0.9, 0.5, 0.9, 300e9, 0, 0, Compute},
		{"NVLink collective", 0.3, 0.01, 0.3, 100e9, 0, 0, Communication},
		{"PCIe both ways without NVLink", 0.3, 0.01, 0.3, 0, 10e9, 10e9, Communication},
		{"memory bandwidth", 0.6, 0.1, 0.8, 0, 0, 0, Memory},
		{"latency-bound SMs", 0.7, 0.1, 0.2, 0, 0, 0, Compute},
		{"waiting for a batch", 0.01, 0, 0.02, 0, 0, 20e9, Input},
		{"nothing", 0.02, 0, 0, 0, 0, 0, Idle},
		{"low SM, no traffic", 0.3, 0.05, 0.1, 0, 0, 1e8, Idle},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &Window{SM: []float64{tt.sm}, Pipe: []float64{tt.pipe}, DRAM: []float64{tt.dram},
				NVLink: []float64{tt.nvl}, PCIeTX: []float64{tt.tx}, PCIeRX: []float64{tt.rx}}
			assert.Equal(t, tt.want, Classify(w, 0), "%s", Classify(w, 0))
		})
	}
}

func TestAnalyzeShortWindowGivesNothing(t *testing.T) {
	var a Analyzer
	r := a.Analyze(square(5, 2, 1, loaderGap))
	assert.Equal(t, Result{Samples: 5}, r)
}

func TestAnalyzeDoesNotAllocateInTheSteadyState(t *testing.T) {
	w := square(300, 15, 9, loaderGap)
	var a Analyzer
	a.Analyze(w)
	allocs := testing.AllocsPerRun(20, func() { a.Analyze(w) })
	assert.Zero(t, allocs)
	assert.False(t, math.IsNaN(a.Analyze(w).Confidence))
}

// onInstance makes a window a MIG instance's: its PCIe counters are its
// GPU's, here a neighbour's loader pulling 20 GB/s the whole time, which the
// rules must not read.
func onInstance(w *Window) *Window {
	w.Instance = true
	for i := range w.PCIeRX {
		w.PCIeTX[i], w.PCIeRX[i] = 10e9, 20e9
	}
	return w
}

// bursts is a window of busy runs [start, end) and nothing between them.
func bursts(n int, runs ...[2]int) *Window {
	w := square(n, 1, 0, func(w *Window, i int) { w.SM[i], w.Pipe[i], w.DRAM[i] = 0.01, 0, 0.02 })
	for _, r := range runs {
		for i := r[0]; i < r[1]; i++ {
			w.SM[i], w.Pipe[i], w.DRAM[i] = 0.9, 0.7, 0.4
		}
	}
	return w
}

func TestAnalyzeTellsAMIGInstancesWaitsFromIdleness(t *testing.T) {
	steps := square(300, 15, 9, loaderGap)
	lateStart := square(300, 15, 9, loaderGap)
	for i := 0; i < 100; i++ { // the loop starts 10 s into the window
		lateStart.SM[i], lateStart.Pipe[i], lateStart.DRAM[i] = 0.01, 0, 0.02
	}
	tests := []struct {
		name    string
		w       *Window
		stepped bool
		bound   [NumClasses]float64 // within half a sample
	}{
		{"stepping with waits between steps: the waits are input", onInstance(square(300, 15, 9, loaderGap)), true,
			[NumClasses]float64{Compute: 9.0 / 15, Input: 6.0 / 15}},
		{"the window cut inside two waits: the cut waits are input too", onInstance(&Window{Interval: 0.1, TS: steps.TS[10:296], SM: steps.SM[10:296],
			Pipe: steps.Pipe[10:296], DRAM: steps.DRAM[10:296], PCIeTX: steps.PCIeTX[10:296], PCIeRX: steps.PCIeRX[10:296]}), true,
			[NumClasses]float64{Compute: 171.0 / 286, Input: 115.0 / 286}},
		{"a loop that starts late: before it, idle", onInstance(lateStart), true,
			[NumClasses]float64{Compute: 117.0 / 300, Input: 78.0 / 300, Idle: 105.0 / 300}},
		{"bursts without a rhythm: the gaps are idle", onInstance(bursts(300, [2]int{10, 30}, [2]int{70, 75}, [2]int{140, 190}, [2]int{200, 204}, [2]int{260, 282})), false,
			[NumClasses]float64{Compute: 101.0 / 300, Idle: 199.0 / 300}},
		{"no steps: idle, whatever the GPU's PCIe", onInstance(bursts(300)), false,
			[NumClasses]float64{Idle: 1}},
		{"a steady server on its own memory", onInstance(square(300, 10, 10, loaderGap)), false,
			[NumClasses]float64{Compute: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a Analyzer
			r := a.Analyze(tt.w)
			assert.Equal(t, tt.stepped, r.Period > 0, "period %v, confidence %v", r.Period, r.Confidence)
			for c := Class(0); c < NumClasses; c++ {
				assert.InDelta(t, tt.bound[c], r.Bound[c], 0.5/float64(tt.w.Len()), "%s share (bound %v)", c, r.Bound)
			}
			assert.Zero(t, r.Bound[Communication], "a MIG instance has no NVLink peer traffic, and its PCIe is the GPU's")
		})
	}
}

// The same waits on a whole GPU without a batch on its PCIe link are idle:
// the whole-GPU rules read the GPU's own bus, and only the instance rules
// read the rhythm.
func TestAnalyzeOfAWholeGPUReadsItsBusNotItsRhythm(t *testing.T) {
	w := square(300, 15, 9, func(w *Window, i int) { w.SM[i], w.Pipe[i], w.DRAM[i] = 0.01, 0, 0.02 })
	var a Analyzer
	r := a.Analyze(w)
	assert.Greater(t, r.Period, 0.0)
	assert.InDelta(t, 6.0/15, r.Bound[Idle], 0.01)
	assert.Zero(t, r.Bound[Input])
}

func TestAnalyzeOfAnInstanceDoesNotAllocateInTheSteadyState(t *testing.T) {
	w := onInstance(square(300, 15, 9, loaderGap))
	var a Analyzer
	a.Analyze(w)
	assert.Zero(t, testing.AllocsPerRun(20, func() { a.Analyze(w) }))
}
