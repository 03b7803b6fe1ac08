package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

func newClock() *sourcetest.Clock { return sourcetest.NewClock(time.Unix(1_700_000_000, 0)) }

func parseSet(t testing.TB, csv string) *counters.Set {
	t.Helper()
	set, err := counters.Parse("test.csv", strings.NewReader(csv))
	require.NoError(t, err)
	return set
}

func quietLog() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(bytes.NewBuffer(nil))
	return logrus.NewEntry(l)
}

// newTestEngine builds an engine that is driven by hand: the test calls
// collect instead of the background loops, so nothing depends on timing.
func newTestEngine(t testing.TB, csv string, src *sourcetest.Source, clk *sourcetest.Clock) *Engine {
	t.Helper()
	src.Now = clk.Now
	e, err := New(Options{
		Source: src, Counters: parseSet(t, csv), DefaultInterval: time.Second, Window: 10 * time.Second,
		XIDWindow: time.Minute, ClockEventsWindow: time.Minute, Hostname: "node-1", Now: clk.Now, Log: quietLog(),
	})
	require.NoError(t, err)
	require.NoError(t, src.Watch(e.plan.groups))
	e.refreshEntities()
	e.pollStatus()
	return e
}

// collectAll collects every group once.
func collectAll(t testing.TB, e *Engine) {
	t.Helper()
	for gi := range e.plan.groups {
		require.NoError(t, e.collectOnce(context.Background(), gi, &batch{}))
	}
}

func scrape(t testing.TB, e *Engine) map[string]*dto.MetricFamily {
	t.Helper()
	out := e.Render(nil)
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(out))
	require.NoError(t, err, "exposition must parse:\n%s", out)
	return mfs
}

// series returns the metric of the family whose labels include want.
func series(mfs map[string]*dto.MetricFamily, name string, want map[string]string) []*dto.Metric {
	var out []*dto.Metric
	mf := mfs[name]
	if mf == nil {
		return nil
	}
next:
	for _, m := range mf.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		out = append(out, m)
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	}
	return m.Untyped.GetValue()
}

func constValues(v map[uint16]float64) sourcetest.ValueFunc {
	return func(e *source.Entity, f uint16, _ time.Time) (float64, bool) {
		x, ok := v[f]
		return x + float64(e.GPU), ok
	}
}

func TestPlanGroupsFieldsByInterval(t *testing.T) {
	tests := []struct {
		name      string
		csv       string
		intervals []time.Duration
		ids       [][]uint16
	}{
		{
			name:      "dcgm-exporter file: one group at the default interval",
			csv:       "DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DEV_POWER_USAGE, gauge, p\n",
			intervals: []time.Duration{time.Second},
			ids:       [][]uint16{{fieldid.GPUTemp, fieldid.PowerUsage}},
		},
		{
			name: "three intervals, shortest first",
			csv: "DCGM_FI_PROF_SM_ACTIVE, gauge, a, 100ms, max\nDCGM_FI_DEV_GPU_TEMP, gauge, t, 5s\n" +
				"DCGM_FI_PROF_DRAM_ACTIVE, gauge, d, 100ms\nDCGM_FI_DEV_POWER_USAGE, gauge, p\n",
			intervals: []time.Duration{100 * time.Millisecond, time.Second, 5 * time.Second},
			ids:       [][]uint16{{fieldid.ProfSMActive, fieldid.ProfDRAMActive}, {fieldid.PowerUsage}, {fieldid.GPUTemp}},
		},
		{
			name:      "exporter-side fields watch what they derive from",
			csv:       "DCGM_EXP_XID_ERRORS_COUNT, gauge, x\nDCGM_EXP_CLOCK_EVENTS_COUNT, gauge, c, 2s\n",
			intervals: []time.Duration{time.Second, 2 * time.Second},
			ids:       [][]uint16{{fieldid.XIDErrors}, {fieldid.ClocksEventReasons}},
		},
		{
			name:      "a legacy and a current name share one watched field",
			csv:       "dcgm_gpu_temp, gauge, t\nDCGM_FI_DEV_GPU_TEMP, gauge, t, 500ms\n",
			intervals: []time.Duration{500 * time.Millisecond},
			ids:       [][]uint16{{fieldid.GPUTemp}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPlan(parseSet(t, tt.csv), time.Second, 15*time.Second, time.Minute, insightPlan{})
			require.Len(t, p.groups, len(tt.intervals))
			for i, g := range p.groups {
				assert.Equal(t, tt.intervals[i], g.Interval)
				var ids []uint16
				for _, f := range g.Fields {
					ids = append(ids, f.ID)
				}
				sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
				assert.Equal(t, tt.ids[i], ids)
			}
		})
	}
}

func TestRenderLabelsValuesAndTypes(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(2, constValues(map[uint16]float64{fieldid.GPUTemp: 40, fieldid.TotalEnergyConsumption: 1000}))
	src.Texts = map[uint16]string{fieldid.DriverVersion: "550.54.15"}
	e := newTestEngine(t, "DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n"+
		"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, counter, Total energy (in mJ).\n"+
		"DCGM_FI_DRIVER_VERSION, label, Driver Version\n", src, clk)
	collectAll(t, e)
	mfs := scrape(t, e)

	temp := mfs["DCGM_FI_DEV_GPU_TEMP"]
	require.NotNil(t, temp)
	assert.Equal(t, dto.MetricType_GAUGE, temp.GetType())
	assert.Equal(t, "GPU temperature (in C).", temp.GetHelp())
	assert.Equal(t, dto.MetricType_COUNTER, mfs["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"].GetType())
	assert.NotContains(t, mfs, "DCGM_FI_DRIVER_VERSION", "label fields are labels, not families")

	m := series(mfs, "DCGM_FI_DEV_GPU_TEMP", map[string]string{"gpu": "1"})
	require.Len(t, m, 1)
	assert.Equal(t, 41.0, value(m[0]))
	labels := map[string]string{}
	for _, l := range m[0].Label {
		labels[l.GetName()] = l.GetValue()
	}
	assert.Equal(t, map[string]string{
		"gpu": "1", "UUID": "GPU-00000001-0000-0000-0000-000000000000", "pci_bus_id": "00000000:02:00.0",
		"device": "nvidia1", "modelName": "NVIDIA H100 80GB HBM3", "Hostname": "node-1",
		"DCGM_FI_DRIVER_VERSION": "550.54.15",
	}, labels)
}

