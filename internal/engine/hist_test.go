package engine

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

// histFamilies are the native histogram families of the engine's
// protobuf exposition, decoded as a scraper decodes them.
func histFamilies(t *testing.T, e *Engine) map[string]*dto.MetricFamily {
	t.Helper()
	body, err := e.AppendProto(nil)
	require.NoError(t, err)
	out := map[string]*dto.MetricFamily{}
	for name, mf := range decodeProto(t, body) {
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			out[name] = mf
		}
	}
	return out
}

func labelMap(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.Label {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// TestNativeHistogramsCountEverySample: a field with window statistics gets
// a native histogram of every sample since start, labelled as its series,
// in its unit's layout; a line with nohist, one without statistics and an
// engine with histograms off get none.
func TestNativeHistogramsCountEverySample(t *testing.T) {
	const csv = "DCGM_FI_PROF_SM_ACTIVE, gauge, Ratio of cycles (ratio 0..1)., 100ms, max p99\n" +
		"DCGM_FI_DEV_POWER_USAGE, gauge, Power draw (in W)., 100ms, avg\n" +
		"DCGM_FI_PROF_DRAM_ACTIVE, gauge, dram (ratio), 100ms, max nohist\n" +
		"DCGM_FI_DEV_GPU_TEMP, gauge, t, 100ms\n"
	tests := []struct {
		name  string
		off   bool
		names []string
	}{
		{"on", false, []string{"DCGM_FI_PROF_SM_ACTIVE_distribution", "DCGM_FI_DEV_POWER_USAGE_distribution"}},
		{"off", true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			step := 0
			src := sourcetest.NewGPUs(2, func(e *source.Entity, f uint16, _ time.Time) (float64, bool) {
				switch f {
				case fieldid.ProfSMActive:
					return []float64{0, 0.5, 1}[step%3], true
				case fieldid.PowerUsage:
					return 300, true
				}
				return 0.25, true
			})
			src.Now = clk.Now
			e, err := New(Options{
				Source: src, Counters: parseSet(t, csv), DefaultInterval: time.Second, Window: 10 * time.Second,
				Hostname: "node-1", Now: clk.Now, Log: quietLog(), NoNativeHistograms: tt.off,
			})
			require.NoError(t, err)
			require.NoError(t, src.Watch(e.plan.groups))
			e.refreshEntities()
			e.pollStatus()
			// 300 samples: 30 s, three times the window: the histogram
			// counts them all. A repeated read of the same sample counts once.
			for step = 0; step < 300; step++ {
				clk.Add(100 * time.Millisecond)
				collectAll(t, e)
			}
			collectAll(t, e)
			got := histFamilies(t, e)
			require.Len(t, got, len(tt.names))
			text := scrape(t, e)
			for _, name := range tt.names {
				mf := got[name]
				require.NotNil(t, mf, name)
				assert.Equal(t, dto.MetricType_HISTOGRAM, mf.GetType())
				require.Len(t, mf.Metric, 2, "one per GPU")
				field := name[:len(name)-len(HistogramSuffix)]
				for _, m := range mf.Metric {
					h := m.GetHistogram()
					assert.Equal(t, uint64(300), h.GetSampleCount(), name)
					want := series(text, field, map[string]string{"gpu": labelMap(m)["gpu"]})
					require.Len(t, want, 1)
					assert.Equal(t, labelMap(want[0]), labelMap(m), "the labels of the field's series")
				}
			}
			if !tt.off {
				h := got["DCGM_FI_PROF_SM_ACTIVE_distribution"].Metric[0].GetHistogram()
				assert.Equal(t, int32(3), h.GetSchema(), "a ratio's layout")
				assert.Equal(t, uint64(100), h.GetZeroCount(), "every third sample is 0")
				assert.InDelta(t, 150, h.GetSampleSum(), 1e-9)
				p := got["DCGM_FI_DEV_POWER_USAGE_distribution"].Metric[0].GetHistogram()
				assert.Equal(t, int32(4), p.GetSchema(), "watts get the finer layout")
			}
		})
	}
}

func TestLayoutForUnits(t *testing.T) {
	tests := []struct {
		field counters.Field
		want  int32
	}{
		{counters.Field{ID: fieldid.ProfSMActive, Help: "The ratio of cycles (ratio 0..1)."}, layoutRatio.Schema},
		{counters.Field{ID: fieldid.GPUUtil, Help: "GPU utilization (in %)."}, layoutPercent.Schema},
		{counters.Field{ID: fieldid.PowerUsage, Help: "Power draw (in W)."}, layoutFine.Schema},
		{counters.Field{ID: fieldid.GPUTemp, Help: "t"}, layoutFine.Schema},
		{counters.Field{ID: fieldid.SMClock, Help: "SM clock frequency (in MHz)."}, layoutFine.Schema},
		{counters.Field{ID: fieldid.ProfPCIeTXBytes, Help: "The rate of data transmitted over the PCIe bus, in bytes per second."}, layoutRate.Schema},
		{counters.Field{ID: fieldid.NVLinkBandwidthL0, Help: "x"}, layoutRate.Schema},
		{counters.Field{ID: fieldid.FBUsed, Help: "Framebuffer memory used (in MiB)."}, layoutOther.Schema},
	}
	for _, tt := range tests {
		t.Run(tt.field.Help, func(t *testing.T) {
			assert.Equal(t, tt.want, layoutFor(tt.field).Schema)
		})
	}
	assert.Equal(t, 1e-3, layoutFor(tests[0].field).ZeroThreshold)
}

// TestLabelPairsReadEscapes: label strings as the render writes them (an
// entity's set, a sample's tail) are read back into their pairs, escapes
// undone, for the protobuf exposition.
func TestLabelPairsReadEscapes(t *testing.T) {
	tests := []struct {
		in   string
		want []labelPair
	}{
		{`{gpu="0",UUID="GPU-1",pod="a\"b\\c\nd",empty=""`,
			[]labelPair{{"gpu", "0"}, {"UUID", "GPU-1"}, {"pod", "a\"b\\c\nd"}, {"empty", ""}}},
		{`,stat="p99"} `, []labelPair{{"stat", "p99"}}},
		{`,err_code="79",err_msg="a} b"} `, []labelPair{{"err_code", "79"}, {"err_msg", "a} b"}}},
		{"} ", nil},
		{"{", nil},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got := decodeLabelEncoding(t, encodeLabels(tt.in))
			assert.Equal(t, tt.want, got)
		})
	}
}

// decodeLabelEncoding reads Metric.label fields back with client_model.
func decodeLabelEncoding(t *testing.T, enc []byte) []labelPair {
	t.Helper()
	var m dto.Metric
	require.NoError(t, proto.Unmarshal(enc, &m))
	var out []labelPair
	for _, l := range m.Label {
		out = append(out, labelPair{l.GetName(), l.GetValue()})
	}
	return out
}
