package server

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeFamilies is what the engine would give for the protobuf exposition
// of the fake engine's body: its GPU temperature, and a native histogram.
func fakeFamilies() []*dto.MetricFamily {
	temp, gauge, v := "DCGM_FI_DEV_GPU_TEMP", dto.MetricType_GAUGE, 40.0
	name, help, typ := "DCGM_FI_PROF_SM_ACTIVE_distribution", "h", dto.MetricType_HISTOGRAM
	count, sum, schema, zero, thr := uint64(3), 1.5, int32(3), uint64(1), 1e-3
	off, length := int32(0), uint32(1)
	return []*dto.MetricFamily{{Name: &temp, Help: new("t"), Type: &gauge, Metric: []*dto.Metric{{
		Label: []*dto.LabelPair{{Name: new("gpu"), Value: new("0")}}, Gauge: &dto.Gauge{Value: &v},
	}}}, {Name: &name, Help: &help, Type: &typ, Metric: []*dto.Metric{{
		Label: []*dto.LabelPair{{Name: new("gpu"), Value: new("0")}},
		Histogram: &dto.Histogram{SampleCount: &count, SampleSum: &sum, Schema: &schema, ZeroCount: &zero, ZeroThreshold: &thr,
			PositiveSpan: []*dto.BucketSpan{{Offset: &off, Length: &length}}, PositiveDelta: []int64{2}},
	}}}}
}

// prometheusAccept is what Prometheus sends with native histograms on
// (scrape/scrape.go, scrapeAcceptHeaderWithProtobuf).
const prometheusAccept = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.8," +
	"application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1"

// TestProtobufOnlyWhenNegotiated: a scraper that asks for the delimited
// protobuf exposition gets every family of the text body plus the native
// histograms, gzipped when it asks; every other scraper, and every scraper
// of a server without histograms, gets the text format unchanged.
func TestProtobufOnlyWhenNegotiated(t *testing.T) {
	tests := []struct {
		name       string
		accept     string
		gzip       bool
		histograms bool
		proto      bool
	}{
		{"Prometheus with native histograms", prometheusAccept, false, true, true},
		{"Prometheus with native histograms, gzip", prometheusAccept, true, true, true},
		{"Prometheus without", "text/plain;version=0.0.4;q=1,*/*;q=0.1", true, true, false},
		{"curl", "*/*", false, true, false},
		{"no Accept", "", false, true, false},
		{"histograms off", prometheusAccept, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := &fakeEngine{body: "# HELP DCGM_FI_DEV_GPU_TEMP t\n# TYPE DCGM_FI_DEV_GPU_TEMP gauge\nDCGM_FI_DEV_GPU_TEMP{gpu=\"0\"} 40\n", fams: fakeFamilies}
			reg := prometheus.NewRegistry()
			reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpuscope_test_gauge", Help: "A test gauge."}))
			opts := Options{Engine: eng, Gatherer: reg, Log: quiet(), Protobuf: tt.histograms}
			s, err := New(opts)
			require.NoError(t, err)
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			if tt.accept != "" {
				req.Header.Set("Accept", tt.accept)
			}
			if tt.gzip {
				req.Header.Set("Accept-Encoding", "gzip")
			}
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, req)
			require.Equal(t, http.StatusOK, rec.Code)
			body := rec.Body.Bytes()
			if tt.gzip {
				zr, err := gzip.NewReader(bytes.NewReader(body))
				require.NoError(t, err)
				body, err = io.ReadAll(zr)
				require.NoError(t, err)
			}
			format := expfmt.ResponseFormat(rec.Header())
			if !tt.proto {
				assert.Equal(t, expfmt.TypeTextPlain, format.FormatType())
				assert.Equal(t, eng.body, string(body[:len(eng.body)]), "the text exposition is unchanged")
				return
			}
			require.Equal(t, expfmt.TypeProtoDelim, format.FormatType(), rec.Header().Get("Content-Type"))
			dec := expfmt.NewDecoder(bytes.NewReader(body), format)
			got := map[string]*dto.MetricFamily{}
			for {
				var mf dto.MetricFamily
				if err := dec.Decode(&mf); err == io.EOF {
					break
				} else {
					require.NoError(t, err)
				}
				got[mf.GetName()] = &mf
			}
			require.Len(t, got, 3)
			assert.Equal(t, 40.0, got["DCGM_FI_DEV_GPU_TEMP"].Metric[0].GetGauge().GetValue())
			assert.Contains(t, got, "gpuscope_test_gauge")
			h := got["DCGM_FI_PROF_SM_ACTIVE_distribution"].Metric[0].GetHistogram()
			assert.Equal(t, uint64(3), h.GetSampleCount())
			assert.Equal(t, int32(3), h.GetSchema())
		})
	}
}