func TestUnsupportedFieldIsAbsentNotZero(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(2, func(e *source.Entity, f uint16, _ time.Time) (float64, bool) {
		if f == fieldid.ProfSMActive && e.GPU == 1 {
			return 0, false
		}
		return 0.5, true
	})
	e := newTestEngine(t, "DCGM_FI_PROF_SM_ACTIVE, gauge, a\nDCGM_FI_DEV_GPU_TEMP, gauge, t\n", src, clk)
	collectAll(t, e)
	collectAll(t, e)
	mfs := scrape(t, e)
	assert.Len(t, series(mfs, "DCGM_FI_PROF_SM_ACTIVE", map[string]string{"gpu": "0"}), 1)
	assert.Empty(t, series(mfs, "DCGM_FI_PROF_SM_ACTIVE", map[string]string{"gpu": "1"}))
	sup := series(mfs, "gpuscope_field_supported", map[string]string{"gpu": "1", "field": "DCGM_FI_PROF_SM_ACTIVE", "reason": "scripted as unsupported"})
	require.Len(t, sup, 1)
	assert.Equal(t, 0.0, value(sup[0]))
	// A supported field carries no news: no series, on any GPU.
	all := series(mfs, "gpuscope_field_supported", nil)
	assert.Len(t, all, 1, "only the unsupported field of GPU 1 has a series")
}

