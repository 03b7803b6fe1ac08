package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/internal/sampleapi"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

func fieldID(t testing.TB, name string) uint16 {
	t.Helper()
	info, ok := counters.Lookup(name)
	require.True(t, ok, name)
	return info.ID
}

// rampValues gives each GPU a value that encodes its index and the sample
// time, so a test can tell every sample apart.
func rampValues(start time.Time) sourcetest.ValueFunc {
	return func(e *source.Entity, _ uint16, ts time.Time) (float64, bool) {
		return float64(e.GPU)*1000 + float64(ts.Sub(start)/time.Millisecond), true
	}
}

const samplesCSV = "DCGM_FI_PROF_SM_ACTIVE, gauge, a, 100ms, max\n" +
	"DCGM_FI_DEV_GPU_TEMP, gauge, t, 100ms\n" +
	"DCGM_FI_DRIVER_VERSION, label, d\n" +
	"DCGM_EXP_XID_ERRORS_COUNT, gauge, x\n"

func TestSamplesReturnEveryRingSampleInOrder(t *testing.T) {
	clk := newClock()
	start := clk.Now()
	src := sourcetest.NewGPUs(2, rampValues(start))
	e := newTestEngine(t, samplesCSV, src, clk)
	for range 5 {
		clk.Add(100 * time.Millisecond)
		collectAll(t, e)
	}
	res, err := e.Samples(sampleapi.Query{Fields: []string{"DCGM_FI_PROF_SM_ACTIVE"}, GPUs: []int{1}})
	require.NoError(t, err)
	require.Len(t, res.Entities, 1)
	ent := res.Entities[0]
	assert.Equal(t, 1, ent.GPU)
	assert.Equal(t, "gpu", ent.Kind)
	assert.Equal(t, "1", ent.Labels["gpu"])
	assert.Equal(t, "node-1", ent.Labels["Hostname"])
	require.Len(t, ent.Series, 1)
	s := ent.Series[0]
	require.Len(t, s.T, 5)
	for i := range s.T {
		want := start.Add(time.Duration(i+1) * 100 * time.Millisecond)
		assert.Equal(t, want.UnixNano(), s.T[i])
		assert.Equal(t, 1000+float64((i+1)*100), s.V[i])
	}
	assert.False(t, s.Missed)
	require.Len(t, res.Fields, 1)
	assert.Equal(t, "ratio", res.Fields[0].Unit)
	assert.Equal(t, int64(100*time.Millisecond), res.Fields[0].IntervalNS)

	since := s.T[2]
	res, err = e.Samples(sampleapi.Query{Fields: []string{"DCGM_FI_PROF_SM_ACTIVE"}, Since: since})
	require.NoError(t, err)
	require.Len(t, res.Entities, 2, "no gpu parameter: every GPU")
	for _, ent := range res.Entities {
		assert.Len(t, ent.Series[0].T, 2, "only the samples after since")
	}
}

func TestSamplesRefuseFieldsWithAReason(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(1, rampValues(clk.Now()))
	e := newTestEngine(t, samplesCSV, src, clk)
	tests := []struct {
		field, reason string
	}{
		{"DCGM_FI_PROF_SM_ACTIV", "did you mean DCGM_FI_PROF_SM_ACTIVE"},
		{"NOT_A_FIELD", "unknown field name"},
		{"DCGM_FI_DEV_POWER_USAGE", "not in the counters file test.csv"},
		{"DCGM_FI_DRIVER_VERSION", "a label field has no samples"},
		{"DCGM_EXP_XID_ERRORS_COUNT", "computes it from events"},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			_, err := e.Samples(sampleapi.Query{Fields: []string{tt.field}})
			var fe *sampleapi.FieldError
			require.True(t, errors.As(err, &fe), "want a field error, got %v", err)
			assert.Equal(t, tt.field, fe.Field)
			assert.Contains(t, fe.Reason, tt.reason)
		})
	}
}

// A field without window statistics has no ring until a client asks; from
// then on it keeps one, sized by the window, across reloads, and /metrics
// does not change.
func TestSamplesGiveAFieldWithoutStatsARingOnDemand(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(1, rampValues(clk.Now()))
	e := newTestEngine(t, samplesCSV, src, clk)
	clk.Add(100 * time.Millisecond)
	collectAll(t, e)
	q := sampleapi.Query{Fields: []string{"DCGM_FI_DEV_GPU_TEMP"}}
	res, err := e.Samples(q)
	require.NoError(t, err)
	assert.Empty(t, res.Entities, "no ring before the first request")
	before := string(e.Render(nil))
	for range 3 {
		clk.Add(100 * time.Millisecond)
		collectAll(t, e)
	}
	res, err = e.Samples(q)
	require.NoError(t, err)
	require.Len(t, res.Entities, 1)
	assert.Len(t, res.Entities[0].Series[0].T, 3)
	assert.NotContains(t, string(e.Render(nil)), "DCGM_FI_DEV_GPU_TEMP_window", "the exposition is unchanged")
	assert.NotContains(t, before, "DCGM_FI_DEV_GPU_TEMP_window")
	// Window 10s at 100ms: 102 slots.
	si := e.plan.slotOf[fieldID(t, "DCGM_FI_DEV_GPU_TEMP")]
	assert.Equal(t, 102, e.plan.slots[si].ringCap)

	e.baseCtx = context.Background()
	require.NoError(t, e.Reload(parseSet(t, samplesCSV+"DCGM_FI_DEV_POWER_USAGE, gauge, p, 100ms\n")))
	e.Stop()
	si = e.plan.slotOf[fieldID(t, "DCGM_FI_DEV_GPU_TEMP")]
	assert.Equal(t, 102, e.plan.slots[si].ringCap, "the ring asked for survives a reload")
	res, err = e.Samples(q)
	require.NoError(t, err)
	assert.Len(t, res.Entities[0].Series[0].T, 3, "and keeps its samples")
}

