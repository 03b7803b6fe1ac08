package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

// dcgm-exporter's DCGM_EXP_XID_ERRORS_TOTAL (4.8.3; its README's
// "Cumulative XID and clock event counters" and rendermetrics'
// TestRenderCumulativeEventCounters): a counter per GPU and xid, every XID
// since start, no window label, no series before the first XID; gpuscope
// reuses the counts of gpuscope_xid_errors_total.
func TestXIDErrorsTotalCountsEveryXIDSinceStart(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(2, constValues(map[uint16]float64{}))
	e := newTestEngine(t, "DCGM_EXP_XID_ERRORS_TOTAL, counter, cumulative XID errors\n", src, clk)
	at := clk.Now()
	src.XIDs = []sourcetest.XID{{Entity: src.Ents[1], Code: 79, At: at}, {Entity: src.Ents[1], Code: 79, At: at.Add(time.Millisecond)},
		{Entity: src.Ents[1], Code: 13, At: at}}
	collectAll(t, e)
	mfs := scrape(t, e)
	mf := mfs["DCGM_EXP_XID_ERRORS_TOTAL"]
	require.NotNil(t, mf)
	assert.Equal(t, "COUNTER", mf.GetType().String())
	assert.Equal(t, "cumulative XID errors", mf.GetHelp(), "the help the file gives")
	for _, tt := range []struct {
		xid  string
		want float64
	}{{"79", 2}, {"13", 1}} {
		s := series(mfs, "DCGM_EXP_XID_ERRORS_TOTAL", map[string]string{"gpu": "1", "xid": tt.xid})
		require.Len(t, s, 1, "xid %s", tt.xid)
		assert.Equal(t, tt.want, value(s[0]))
		assert.False(t, hasLabel(s[0], "window_size_in_ms"))
		assert.False(t, hasLabel(s[0], "xid_description"), "dcgm-exporter's labels only")
	}
	assert.Empty(t, series(mfs, "DCGM_EXP_XID_ERRORS_TOTAL", map[string]string{"gpu": "0"}), "no series before the first XID")

	// Past any window the total keeps counting.
	clk.Add(10 * time.Minute)
	src.XIDs = []sourcetest.XID{{Entity: src.Ents[1], Code: 79, At: clk.Now()}}
	collectAll(t, e)
	assert.Equal(t, 3.0, value(series(scrape(t, e), "DCGM_EXP_XID_ERRORS_TOTAL", map[string]string{"gpu": "1", "xid": "79"})[0]))
}

// dcgm-exporter's DCGM_EXP_CLOCK_EVENTS_TOTAL (its clockEventsTotalCollector
// and TestClockEventsTotalCollectorCountsTransitionMatrix): each reason
// counts its changes from inactive to active; the first sample is the
// baseline, and a reason appears once it has counted.
func TestClockEventsTotalCountsActivationEdges(t *testing.T) {
	const idle, setting = 0x1, 0x2
	tests := []struct {
		name    string
		samples []uint64
		want    map[string]float64
	}{
		{"0 to A counts A", []uint64{0, idle}, map[string]float64{"gpu_idle": 1}},
		{"A to A does not count again", []uint64{idle, idle}, map[string]float64{}},
		{"A to A plus B counts only B", []uint64{idle, idle | setting}, map[string]float64{"clocks_setting": 1}},
		{"A plus B to B does not count again", []uint64{idle | setting, setting}, map[string]float64{}},
		{"B to A plus B counts only A", []uint64{setting, idle | setting}, map[string]float64{"gpu_idle": 1}},
		{"A, 0, A counts the second A", []uint64{idle, 0, idle}, map[string]float64{"gpu_idle": 1}},
		{"0, A, 0, A counts both", []uint64{0, idle, 0, idle}, map[string]float64{"gpu_idle": 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			var mask uint64
			src := sourcetest.NewGPUs(1, func(_ *source.Entity, _ uint16, _ time.Time) (float64, bool) { return float64(mask), true })
			e := newTestEngine(t, "DCGM_EXP_CLOCK_EVENTS_TOTAL, counter, clock events\n", src, clk)
			for _, m := range tt.samples {
				mask = m
				clk.Add(time.Second)
				collectAll(t, e)
			}
			mfs := scrape(t, e)
			got := map[string]float64{}
			if mf := mfs["DCGM_EXP_CLOCK_EVENTS_TOTAL"]; mf != nil {
				assert.Equal(t, "COUNTER", mf.GetType().String())
				for _, m := range mf.Metric {
					assert.False(t, hasLabel(m, "window_size_in_ms"))
					got[labelOf(m, "clock_event")] = value(m)
				}
			}
			assert.Equal(t, tt.want, got)
		})
	}
}