// A label-type field a GPU cannot serve (the fabric's cluster UUID on a
// GPU that joins no NVLink fabric) is missing from the GPU's labels, and
// says why in gpuscope_field_supported as a value field does.
func TestUnsupportedLabelFieldSaysWhy(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(2, func(_ *source.Entity, f uint16, _ time.Time) (float64, bool) {
		return 40, f != fieldid.FabricClusterUUID
	})
	e := newTestEngine(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DEV_FABRIC_CLUSTER_UUID, label, u\n", src, clk)
	collectAll(t, e)
	mfs := scrape(t, e)
	temps := series(mfs, "DCGM_FI_DEV_GPU_TEMP", nil)
	require.Len(t, temps, 2)
	for _, m := range temps {
		assert.Empty(t, labelOf(m, "DCGM_FI_DEV_FABRIC_CLUSTER_UUID"))
	}
	for _, gpu := range []string{"0", "1"} {
		sup := series(mfs, "gpuscope_field_supported", map[string]string{"gpu": gpu, "field": "DCGM_FI_DEV_FABRIC_CLUSTER_UUID", "reason": "scripted as unsupported"})
		assert.Len(t, sup, 1, "GPU %s", gpu)
	}
	assert.Len(t, series(mfs, "gpuscope_field_supported", nil), 2, "the temperature is supported")
}

func TestWindowStatisticsMatchHandComputedValues(t *testing.T) {
	clk := newClock()
	// Ten samples 100 ms apart: 0.1, 0.2, ... 1.0 on GPU 0.
	step := 0
	src := sourcetest.NewGPUs(1, func(_ *source.Entity, f uint16, _ time.Time) (float64, bool) {
		return float64(step) / 10, true
	})
	e := newTestEngine(t, "DCGM_FI_PROF_SM_ACTIVE, gauge, a, 100ms, min max avg p50 p90 p99\n", src, clk)
	for step = 1; step <= 10; step++ {
		clk.Add(100 * time.Millisecond)
		collectAll(t, e)
	}
	mfs := scrape(t, e)
	want := map[string]float64{
		"min": 0.1, "max": 1.0, "avg": 0.55,
		// Linear interpolation between closest ranks: rank q*(n-1).
		"p50": 0.55, "p90": 0.91, "p99": 0.991,
	}
	for stat, v := range want {
		m := series(mfs, "DCGM_FI_PROF_SM_ACTIVE_window", map[string]string{"stat": stat, "gpu": "0"})
		require.Len(t, m, 1, stat)
		assert.InDelta(t, v, value(m[0]), 1e-9, stat)
	}
	n := series(mfs, "DCGM_FI_PROF_SM_ACTIVE_window_samples", map[string]string{"gpu": "0"})
	require.Len(t, n, 1)
	assert.Equal(t, 10.0, value(n[0]))

	// The window slides: 10 s later only the samples of the last 10 s count,
	// whoever scrapes.
	for step = 1; step <= 5; step++ {
		clk.Add(2 * time.Second)
		collectAll(t, e)
	}
	mfs = scrape(t, e)
	n = series(mfs, "DCGM_FI_PROF_SM_ACTIVE_window_samples", map[string]string{"gpu": "0"})
	require.Len(t, n, 1)
	assert.Equal(t, 5.0, value(n[0]), "samples at -8s..0s are in a 10s window")
	m := series(mfs, "DCGM_FI_PROF_SM_ACTIVE_window", map[string]string{"stat": "min", "gpu": "0"})
	assert.InDelta(t, 0.1, value(m[0]), 1e-9)
}

func TestRepeatedXIDsEachCount(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(2, constValues(map[uint16]float64{}))
	e := newTestEngine(t, "DCGM_FI_DEV_XID_ERRORS, gauge, Last XID\nDCGM_EXP_XID_ERRORS_COUNT, gauge, XIDs in window\n", src, clk)
	at := clk.Now()
	src.XIDs = []sourcetest.XID{{Entity: src.Ents[1], Code: 79, At: at}, {Entity: src.Ents[1], Code: 79, At: at.Add(time.Millisecond)}, {Entity: src.Ents[1], Code: 13, At: at}}
	collectAll(t, e)
	mfs := scrape(t, e)

	tot := series(mfs, "gpuscope_xid_errors_total", map[string]string{"gpu": "1", "xid": "79"})
	require.Len(t, tot, 1)
	assert.Equal(t, 2.0, value(tot[0]))
	assert.Equal(t, "GPU has fallen off the bus", labelOf(tot[0], "xid_description"))
	last := series(mfs, "gpuscope_xid_last_seen_timestamp_seconds", map[string]string{"gpu": "1", "xid": "79"})
	require.Len(t, last, 1)
	assert.InDelta(t, float64(at.Add(time.Millisecond).UnixNano())/1e9, value(last[0]), 1e-3)
	cnt := series(mfs, "DCGM_EXP_XID_ERRORS_COUNT", map[string]string{"gpu": "1", "xid": "79", "window_size_in_ms": "60000"})
	require.Len(t, cnt, 1)
	assert.Equal(t, 2.0, value(cnt[0]))
	assert.Empty(t, series(mfs, "gpuscope_xid_errors_total", map[string]string{"gpu": "0"}))

	// One more 79 a while later: the total keeps counting, the window count
	// forgets what left the window, and an XID no longer in the window has
	// no series (dcgm-exporter builds the family from the window's values).
	clk.Add(2 * time.Minute)
	src.XIDs = []sourcetest.XID{{Entity: src.Ents[1], Code: 79, At: clk.Now()}}
	collectAll(t, e)
	mfs = scrape(t, e)
	assert.Equal(t, 3.0, value(series(mfs, "gpuscope_xid_errors_total", map[string]string{"gpu": "1", "xid": "79"})[0]))
	assert.Equal(t, 1.0, value(series(mfs, "DCGM_EXP_XID_ERRORS_COUNT", map[string]string{"gpu": "1", "xid": "79"})[0]))
	assert.Empty(t, series(mfs, "DCGM_EXP_XID_ERRORS_COUNT", map[string]string{"gpu": "1", "xid": "13"}))
}

// dcgm-exporter's internal/pkg/collector/expcollector.go (getMetrics) gives
// every monitored GPU without a value in the window one series of value 0,
// labelled with window_size_in_ms and without xid.
func TestXIDCountHasAZeroSeriesPerGPUBeforeTheFirstXID(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(2, constValues(map[uint16]float64{}))
	e := newTestEngine(t, "DCGM_EXP_XID_ERRORS_COUNT, gauge, XIDs in window\n", src, clk)
	collectAll(t, e)
	mf := scrape(t, e)["DCGM_EXP_XID_ERRORS_COUNT"]
	require.NotNil(t, mf, "the family is there before any XID")
	require.Len(t, mf.Metric, 2)
	for i, m := range mf.Metric {
		assert.Equal(t, fmt.Sprint(i), labelOf(m, "gpu"))
		assert.Equal(t, "60000", labelOf(m, "window_size_in_ms"))
		assert.False(t, hasLabel(m, "xid"), "the zero series has no xid label")
		assert.Equal(t, 0.0, value(m))
	}
}

// DCGM writes the XID errors field only when an XID arrives; dcgm-exporter reads its
// latest value however old and labels it with err_code and err_msg
// (internal/pkg/collector/gpu_collector.go, toMetric; the texts come from
// xid_errors.go).
func TestXIDFieldHoldsItsLastValueWithErrCodeAndMessage(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(2, constValues(map[uint16]float64{}))
	e := newTestEngine(t, "DCGM_FI_DEV_XID_ERRORS, gauge, Last XID\n", src, clk)
	src.XIDs = []sourcetest.XID{{Entity: src.Ents[0], Code: 48, At: clk.Now()}, {Entity: src.Ents[1], Code: 999, At: clk.Now()}}
	collectAll(t, e)
	for _, after := range []time.Duration{0, 31 * time.Second, 2 * time.Hour} {
		clk.Add(after)
		collectAll(t, e) // no new event: DCGM has no new value of the XID errors field
		mfs := scrape(t, e)
		m := series(mfs, "DCGM_FI_DEV_XID_ERRORS", map[string]string{"gpu": "0"})
		require.Len(t, m, 1, "the XID series is still there after %s", after)
		assert.Equal(t, 48.0, value(m[0]))
		assert.Equal(t, "48", labelOf(m[0], "err_code"))
		assert.Equal(t, "Double Bit ECC Error", labelOf(m[0], "err_msg"))
		m = series(mfs, "DCGM_FI_DEV_XID_ERRORS", map[string]string{"gpu": "1"})
		require.Len(t, m, 1)
		assert.Equal(t, "999", labelOf(m[0], "err_code"))
		assert.Equal(t, "Unknown Error", labelOf(m[0], "err_msg"))
	}
}

func hasLabel(m *dto.Metric, name string) bool {
	for _, l := range m.Label {
		if l.GetName() == name {
			return true
		}
	}
	return false
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func TestClockEventsDecodeTheBitmask(t *testing.T) {
	clk := newClock()
	masks := []float64{0, 0x4, 0x4, 0x0, 0x4 | 0x40}
	i := 0
	src := sourcetest.NewGPUs(1, func(_ *source.Entity, f uint16, _ time.Time) (float64, bool) { return masks[i], true })
	e := newTestEngine(t, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS, gauge, reasons\nDCGM_EXP_CLOCK_EVENTS_COUNT, gauge, events\n", src, clk)
	for i = range masks {
		clk.Add(time.Second)
		collectAll(t, e)
	}
	mfs := scrape(t, e)
	check := func(family, event string, want float64) {
		t.Helper()
		m := series(mfs, family, map[string]string{"clock_event": event})
		require.Len(t, m, 1, family+" "+event)
		assert.Equal(t, want, value(m[0]), family+" "+event)
	}
	// gpuscope's own families count a reason each time it becomes set.
	check("gpuscope_clock_events_total", "power_cap", 2)
	check("gpuscope_clock_events_total", "hw_thermal", 1)
	check("gpuscope_clock_events_total", "gpu_idle", 0)
	check("gpuscope_clock_event_active", "power_cap", 1)
	check("gpuscope_clock_event_active", "hw_thermal", 1)
	check("gpuscope_clock_event_active", "hw_slowdown", 0)
	// dcgm-exporter's counts samples with the bit set: 0x4 is set in three
	// of the five samples.
	check("DCGM_EXP_CLOCK_EVENTS_COUNT", "power_cap", 3)
	check("DCGM_EXP_CLOCK_EVENTS_COUNT", "hw_thermal", 1)
	m := series(mfs, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", nil)
	require.Len(t, m, 1)
	assert.Equal(t, float64(0x44), value(m[0]))
}

// The clock_event values, counting and shape of dcgm-exporter's family, from
// internal/pkg/collector/clock_events_collector.go (clockEventToString, the
// bitmask parser) and expcollector.go (getMetrics: counts per reason over the
// values in the window; only reasons seen; a GPU with no value in the window
// gets one series of value 0 without clock_event).
func TestClockEventsCountIsDCGMExportersFamily(t *testing.T) {
	names := map[uint64]string{
		0x1: "gpu_idle", 0x2: "clocks_setting", 0x4: "power_cap", 0x8: "hw_slowdown", 0x10: "sync_boost",
		0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake", 0x100: "display_clocks",
	}
	for bit, name := range names {
		t.Run(name, func(t *testing.T) {
			clk := newClock()
			src := sourcetest.NewGPUs(1, func(_ *source.Entity, f uint16, _ time.Time) (float64, bool) { return float64(bit), true })
			e := newTestEngine(t, "DCGM_EXP_CLOCK_EVENTS_COUNT, gauge, events\n", src, clk)
			for range 4 {
				clk.Add(time.Second)
				collectAll(t, e)
			}
			mf := scrape(t, e)["DCGM_EXP_CLOCK_EVENTS_COUNT"]
			require.NotNil(t, mf)
			require.Len(t, mf.Metric, 1, "only the reason seen has a series")
			assert.Equal(t, name, labelOf(mf.Metric[0], "clock_event"))
			assert.Equal(t, "60000", labelOf(mf.Metric[0], "window_size_in_ms"))
			assert.Equal(t, 4.0, value(mf.Metric[0]), "every sample with the bit counts")
		})
	}

	t.Run("window", func(t *testing.T) {
		clk := newClock()
		mask := 0x1 | 0x4
		src := sourcetest.NewGPUs(2, func(e *source.Entity, f uint16, _ time.Time) (float64, bool) {
			return float64(mask), e.GPU == 0
		})
		e := newTestEngine(t, "DCGM_EXP_CLOCK_EVENTS_COUNT, gauge, events\n", src, clk)
		collectAll(t, e)
		mfs := scrape(t, e)
		assert.Len(t, series(mfs, "DCGM_EXP_CLOCK_EVENTS_COUNT", map[string]string{"gpu": "0"}), 2, "gpu_idle and power_cap")
		zero := series(mfs, "DCGM_EXP_CLOCK_EVENTS_COUNT", map[string]string{"gpu": "1"})
		require.Len(t, zero, 1, "a GPU without samples gets the zero series")
		assert.False(t, hasLabel(zero[0], "clock_event"))
		assert.Equal(t, 0.0, value(zero[0]))

		// Samples leave the window: GPU 0 falls back to the zero series.
		clk.Add(61 * time.Second)
		mask = 0
		mfs = scrape(t, e)
		m := series(mfs, "DCGM_EXP_CLOCK_EVENTS_COUNT", map[string]string{"gpu": "0"})
		require.Len(t, m, 1)
		assert.False(t, hasLabel(m[0], "clock_event"))
		// Samples without any bit: the GPU has values in the window but no
		// reason to count, so it has no series at all, as in dcgm-exporter.
		collectAll(t, e)
		assert.Empty(t, series(scrape(t, e), "DCGM_EXP_CLOCK_EVENTS_COUNT", map[string]string{"gpu": "0"}))
	})
}

// dcgm-exporter samples DCGM_FI_DEV_CLOCKS_EVENT_REASONS every
// --collect-interval (30 s by default; internal/pkg/devicewatchlistmanager:
// WatchDeviceFields at collectInterval) and counts the samples of the window
// (expcollector.go, getMetrics). gpuscope samples the field every second, so
// it counts in periods of dcgm-exporter's interval: a power cap held for 90
// of the window's 300 seconds counts 3, as there, not 90, and an alert
// written against dcgm-exporter's count fires as late as it did.
func TestClockEventsCountIsInDCGMExporterSamples(t *testing.T) {
	for _, tc := range []struct {
		period time.Duration
		want   float64
	}{{30 * time.Second, 3}, {0, 90}} {
		t.Run(tc.period.String(), func(t *testing.T) {
			clk := newClock()
			// Start on a period boundary, so that 90 s are three periods.
			clk.Add(time.Duration(30e9 - clk.Now().UnixNano()%30e9))
			start := clk.Now()
			src := sourcetest.NewGPUs(1, func(_ *source.Entity, _ uint16, now time.Time) (float64, bool) {
				if d := now.Sub(start); d > 0 && d <= 90*time.Second {
					return 0x4, true
				}
				return 0, true
			})
			src.Now = clk.Now
			e, err := New(Options{Source: src, Counters: parseSet(t, "DCGM_EXP_CLOCK_EVENTS_COUNT, gauge, events\n"),
				DefaultInterval: time.Second, ClockEventsWindow: 5 * time.Minute, ClockEventsPeriod: tc.period,
				Hostname: "node-1", Now: clk.Now, Log: quietLog()})
			require.NoError(t, err)
			require.NoError(t, src.Watch(e.plan.groups))
			e.refreshEntities()
			for range 300 {
				clk.Add(time.Second)
				collectAll(t, e)
			}
			m := series(scrape(t, e), "DCGM_EXP_CLOCK_EVENTS_COUNT", map[string]string{"clock_event": "power_cap"})
			require.Len(t, m, 1)
			assert.Equal(t, tc.want, value(m[0]))
		})
	}
}

func TestStaleSeriesLeaveTheExposition(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(1, constValues(map[uint16]float64{fieldid.GPUTemp: 40}))
	e := newTestEngine(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t\n", src, clk)
	collectAll(t, e)
	assert.Len(t, series(scrape(t, e), "DCGM_FI_DEV_GPU_TEMP", nil), 1)
	src.Down = true
	clk.Add(29 * time.Second)
	assert.Len(t, series(scrape(t, e), "DCGM_FI_DEV_GPU_TEMP", nil), 1, "recent values are served while the source is down")
	clk.Add(2 * time.Second)
	assert.Empty(t, series(scrape(t, e), "DCGM_FI_DEV_GPU_TEMP", nil), "values older than 10 intervals (at least 30s) are dropped")
}

func TestReloadKeepsSeriesAndRefusedReloadKeepsOldSet(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(1, constValues(map[uint16]float64{fieldid.GPUTemp: 40, fieldid.PowerUsage: 300, fieldid.ProfSMActive: 0.5}))
	e := newTestEngine(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_PROF_SM_ACTIVE, gauge, a, 100ms, max\n", src, clk)
	e.baseCtx = context.Background()
	for range 3 {
		clk.Add(100 * time.Millisecond)
		collectAll(t, e)
	}
	require.NoError(t, e.Reload(parseSet(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DEV_POWER_USAGE, gauge, p\nDCGM_FI_PROF_SM_ACTIVE, gauge, a, 100ms, max avg\n")))
	e.Stop()
	// Straight after the reload, before any new sample: old fields still
	// served, window kept.
	mfs := scrape(t, e)
	assert.Len(t, series(mfs, "DCGM_FI_DEV_GPU_TEMP", nil), 1)
	w := series(mfs, "DCGM_FI_PROF_SM_ACTIVE_window_samples", nil)
	require.Len(t, w, 1)
	assert.GreaterOrEqual(t, value(w[0]), 3.0, "the window survives the reload")
	assert.Len(t, series(mfs, "DCGM_FI_PROF_SM_ACTIVE_window", map[string]string{"stat": "avg"}), 1)

	src.Lock()
	src.WatchErr = errors.New("refused")
	src.Unlock()
	err := e.Reload(parseSet(t, "DCGM_FI_DEV_MEM_CLOCK, gauge, m\n"))
	e.Stop()
	require.Error(t, err)
	src.Lock()
	src.WatchErr = nil
	src.Unlock()
	collectAll(t, e)
	mfs = scrape(t, e)
	assert.Len(t, series(mfs, "DCGM_FI_DEV_POWER_USAGE", nil), 1, "the previous set keeps running")
	assert.Empty(t, series(mfs, "DCGM_FI_DEV_MEM_CLOCK", nil))
}

func TestEntitiesChangeKeepsSeriesByKey(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(2, constValues(map[uint16]float64{fieldid.GPUTemp: 40}))
	e := newTestEngine(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t\n", src, clk)
	collectAll(t, e)
	// The source reconnects: new pointers, same GPUs, plus one more.
	fresh := sourcetest.NewGPUs(3, nil)
	src.Lock()
	src.Ents = fresh.Ents
	src.ChangeEntities = true
	src.Unlock()
	collectAll(t, e)
	collectAll(t, e)
	mfs := scrape(t, e)
	assert.Len(t, series(mfs, "DCGM_FI_DEV_GPU_TEMP", nil), 3)
	assert.Equal(t, 3.0, value(series(mfs, "gpuscope_gpus", nil)[0]))
}

func TestReady(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(1, constValues(map[uint16]float64{fieldid.GPUTemp: 40}))
	e := newTestEngine(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t\n", src, clk)
	ok, why := e.Ready()
	assert.False(t, ok)
	assert.Contains(t, why, "first sample")
	collectAll(t, e)
	ok, _ = e.Ready()
	assert.True(t, ok)
	src.Lock()
	src.Down = true
	src.Unlock()
	e.pollStatus()
	ok, why = e.Ready()
	assert.False(t, ok)
	assert.Contains(t, why, "down")
}

func TestLostGPUIsReported(t *testing.T) {
	clk := newClock()
	src := &lostSource{Source: sourcetest.NewGPUs(2, constValues(map[uint16]float64{fieldid.GPUTemp: 40}))}
	e := newTestEngine(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t\n", src.Source, clk)
	e.src = src
	src.lost = []string{src.Ents[1].Key()}
	e.pollStatus()
	mfs := scrape(t, e)
	assert.Equal(t, 1.0, value(series(mfs, "gpuscope_gpu_lost", map[string]string{"gpu": "1"})[0]))
	assert.Equal(t, 0.0, value(series(mfs, "gpuscope_gpu_lost", map[string]string{"gpu": "0"})[0]))
}

type lostSource struct {
	*sourcetest.Source
	lost []string
}

func (l *lostSource) Status() source.Status { return source.Status{Up: true, Lost: l.lost} }

func TestBackgroundLoopsSampleAtTheirIntervals(t *testing.T) {
	src := sourcetest.NewGPUs(1, constValues(map[uint16]float64{fieldid.GPUTemp: 40, fieldid.ProfSMActive: 0.5}))
	set := parseSet(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t, 1s\nDCGM_FI_PROF_SM_ACTIVE, gauge, a, 100ms\n")
	clk := newClock()
	e, err := New(Options{Source: src, Counters: set, DefaultInterval: time.Second, Log: quietLog(), Now: clk.Now, Clock: clk})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, e.Start(ctx))
	collects := func() int {
		src.Lock()
		defer src.Unlock()
		return src.Collects
	}
	// Each loop reads once as it starts and then once per interval; a loop
	// that waits for its next read has a timer armed on the clock.
	for range 20 {
		require.True(t, clk.WaitForTimers(2, testwait.Timeout), "both loops wait for their next read")
		clk.Add(100 * time.Millisecond)
	}
	require.True(t, clk.WaitForTimers(2, testwait.Timeout))
	assert.Equal(t, (1+20)+(1+2), collects(), "2 s: 21 reads of the 100 ms group, 3 of the 1 s group")
	ok, _ := e.Ready()
	assert.True(t, ok)

	e.Stop()
	assert.Zero(t, clk.Timers(), "no loop waits after Stop")
	n := collects()
	clk.Add(time.Second)
	assert.Equal(t, n, collects(), "no collection after Stop")
}

func TestApplyDoesNotAllocate(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(8, constValues(map[uint16]float64{fieldid.GPUTemp: 40, fieldid.ProfSMActive: 0.5, fieldid.ProfPipeTensorActive: 0.3}))
	e := newTestEngine(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_PROF_SM_ACTIVE, gauge, a, 100ms, max p99\nDCGM_FI_PROF_PIPE_TENSOR_ACTIVE, gauge, a, 100ms, max\n", src, clk)
	b := &batch{}
	gi := 0 // the 100 ms group
	ctx := context.Background()
	for range 200 { // fill the rings and grow the batch once
		clk.Add(100 * time.Millisecond)
		require.NoError(t, e.collectOnce(ctx, gi, b))
	}
	allocs := testing.AllocsPerRun(100, func() {
		clk.Add(100 * time.Millisecond)
		_ = e.collectOnce(ctx, gi, b)
	})
	assert.Zero(t, allocs, "sampling allocates nothing in the steady state")
}

func TestExpositionEscapesLabelValues(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(1, constValues(map[uint16]float64{fieldid.GPUTemp: 40}))
	src.Ents[0].ModelName = "weird \"model\"\\name"
	e := newTestEngine(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t\n", src, clk)
	collectAll(t, e)
	m := series(scrape(t, e), "DCGM_FI_DEV_GPU_TEMP", nil)
	require.Len(t, m, 1)
	assert.Equal(t, "weird \"model\"\\name", labelOf(m[0], "modelName"))
}

func ExampleEngine_Render() {
	clk := newClock()
	src := sourcetest.NewGPUs(1, constValues(map[uint16]float64{fieldid.GPUTemp: 40}))
	src.Now = clk.Now
	set, _ := counters.Parse("example.csv", strings.NewReader("DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n"))
	e, _ := New(Options{Source: src, Counters: set, DefaultInterval: time.Second, Hostname: "node-1", Now: clk.Now, Log: quietLog()})
	_ = src.Watch(e.plan.groups)
	e.refreshEntities()
	_ = e.collectOnce(context.Background(), 0, &batch{})
	fmt.Print(strings.SplitAfter(string(e.Render(nil)), "\n")[2])
	// Output: DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-00000000-0000-0000-0000-000000000000",pci_bus_id="00000000:01:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node-1"} 40
}

// TestMIGAndLinkEntitiesGetWindowsLikeGPUs: window statistics and labels
// work the same on every entity kind: a MIG instance carries GPU_I_PROFILE
// and GPU_I_ID, an NvSwitch link nvswitch and nvlink, and each gets its own
// window; label-type fields come from the parent GPU.
func TestMIGAndLinkEntitiesGetWindowsLikeGPUs(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(1, func(e *source.Entity, f uint16, _ time.Time) (float64, bool) {
		return float64(e.Kind) + 0.5, true
	})
	gi := *src.Ents[0]
	gi.Kind, gi.GPUInstanceID, gi.GPUInstanceProfile = source.GPUInstance, 3, "1g.10gb"
	link := *src.Ents[0]
	link.Kind, link.Switch, link.Link = source.NVLink, 2, 7
	src.Ents = append(src.Ents, &gi, &link)
	src.Texts = map[uint16]string{fieldid.DriverVersion: "570.1"}
	e := newTestEngine(t, "DCGM_FI_PROF_SM_ACTIVE, gauge, a, 100ms, max\nDCGM_FI_DRIVER_VERSION, label, d\n", src, clk)
	for range 5 {
		clk.Add(100 * time.Millisecond)
		collectAll(t, e)
	}
	mfs := scrape(t, e)
	m := series(mfs, "DCGM_FI_PROF_SM_ACTIVE_window", map[string]string{"GPU_I_ID": "3", "GPU_I_PROFILE": "1g.10gb", "stat": "max"})
	require.Len(t, m, 1)
	assert.Equal(t, float64(source.GPUInstance)+0.5, value(m[0]))
	m = series(mfs, "DCGM_FI_PROF_SM_ACTIVE_window", map[string]string{"nvswitch": "nvswitch2", "nvlink": "7", "stat": "max"})
	require.Len(t, m, 1)
	assert.Equal(t, float64(source.NVLink)+0.5, value(m[0]))
	assert.Equal(t, "570.1", labelOf(m[0], "DCGM_FI_DRIVER_VERSION"), "label fields come from the parent GPU")
	// The GPU's own series give way to its MIG instance's (dcgm-exporter's
	// default, -d f); the switch link keeps its own.
	assert.Len(t, series(mfs, "DCGM_FI_PROF_SM_ACTIVE_window_samples", nil), 2)
}

// podEnricher is a test enricher with fixed and per-entity labels.
type podEnricher struct {
	prometheus.Collector
	gen uint64
}

func (p *podEnricher) LabelNames() []string { return []string{"pod", "namespace"} }
func (p *podEnricher) Values(e *source.Entity) []string {
	if e.GPU == 0 {
		return []string{"train-0", "ml"}
	}
	return nil
}
func (p *podEnricher) Generation() uint64  { return p.gen }
func (p *podEnricher) MaxExtraLabels() int { return 2 }
func (p *podEnricher) ExtraLabels(e *source.Entity) []enrich.Label {
	if e.GPU == 0 {
		return []enrich.Label{{Name: "team", Value: "vision"}, {Name: "empty", Value: ""}}
	}
	return nil
}

func TestEnricherLabelsOnEverySeries(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(2, constValues(map[uint16]float64{fieldid.GPUTemp: 40}))
	src.Now = clk.Now
	pe := &podEnricher{Collector: prometheus.NewGauge(prometheus.GaugeOpts{Name: "x", Help: "x"}), gen: 1}
	e, err := New(Options{Source: src, Counters: parseSet(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t\n"), DefaultInterval: time.Second,
		Hostname: "node-1", Now: clk.Now, Log: quietLog(), Enrichers: []enrich.Enricher{pe}})
	require.NoError(t, err)
	require.NoError(t, e.Open())
	collectAll(t, e)
	mfs := scrape(t, e)
	m := series(mfs, "DCGM_FI_DEV_GPU_TEMP", map[string]string{"gpu": "0"})
	require.Len(t, m, 1)
	assert.Equal(t, "train-0", labelOf(m[0], "pod"))
	assert.Equal(t, "ml", labelOf(m[0], "namespace"))
	assert.Equal(t, "vision", labelOf(m[0], "team"))
	for _, l := range m[0].Label {
		assert.NotEqual(t, "empty", l.GetName(), "empty values are left out")
	}
	m = series(mfs, "DCGM_FI_DEV_GPU_TEMP", map[string]string{"gpu": "1"})
	require.Len(t, m, 1)
	assert.Empty(t, labelOf(m[0], "pod"))
}

// DCGM_EXP_GPU_HEALTH_STATUS as dcgm-exporter renders it
// (internal/pkg/collector/gpu_health_collector.go, GetMetrics): per GPU one
// series per health watch, labelled health_watch and health_error_code, with
// DCGM's result (0, 10, 20) as value.
func TestHealthStatusIsOneSeriesPerWatch(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(2, constValues(map[uint16]float64{}))
	sick := source.PassingHealth()
	source.SetHealth(sick, source.HealthResult{Watch: "THERMAL", ErrorCode: "DCGM_FR_CLOCK_THROTTLE_THERMAL", Result: 10})
	src.Health = map[*source.Entity][]source.HealthResult{src.Ents[1]: sick}
	e := newTestEngine(t, "DCGM_EXP_GPU_HEALTH_STATUS, gauge, health\n", src, clk)
	collectAll(t, e)
	mfs := scrape(t, e)
	for gpu := range 2 {
		ms := series(mfs, "DCGM_EXP_GPU_HEALTH_STATUS", map[string]string{"gpu": fmt.Sprint(gpu)})
		require.Len(t, ms, 11, "one series per watch")
		for _, m := range ms {
			w := labelOf(m, "health_watch")
			if gpu == 1 && w == "THERMAL" {
				assert.Equal(t, "DCGM_FR_CLOCK_THROTTLE_THERMAL", labelOf(m, "health_error_code"))
				assert.Equal(t, 10.0, value(m))
				continue
			}
			assert.Equal(t, "DCGM_FR_OK", labelOf(m, "health_error_code"), w)
			assert.Equal(t, 0.0, value(m), w)
		}
	}
	// A health check that stops answering leaves the family like any
	// other field.
	src.Down = true
	clk.Add(31 * time.Second)
	assert.Nil(t, scrape(t, e)["DCGM_EXP_GPU_HEALTH_STATUS"])
}

// TestInvalidUTF8BreaksEveryScrape: a host name, a label-type field and pod
// labels that are not valid UTF-8 reach the exposition with U+FFFD in place
// of the bad bytes, so Prometheus' own text parser reads the whole scrape,
// and the repairs are counted. (An HPC job ID that is not UTF-8 never gets
// this far: the job mapping refuses it, TestHPCJobRound4RefusesControlCharacters.)
func TestInvalidUTF8BreaksEveryScrape(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(2, constValues(map[uint16]float64{fieldid.GPUTemp: 40}))
	src.Now = clk.Now
	src.Texts = map[uint16]string{fieldid.DriverVersion: "550.\xff54"}
	pe := &badPodEnricher{Collector: prometheus.NewGauge(prometheus.GaugeOpts{Name: "x", Help: "x"})}
	e, err := New(Options{Source: src, Counters: parseSet(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DRIVER_VERSION, label, d\n"),
		DefaultInterval: time.Second, Window: 10 * time.Second, Hostname: "n\xb0de-1", Now: clk.Now, Log: quietLog(),
		Enrichers: []enrich.Enricher{pe}})
	require.NoError(t, err)
	before := invalidUTF8Labels.Load()
	require.NoError(t, e.Open())
	collectAll(t, e)

	out := e.Render(nil)
	// Both of Prometheus' validation schemes accept it.
	for _, scheme := range []model.ValidationScheme{model.UTF8Validation, model.LegacyValidation} {
		parser := expfmt.NewTextParser(scheme)
		_, err := parser.TextToMetricFamilies(bytes.NewReader(out))
		require.NoError(t, err, "exposition must parse:\n%s", out)
	}
	mfs := scrape(t, e)
	m := series(mfs, "DCGM_FI_DEV_GPU_TEMP", map[string]string{"gpu": "0"})
	require.Len(t, m, 1)
	for name, want := range map[string]string{
		"Hostname": "n\uFFFDde-1", "DCGM_FI_DRIVER_VERSION": "550.\uFFFD54",
		"pod": "train-\uFFFD", "namespace": "ml", "label_team": "vis\uFFFDon",
	} {
		assert.Equal(t, want, labelOf(m[0], name), name)
	}
	assert.GreaterOrEqual(t, invalidUTF8Labels.Load()-before, uint64(4), "each repaired value is counted")

	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(e))
	got, err := reg.Gather()
	require.NoError(t, err)
	found := false
	for _, mf := range got {
		if mf.GetName() == "gpuscope_label_values_sanitized_total" {
			found = true
			assert.GreaterOrEqual(t, mf.GetMetric()[0].GetCounter().GetValue(), 5.0)
		}
	}
	assert.True(t, found, "gpuscope_label_values_sanitized_total is exported")
}

// badPodEnricher gives GPU 0 pod labels that are not valid UTF-8.
type badPodEnricher struct{ prometheus.Collector }

func (p *badPodEnricher) LabelNames() []string { return []string{"pod", "namespace"} }
func (p *badPodEnricher) Values(e *source.Entity) []string {
	if e.GPU == 0 {
		return []string{"train-\xc3", "ml"}
	}
	return nil
}
func (p *badPodEnricher) Generation() uint64  { return 1 }
func (p *badPodEnricher) MaxExtraLabels() int { return 1 }
func (p *badPodEnricher) ExtraLabels(e *source.Entity) []enrich.Label {
	if e.GPU == 0 {
		return []enrich.Label{{Name: "label_team", Value: "vis\x80on"}}
	}
	return nil
}

// labelFieldsCSV lists n fields as label-type fields (dcgm-exporter accepts
// any field as a label).
func labelFieldsCSV(n int) string {
	names := []string{"DCGM_FI_DRIVER_VERSION", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_MEMORY_TEMP",
		"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_POWER_MGMT_LIMIT", "DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "DCGM_FI_DEV_GPU_UTIL",
		"DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL", "DCGM_FI_DEV_FB_TOTAL", "DCGM_FI_DEV_FB_FREE",
		"DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED", "DCGM_FI_DEV_RETIRED_PENDING", "DCGM_FI_DEV_ROW_REMAP_FAILURE",
		"DCGM_FI_DEV_ROW_REMAP_PENDING"}
	var b strings.Builder
	// The XID field's err_code and err_msg are the widest family.
	b.WriteString("DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DEV_XID_ERRORS, gauge, x\n")
	for _, n := range names[:n] {
		b.WriteString(n + ", label, l\n")
	}
	return b.String()
}

// A series never carries more than 30 labels once stored: a counters file
// whose label-type fields would cross that is refused at start and on
// reload, and a refused reload keeps the running set.
func TestLabelBudgetRefusesTooManyLabelFields(t *testing.T) {
	pe := func() []enrich.Enricher {
		return []enrich.Enricher{&podEnricher{Collector: prometheus.NewGauge(prometheus.GaugeOpts{Name: "x", Help: "x"}), gen: 1}}
	}
	tests := []struct {
		name      string
		fields    int
		enrichers []enrich.Enricher
		ok        bool
	}{
		// A MIG GPU instance: 8 identity + 16 + 2 of a family + 4 added
		// later = 30.
		{"16 label fields fit", 16, nil, true},
		{"17 label fields do not", 17, nil, false},
		// The pod enricher adds 2 names and up to 2 pod labels.
		{"12 label fields and pod labels fit", 12, pe(), true},
		{"13 label fields and pod labels do not", 13, pe(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := sourcetest.NewGPUs(1, constValues(map[uint16]float64{fieldid.GPUTemp: 40}))
			_, err := New(Options{Source: src, Counters: parseSet(t, labelFieldsCSV(tt.fields)), DefaultInterval: time.Second,
				Hostname: "node-1", Log: quietLog(), Enrichers: tt.enrichers})
			if tt.ok {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "a series of a MIG GPU instance would carry up to 31 labels, over the limit of 30")
			assert.Contains(t, err.Error(), "to fit, list fewer label-type fields in test.csv")
		})
	}

	clk := newClock()
	src := sourcetest.NewGPUs(1, constValues(map[uint16]float64{fieldid.GPUTemp: 40}))
	e := newTestEngine(t, labelFieldsCSV(1), src, clk)
	e.baseCtx = context.Background()
	err := e.Reload(parseSet(t, labelFieldsCSV(17)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "reload: a series of a MIG GPU instance would carry up to 31 labels")
	collectAll(t, e)
	assert.Len(t, series(scrape(t, e), "DCGM_FI_DEV_GPU_TEMP", nil), 1, "the previous set keeps running")
}

// TestRelabellingIsOncePerBatch: a batch in which a label-type field
// changes on every GPU (a driver upgrade) rebuilds each entity's labels
// once, not once per change: the work per changed GPU stays flat as the
// node grows, where relabelling inside the loop made it grow with the
// number of GPUs.
func TestRelabellingIsOncePerBatch(t *testing.T) {
	perGPU := func(n int) float64 {
		clk := newClock()
		src := sourcetest.NewGPUs(n, constValues(map[uint16]float64{fieldid.GPUTemp: 40}))
		e := newTestEngine(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DRIVER_VERSION, label, d\n", src, clk)
		collectAll(t, e)
		version := 0
		allocs := testing.AllocsPerRun(5, func() {
			version++
			b := &batch{}
			for _, ent := range src.Ents {
				b.Text(ent, 1, fmt.Sprintf("570.%d", version))
			}
			e.apply(b)
		})
		m := series(scrape(t, e), "DCGM_FI_DEV_GPU_TEMP", map[string]string{"gpu": "0"})
		require.Len(t, m, 1)
		assert.Equal(t, fmt.Sprintf("570.%d", version), labelOf(m[0], "DCGM_FI_DRIVER_VERSION"), "the new value is on the series")
		return allocs / float64(n)
	}
	small, large := perGPU(8), perGPU(128)
	assert.Less(t, large, 2*small, "allocations per changed GPU: %.0f with 8 GPUs, %.0f with 128", small, large)
}

// TestWindowsCutShortAreRefused: a window longer than a ring can hold at a
// field's watch interval (4096 samples: 409.4 s at 100 ms) is refused at
// start and on reload, naming the field, its line and the largest window
// that fits, instead of serving statistics over less time than HELP says.
func TestWindowsCutShortAreRefused(t *testing.T) {
	slow := "DCGM_FI_DEV_GPU_TEMP, gauge, t, 1s, max\n"
	fast := "DCGM_FI_PROF_SM_ACTIVE, gauge, a, 100ms, max p99\n"
	opts := func(csv string, win time.Duration) Options {
		clk := newClock()
		src := sourcetest.NewGPUs(1, constValues(map[uint16]float64{fieldid.GPUTemp: 40}))
		return Options{Source: src, Counters: parseSet(t, csv), DefaultInterval: time.Second, Window: win, Now: clk.Now, Log: quietLog()}
	}
	_, err := New(opts(fast, 24*time.Hour))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "a window of 24h0m0s", "named generically when the caller gives no option name")
	// The caller names the window as its configuration does.
	named := func(err error) error {
		var we *WindowError
		if errors.As(err, &we) {
			we.Option = "--window"
		}
		return err
	}
	_, err = New(opts(slow+fast, 24*time.Hour))
	require.Error(t, named(err))
	assert.Equal(t, "test.csv:1: DCGM_FI_DEV_GPU_TEMP: a --window of 24h0m0s at its 1s watch interval needs 86402 samples per series, more than the 4096 a window holds; use --window 1h8m14s or less, or a longer watch interval for this field", err.Error())
	_, err = New(opts(fast, 24*time.Hour))
	require.Error(t, named(err))
	assert.Equal(t, "test.csv:1: DCGM_FI_PROF_SM_ACTIVE: a --window of 24h0m0s at its 100ms watch interval needs 864002 samples per series, more than the 4096 a window holds; use --window 6m49.4s or less, or a longer watch interval for this field", err.Error())

	_, err = New(opts(slow+fast, 409400*time.Millisecond))
	require.NoError(t, err, "the largest window that fits")

	e, err := New(opts(slow, time.Hour))
	require.NoError(t, err, "an hour at 1s fits")
	err = e.Reload(parseSet(t, slow+fast))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "reload: test.csv:2: DCGM_FI_PROF_SM_ACTIVE: a window of 1h0m0s")
	assert.ErrorAs(t, err, new(*WindowError))
}

// TestClockEventsWindowsCutShortAreRefused: DCGM_EXP_CLOCK_EVENTS_COUNT
// counts the clock-event reason samples of its window, and a GPU keeps at
// most 4096 of them, so a --clock-events-count-window-size longer than
// 4096 samples at the reasons' watch interval would count over less time
// than its window_size_in_ms label says. Start and reload refuse it, naming
// the flag, the field, its line, its interval and the largest window that
// fits. DCGM_EXP_XID_ERRORS_COUNT keeps XID events, not samples, so its
// window is not bounded by a watch interval.
func TestClockEventsWindowsCutShortAreRefused(t *testing.T) {
	const (
		temp      = "DCGM_FI_DEV_GPU_TEMP, gauge, t\n"
		clock     = "DCGM_EXP_CLOCK_EVENTS_COUNT, gauge, c\n"
		clockFast = "DCGM_EXP_CLOCK_EVENTS_COUNT, gauge, c, 100ms\n"
		reasons   = "DCGM_FI_DEV_CLOCKS_EVENT_REASONS, gauge, r, 100ms\n"
		xidFast   = "DCGM_EXP_XID_ERRORS_COUNT, gauge, x, 100ms\n"
	)
	opts := func(csv string, clockWin, xidWin time.Duration) Options {
		clk := newClock()
		src := sourcetest.NewGPUs(1, constValues(map[uint16]float64{fieldid.GPUTemp: 40}))
		return Options{Source: src, Counters: parseSet(t, csv), DefaultInterval: time.Second,
			ClockEventsWindow: clockWin, XIDWindow: xidWin, Now: clk.Now, Log: quietLog()}
	}
	for _, tc := range []struct {
		name             string
		csv              string
		clockWin, xidWin time.Duration
		want             string // "" when the engine starts
	}{
		{name: "default 5m at the default 1s", csv: temp + clock, clockWin: 5 * time.Minute},
		{name: "default 5m at 100ms", csv: temp + clockFast, clockWin: 5 * time.Minute},
		{name: "largest window that fits at 100ms", csv: temp + clockFast, clockWin: 409400 * time.Millisecond},
		{name: "10m at 100ms", csv: temp + clockFast, clockWin: 10 * time.Minute,
			want: "test.csv:2: DCGM_EXP_CLOCK_EVENTS_COUNT: a clock-events count window of 10m0s at its 100ms watch interval needs 6002 samples per GPU, more than the 4096 a window holds; use clock-events count window 6m49.4s or less, or a longer watch interval for this field"},
		{name: "reasons watched at 100ms by another line", csv: clock + reasons, clockWin: 10 * time.Minute,
			want: "test.csv:1: DCGM_EXP_CLOCK_EVENTS_COUNT: a clock-events count window of 10m0s at its 100ms watch interval needs 6002 samples per GPU, more than the 4096 a window holds; use clock-events count window 6m49.4s or less, or a longer watch interval for this field"},
		{name: "2h at the default 1s", csv: temp + clock, clockWin: 2 * time.Hour,
			want: "test.csv:2: DCGM_EXP_CLOCK_EVENTS_COUNT: a clock-events count window of 2h0m0s at its 1s watch interval needs 7202 samples per GPU, more than the 4096 a window holds; use clock-events count window 1h8m14s or less, or a longer watch interval for this field"},
		{name: "long window without the family", csv: temp + reasons, clockWin: 2 * time.Hour},
		{name: "XID window counts events, not samples", csv: temp + xidFast, xidWin: time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(opts(tc.csv, tc.clockWin, tc.xidWin))
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
			var we *WindowError
			require.ErrorAs(t, err, &we)
			assert.True(t, we.ClockEvents, "the clock-event count's window, for the caller to name")
		})
	}

	t.Run("reload", func(t *testing.T) {
		e, err := New(opts(temp+clock, 10*time.Minute, 0))
		require.NoError(t, err, "10m at 1s fits")
		err = e.Reload(parseSet(t, temp+clockFast))
		require.Error(t, err)
		assert.Equal(t, "reload: test.csv:2: DCGM_EXP_CLOCK_EVENTS_COUNT: a clock-events count window of 10m0s at its 100ms watch interval needs 6002 samples per GPU, more than the 4096 a window holds; use clock-events count window 6m49.4s or less, or a longer watch interval for this field", err.Error())
	})
}
