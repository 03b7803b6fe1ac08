package engine

import (
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

// slicedEnricher shares GPU 0 among n pods, as time-sliced virtual GPUs do.
type slicedEnricher struct {
	prometheus.Collector
	n, gen int
}

func (s *slicedEnricher) LabelNames() []string { return []string{"pod"} }
func (s *slicedEnricher) Values(*source.Entity) []string {
	return []string{"pod-0"}
}
func (s *slicedEnricher) Generation() uint64 { return uint64(s.gen) }
func (s *slicedEnricher) ValueRows(e *source.Entity) [][]string {
	if e.GPU != 0 {
		return nil
	}
	rows := make([][]string, s.n)
	for i := range rows {
		rows[i] = []string{"pod-" + strconv.Itoa(i)}
	}
	return rows
}

// TestVirtualGPUsWithManyPodsSayWhatIsDropped: 10,000 pods on one GPU get
// at most 64 copies of its series; the rest are counted in
// gpuscope_label_copies_dropped and logged once, not left out silently.
func TestVirtualGPUsWithManyPodsSayWhatIsDropped(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(2, constValues(map[uint16]float64{fieldid.GPUTemp: 40}))
	src.Now = clk.Now
	se := &slicedEnricher{Collector: prometheus.NewGauge(prometheus.GaugeOpts{Name: "x", Help: "x"}), n: 10_000, gen: 1}
	logger, hook := logtest.NewNullLogger()
	e, err := New(Options{Source: src, Counters: parseSet(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t\n"), DefaultInterval: time.Second,
		Hostname: "node-1", Now: clk.Now, Log: logger.WithField("component", "engine"), Enrichers: []enrich.Enricher{se}})
	require.NoError(t, err)
	require.NoError(t, e.Open())
	collectAll(t, e)
	mfs := scrape(t, e)
	assert.Len(t, series(mfs, "DCGM_FI_DEV_GPU_TEMP", map[string]string{"gpu": "0"}), maxLabelCopies)
	assert.Equal(t, 10_000.0-maxLabelCopies, selfMetric(t, e, "gpuscope_label_copies_dropped"))

	for range 3 {
		se.gen++
		e.mu.Lock()
		e.relabelLocked()
		e.mu.Unlock()
	}
	n := 0
	for _, en := range hook.AllEntries() {
		if en.Message == copiesDroppedLog {
			n++
			assert.Equal(t, 10_000-maxLabelCopies, en.Data["dropped"])
		}
	}
	assert.Equal(t, 1, n, "logged once")

	se.n = 3
	se.gen++
	e.mu.Lock()
	e.relabelLocked()
	e.mu.Unlock()
	assert.Zero(t, selfMetric(t, e, "gpuscope_label_copies_dropped"), "nothing is dropped once the pods fit")
}

// selfMetric reads one of the engine's own gauges as a scrape shows it.
func selfMetric(t *testing.T, e *Engine, name string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(e))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s", name)
	return 0
}
