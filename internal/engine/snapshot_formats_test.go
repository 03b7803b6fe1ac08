package engine

import (
	"bytes"
	"context"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/etc"
	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/source/sim"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

// protoShape is one engine whose two expositions are compared.
type protoShape struct {
	name      string
	csv       func(testing.TB) string
	mig       string
	events    float64
	insight   bool
	processes bool
	enrichers func() []enrich.Enricher
}

func readCSV(tb testing.TB, r io.Reader, extra string) string {
	tb.Helper()
	b, err := io.ReadAll(r)
	require.NoError(tb, err)
	return string(b) + "\n" + extra
}

// newShapeEngine runs a simulated node for 3 s of 100 ms samples.
func newShapeEngine(t *testing.T, sh protoShape) *Engine {
	t.Helper()
	e, _ := newShapeEngineClock(t, sh)
	return e
}

// newShapeEngineClock is newShapeEngine with the engine's clock.
func newShapeEngineClock(t *testing.T, sh protoShape) (*Engine, *sourcetest.Clock) {
	t.Helper()
	clk := newClock()
	cfg := sim.DefaultConfig()
	cfg.GPUs, cfg.MIG, cfg.EventRate, cfg.Now = 4, sh.mig, sh.events, clk.Now
	src, err := sim.New(cfg)
	require.NoError(t, err)
	opts := Options{Source: src, Counters: parseSet(t, sh.csv(t)), DefaultInterval: time.Second, Window: 2 * time.Second,
		Hostname: "node-1", Now: clk.Now, Log: quietLog(), Insight: InsightOptions{Enabled: sh.insight, Window: 2 * time.Second},
		Processes: ProcessOptions{Enabled: sh.processes}}
	if sh.enrichers != nil {
		opts.Enrichers = sh.enrichers()
	}
	e, err := New(opts)
	require.NoError(t, err)
	require.NoError(t, src.Watch(e.plan.groups))
	e.refreshEntities()
	e.pollStatus()
	b := &batch{}
	for tick := 0; tick <= 30; tick++ {
		for gi, g := range e.plan.groups {
			if tick%int(g.Interval/(100*time.Millisecond)) == 0 {
				require.NoError(t, e.collectOnce(context.Background(), gi, b))
			}
		}
		clk.Add(100 * time.Millisecond)
	}
	if sh.processes {
		e.refreshProcesses()
	}
	return e, clk
}

// TestFamiliesMatchTheText: the protobuf exposition, written as
// client_golang's encoder writes it and decoded as Prometheus decodes it,
// holds every family of the text exposition with the same HELP,
// TYPE, series, label sets and values, and the native histograms besides;
// for engines with MIG, per-link NVLink fields, pod and label-field
// labels, window statistics, the event families, the insight families and
// the per-process families in both layouts.
func TestFamiliesMatchTheText(t *testing.T) {
	pods := func() []enrich.Enricher {
		return []enrich.Enricher{&podEnricher{Collector: prometheus.NewGauge(prometheus.GaugeOpts{Name: "x", Help: "x"}), gen: 1}}
	}
	dcp := func(tb testing.TB) string { return readCSV(tb, etc.DCPMetrics(), "") }
	tests := []protoShape{
		{name: "window stats, MIG, insight", csv: dcp, mig: "7x1g.10gb", insight: true},
		{name: "per-link NVLink, MIG", csv: func(tb testing.TB) string { return dcp(tb) + perLinkCSV(tb) }, mig: "7x1g.10gb"},
		{name: "dcgm-exporter defaults, events, pods, label fields, processes", events: 200, enrichers: pods, processes: true,
			csv: func(tb testing.TB) string {
				return readCSV(tb, etc.DefaultCounters(), "DCGM_FI_PROF_SM_ACTIVE, gauge, a (ratio), 100ms, min max avg p50 p90 p99\n"+
					"DCGM_EXP_GPU_HEALTH_STATUS, gauge, h\nDCGM_EXP_P2P_STATUS, gauge, p\n")
			}},
		{name: "nvidia_gpu_exporter roles, MIG, events, processes", processes: true, csv: func(tb testing.TB) string {
			f, err := os.Open(filepath.Join("..", "..", "etc", "nvidia-gpu-exporter.csv"))
			require.NoError(tb, err)
			defer f.Close()
			return readCSV(tb, f, "")
		},
			mig: "3g.40gb", events: 200},
	}
	for _, sh := range tests {
		t.Run(sh.name, func(t *testing.T) {
			e := newShapeEngine(t, sh)
			text := e.Render(nil)
			parser := expfmt.NewTextParser(model.UTF8Validation)
			want, err := parser.TextToMetricFamilies(bytes.NewReader(text))
			require.NoError(t, err)
			body, err := e.AppendProto(nil)
			require.NoError(t, err)
			assert.Equal(t, encodeWithExpfmt(t, decodeInOrder(t, body)), body,
				"AppendProto writes what client_golang's encoder writes of the same families")
			got := decodeProto(t, body)
			hists := 0
			for name, mf := range got {
				if strings.HasSuffix(name, HistogramSuffix) {
					require.Equal(t, dto.MetricType_HISTOGRAM, mf.GetType(), name)
					field := strings.TrimSuffix(name, HistogramSuffix)
					assert.Contains(t, want, field+"_window", "a histogram of a field without window statistics")
					assert.Len(t, mf.Metric, len(want[field].GetMetric()), "one histogram per series of %s", field)
					hists++
					continue
				}
				assert.Contains(t, want, name, "a family only in protobuf")
			}
			for name, w := range want {
				g, ok := got[name]
				if !assert.True(t, ok, "family %s missing from protobuf", name) {
					continue
				}
				assert.Equal(t, w.GetHelp(), g.GetHelp(), name)
				assert.Equal(t, w.GetType(), g.GetType(), name)
				assert.Equal(t, seriesOf(w), seriesOf(g), name)
			}
			windowed := 0
			for name := range want {
				if strings.HasSuffix(name, "_window") {
					windowed++
				}
			}
			assert.Equal(t, windowed, hists, "a native histogram for every field with window statistics")
			if sh.processes {
				_, own := want[procInfoName]
				_, nvgpuExporter := want["nvidia_smi_compute_app_info"]
				assert.True(t, own || nvgpuExporter, "the per-process families are among those compared")
			}
			assert.Greater(t, len(want), 10, "families in the text")
		})
	}
}

// encodeWithExpfmt is the delimited protobuf exposition of mfs as
// client_golang's encoder writes it.
func encodeWithExpfmt(t *testing.T, mfs []*dto.MetricFamily) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeProtoDelim))
	for _, mf := range mfs {
		require.NoError(t, enc.Encode(mf))
	}
	return buf.Bytes()
}

