package insight

import "math"

// A MIG GPU instance has no bus traffic of its own that can be read. DCGM
// samples the PCIe counters at the GPU level (its field table), so an
// instance's are the whole GPU's, its neighbours' transfers included; and
// MIG turns NVLink peer traffic off. Neither the input class nor the
// communication class can rest on bus rates there.
//
// What an instance does show is its own rhythm. A training loop that steps
// periodically and drops to nothing between its steps is waiting for
// something off its SMs that its step needs: the next batch from the host,
// or a peer reached through the host. Those gaps are the input class. An
// instance without steps in the window (no period) that does nothing is
// idle, and so are the gaps of work without a rhythm (requests that arrive
// when they do): nothing there says the instance waits rather than rests.

// classifyInstance counts the classes of a MIG instance's window into bound:
// the compute and memory rules of whole GPUs from its own activity, then a
// sample left idle that lies in a gap between the steps of a periodic
// instance is input.
func (a *Analyzer) classifyInstance(w *Window, period float64, bound *[NumClasses]float64) {
	n := w.Len()
	a.wait = a.wait[:0]
	for range n {
		a.wait = append(a.wait, false)
	}
	if period > 0 {
		a.markWaits(w, period)
	}
	for i := 0; i < n; i++ {
		c := classifyOwn(w, i)
		if c == Idle && a.wait[i] {
			c = Input
		}
		bound[c]++
	}
}

// classifyOwn is the part of the rules that reads the instance's own
// activity: the busiest pipe, DRAM, then the SMs.
func classifyOwn(w *Window, i int) Class {
	switch {
	case w.Pipe[i] >= PipeBusy:
		return Compute
	case w.DRAM[i] >= DRAMBusy:
		return Memory
	case w.SM[i] >= BusySM:
		return Compute
	}
	return Idle
}

// markWaits marks the samples of the gaps between steps: every stall (as
// stalls counts them, between two busy samples) and, at either edge of the
// window, a run that would be one but is cut by the edge, when it is no
// longer than one period: the step on its other side then lies just outside
// the window. A longer run at an edge is the loop not running yet, or any
// more.
func (a *Analyzer) markWaits(w *Window, period float64) {
	n := w.Len()
	maxEdge := int(math.Ceil(period / w.Interval))
	start := 0
	for i := 0; i <= n; i++ {
		if i < n && w.SM[i] < BusySM {
			continue
		}
		edge := start == 0 || i == n
		if i > start && (!edge || i-start <= maxEdge) && a.isStall(w.SM[start:i]) {
			for k := start; k < i; k++ {
				a.wait[k] = true
			}
		}
		start = i + 1
	}
}
