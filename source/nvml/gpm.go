package nvml

import (
	"math"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// gpmState holds the two GPM samples of one GPU or MIG instance. GPM
// metrics are computed between two samples, so each collection takes a new
// sample into cur and compares it with prev; the two are then swapped.
// Exactly two samples exist per entity, allocated on first use and freed
// when the GPU is lost or the source closes.
type gpmState struct {
	prev, cur gonvml.GpmSample
	have      bool
	// prevAt is when prev was taken.
	prevAt time.Time
}

// gpmMinGap is GPM's refresh period. nvml.h: "The interval between two
// nvmlGpmSampleGet() calls should be greater than 100ms due to the internal
// sample refresh rate": two samples closer than that can hold the same
// counters, and the metrics between them come back 0 or NaN, which would
// read as a stall. Such a pair is skipped (gpmRead); a pair a tick's
// jitter closer whose counters moved is a reading like any other, so a
// 100 ms group keeps its rate.
const gpmMinGap = 100 * time.Millisecond

// unmoved reports metrics that say the two samples held the same
// counters: every metric NVML answered is 0 or NaN.
func unmoved(ms []gonvml.GpmMetric) bool {
	answered := false
	for _, m := range ms {
		if m.NvmlReturn != uint32(gonvml.SUCCESS) {
			continue
		}
		answered = true
		if m.Value != 0 && !math.IsNaN(m.Value) {
			return false
		}
	}
	return answered
}

// gpmStates holds one gpmState per watched field group of an entity: a
// group read every second measures between its own samples, not against
// the sample a 100 ms group took a moment before, as DCGM keeps GPM state
// per watch. Bounded by the number of groups (watch intervals).
type gpmStates map[int]*gpmState

// of returns the state of field group g, made on first use.
func (s *gpmStates) of(g int) *gpmState {
	if *s == nil {
		*s = gpmStates{}
	}
	st := (*s)[g]
	if st == nil {
		st = &gpmState{}
		(*s)[g] = st
	}
	return st
}

func (s *gpmStates) free() {
	for _, st := range *s {
		st.free()
	}
	*s = nil
}

func (g *gpmState) free() {
	for _, smp := range []gonvml.GpmSample{g.prev, g.cur} {
		if smp != nil {
			_ = smp.Free()
		}
	}
	g.prev, g.cur, g.have = nil, nil, false
}

// gpmRead takes one sample with take at now and returns the metrics
// between it and the previous sample; ok is false on the first sample, and
// when the previous sample is less than gpmMinGap old and the counters did
// not move: then the previous sample stays the baseline, and the next read
// measures over the longer span.
func (s *Source) gpmRead(g *gpmState, take func(gonvml.GpmSample) gonvml.Return, metrics []gonvml.GpmMetricId, now time.Time) ([]gonvml.GpmMetric, bool, error) {
	for _, p := range []*gonvml.GpmSample{&g.cur, &g.prev} {
		if *p == nil {
			smp, ret := s.lib.GpmSampleAlloc()
			if err := nvmlErr("GpmSampleAlloc", ret); err != nil {
				return nil, false, err
			}
			*p = smp
		}
	}
	if err := nvmlErr("GpmSampleGet", take(g.cur)); err != nil {
		g.have = false
		return nil, false, err
	}
	if !g.have {
		g.prev, g.cur, g.have, g.prevAt = g.cur, g.prev, true, now
		return nil, false, nil
	}
	m := &gonvml.GpmMetricsGetType{NumMetrics: uint32(len(metrics)), Sample1: g.prev, Sample2: g.cur}
	for i, id := range metrics {
		m.Metrics[i].MetricId = uint32(id)
	}
	ret := s.lib.GpmMetricsGet(m)
	if err := nvmlErr("GpmMetricsGet", ret); err != nil {
		g.prev, g.cur, g.prevAt = g.cur, g.prev, now
		return nil, false, err
	}
	vals := m.Metrics[:len(metrics)]
	if now.Sub(g.prevAt) < gpmMinGap && unmoved(vals) {
		return nil, false, nil
	}
	g.prev, g.cur, g.prevAt = g.cur, g.prev, now
	return vals, true, nil
}