func TestSamplesFlagAGapWhenTheRingOverwroteTheCursor(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(1, rampValues(clk.Now()))
	e := newTestEngine(t, samplesCSV, src, clk)
	var first int64
	for i := range 200 {
		clk.Add(100 * time.Millisecond)
		collectAll(t, e)
		if i == 0 {
			first = clk.Now().UnixNano()
		}
	}
	key := sampleapi.SeriesKey(e.order[0].key, "DCGM_FI_PROF_SM_ACTIVE")
	res, err := e.Samples(sampleapi.Query{Fields: []string{"DCGM_FI_PROF_SM_ACTIVE"}, After: map[string]int64{key: first}})
	require.NoError(t, err)
	assert.True(t, res.Entities[0].Series[0].Missed, "a cursor 20 s back with a 10 s window has lost samples")
	last := res.Entities[0].Series[0].T[len(res.Entities[0].Series[0].T)-1]
	clk.Add(100 * time.Millisecond)
	collectAll(t, e)
	res, err = e.Samples(sampleapi.Query{Fields: []string{"DCGM_FI_PROF_SM_ACTIVE"}, After: map[string]int64{key: last}})
	require.NoError(t, err)
	assert.False(t, res.Entities[0].Series[0].Missed)
	assert.Len(t, res.Entities[0].Series[0].T, 1)
}

func TestSamplesCarryPodLabels(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(2, rampValues(clk.Now()))
	src.Now = clk.Now
	pe := &podEnricher{Collector: prometheus.NewGauge(prometheus.GaugeOpts{Name: "x", Help: "x"}), gen: 1}
	e, err := New(Options{Source: src, Counters: parseSet(t, samplesCSV), DefaultInterval: time.Second,
		Hostname: `node "1"`, Now: clk.Now, Log: quietLog(), Enrichers: []enrich.Enricher{pe}})
	require.NoError(t, err)
	require.NoError(t, e.Open())
	clk.Add(100 * time.Millisecond)
	collectAll(t, e)
	res, err := e.Samples(sampleapi.Query{Fields: []string{"DCGM_FI_PROF_SM_ACTIVE"}})
	require.NoError(t, err)
	require.Len(t, res.Entities, 2)
	assert.Equal(t, "train-0", res.Entities[0].Labels["pod"])
	assert.Equal(t, "vision", res.Entities[0].Labels["team"])
	assert.Equal(t, `node "1"`, res.Entities[0].Labels["Hostname"], "escaped label values read back")
	assert.Empty(t, res.Entities[1].Labels["pod"])
}

func TestUpdatedIsClosedBySamples(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(1, rampValues(clk.Now()))
	e := newTestEngine(t, samplesCSV, src, clk)
	ch := e.Updated()
	select {
	case <-ch:
		t.Fatal("closed before any sample")
	default:
	}
	clk.Add(100 * time.Millisecond)
	collectAll(t, e)
	select {
	case <-ch:
	default:
		t.Fatal("not closed after a collection")
	}
	assert.NotEqual(t, ch, e.Updated(), "a new channel for the next samples")
}

// The samples API shows an entity's labels as /metrics shows them, values
// with quotes, backslashes and newlines included: compared with what
// Prometheus' own parser reads from the exposition.
func TestSamplesShowTheLabelsMetricsShows(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(1, rampValues(clk.Now()))
	src.Texts = map[uint16]string{fieldID(t, "DCGM_FI_DRIVER_VERSION"): "x\"y back\\slash new\nline"}
	e := newTestEngine(t, samplesCSV, src, clk)
	clk.Add(100 * time.Millisecond)
	collectAll(t, e)
	res, err := e.Samples(sampleapi.Query{Fields: []string{"DCGM_FI_PROF_SM_ACTIVE"}})
	require.NoError(t, err)
	require.Len(t, res.Entities, 1)
	m := series(scrape(t, e), "DCGM_FI_PROF_SM_ACTIVE", nil)
	require.Len(t, m, 1)
	want := map[string]string{}
	for _, l := range m[0].Label {
		want[l.GetName()] = l.GetValue()
	}
	assert.Equal(t, want, res.Entities[0].Labels)
	assert.Equal(t, "x\"y back\\slash new\nline", res.Entities[0].Labels["DCGM_FI_DRIVER_VERSION"])
	res.Entities[0].Labels["gpu"] = "changed"
	res, err = e.Samples(sampleapi.Query{Fields: []string{"DCGM_FI_PROF_SM_ACTIVE"}})
	require.NoError(t, err)
	assert.Equal(t, "0", res.Entities[0].Labels["gpu"], "a caller's change stays its own")
}