// decodeInOrder reads a delimited protobuf exposition into its families,
// in the order they come.
func decodeInOrder(t *testing.T, body []byte) []*dto.MetricFamily {
	t.Helper()
	dec := expfmt.NewDecoder(bytes.NewReader(body), expfmt.NewFormat(expfmt.TypeProtoDelim))
	var out []*dto.MetricFamily
	for {
		mf := &dto.MetricFamily{}
		err := dec.Decode(mf)
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		out = append(out, mf)
	}
}

// decodeProto reads a delimited protobuf exposition as a scraper does.
func decodeProto(t *testing.T, body []byte) map[string]*dto.MetricFamily {
	t.Helper()
	dec := expfmt.NewDecoder(bytes.NewReader(body), expfmt.NewFormat(expfmt.TypeProtoDelim))
	out := map[string]*dto.MetricFamily{}
	for {
		mf := &dto.MetricFamily{}
		err := dec.Decode(mf)
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		require.NotContains(t, out, mf.GetName(), "a family twice")
		out[mf.GetName()] = mf
	}
}

// seriesOf is a family's series as sorted "labels value" lines.
func seriesOf(mf *dto.MetricFamily) []string {
	out := make([]string, 0, len(mf.Metric))
	for _, m := range mf.Metric {
		ls := make([]string, 0, len(m.Label))
		for _, l := range m.Label {
			ls = append(ls, l.GetName()+"="+l.GetValue())
		}
		sort.Strings(ls)
		var v float64
		switch {
		case m.Gauge != nil:
			v = m.Gauge.GetValue()
		case m.Counter != nil:
			v = m.Counter.GetValue()
		case m.Untyped != nil:
			v = m.Untyped.GetValue()
		default:
			v = math.NaN()
		}
		out = append(out, strings.Join(ls, ",")+" "+model.SampleValue(v).String())
	}
	sort.Strings(out)
	return out
}
