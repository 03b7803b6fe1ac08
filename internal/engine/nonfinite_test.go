package engine

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/engine/nativehist"
	"github.com/gpuscope/gpuscope/internal/sampleapi"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

// TestInfLandsInTheWrongBucketNonFiniteSamplesAreLeftOut: a driver that
// hands over +Inf, -Inf or NaN gave no reading. The engine leaves such a
// sample out, as the DCGM source leaves out DCGM's blanks: the latest value,
// the window statistics, the native histogram and the samples API all show
// the finite samples only, and gpuscope_samples_non_finite_total counts the
// others by field. Before, +Inf went into the histogram's bucket 0 and made
// its sum +Inf for as long as gpuscope ran, the window's max +Inf, and the
// samples API wrote it as null.
func TestInfLandsInTheWrongBucketNonFiniteSamplesAreLeftOut(t *testing.T) {
	const csv = "DCGM_FI_PROF_SM_ACTIVE, gauge, Ratio of cycles (ratio 0..1)., 100ms, min max avg\n"
	seq := []float64{0.25, math.Inf(1), 0.5, math.Inf(-1), math.NaN(), 0.75, math.Inf(1)}
	step := 0
	clk := newClock()
	src := sourcetest.NewGPUs(1, func(_ *source.Entity, f uint16, _ time.Time) (float64, bool) {
		return seq[step], f == fieldid.ProfSMActive
	})
	e := newTestEngine(t, csv, src, clk)
	for step = range seq {
		clk.Add(100 * time.Millisecond)
		collectAll(t, e)
	}

	mfs := scrape(t, e)
	latest := series(mfs, "DCGM_FI_PROF_SM_ACTIVE", nil)
	require.Len(t, latest, 1)
	assert.Equal(t, 0.75, value(latest[0]), "the latest finite sample")
	for stat, want := range map[string]float64{"min": 0.25, "max": 0.75, "avg": 0.5} {
		w := series(mfs, "DCGM_FI_PROF_SM_ACTIVE_window", map[string]string{"stat": stat})
		require.Len(t, w, 1, stat)
		assert.Equal(t, want, value(w[0]), stat)
	}
	n := series(mfs, "DCGM_FI_PROF_SM_ACTIVE_window_samples", nil)
	require.Len(t, n, 1)
	assert.Equal(t, 3.0, value(n[0]), "samples in the window")

	h := histFamilies(t, e)["DCGM_FI_PROF_SM_ACTIVE_distribution"]
	require.NotNil(t, h)
	finite := nativehist.New(layoutRatio)
	for _, v := range []float64{0.25, 0.5, 0.75} {
		finite.Observe(v)
	}
	var want dto.Metric
	finite.Write(&want)
	assert.True(t, proto.Equal(want.Histogram, h.Metric[0].GetHistogram()), "the histogram of the finite samples\nwant %v\ngot  %v",
		want.Histogram, h.Metric[0].GetHistogram())

	res, err := e.Samples(sampleapi.Query{Fields: []string{"DCGM_FI_PROF_SM_ACTIVE"}})
	require.NoError(t, err)
	require.Len(t, res.Entities, 1)
	assert.Equal(t, sampleapi.Values{0.25, 0.5, 0.75}, res.Entities[0].Series[0].V)
	require.Len(t, res.Entities[0].Series[0].T, 3)

	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(e))
	own, err := reg.Gather()
	require.NoError(t, err)
	byName := map[string]*dto.MetricFamily{}
	for _, mf := range own {
		byName[mf.GetName()] = mf
	}
	counted := series(byName, "gpuscope_samples_non_finite_total", map[string]string{"field": "DCGM_FI_PROF_SM_ACTIVE"})
	require.Len(t, counted, 1, "the non-finite samples are counted")
	assert.Equal(t, 4.0, value(counted[0]), "+Inf twice, -Inf and NaN")
}
