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
