package capture

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/sampleapi"
)

// TestChartOfExtremeValuesEnds: values whose span overflows a float (a
// broken or hostile server's ±1.7e308) are refused with an error naming
// the field, where the plot library would search for ticks forever.
func TestChartOfExtremeValuesEnds(t *testing.T) {
	tests := []struct {
		name string
		v    []float64
		err  string
	}{
		{"plus and minus the largest float", []float64{1.7e308, -1.7e308}, "cannot be drawn"},
		{"zero to the largest float", []float64{0, math.MaxFloat64}, "cannot be drawn"},
		{"the largest float alone", []float64{math.MaxFloat64, math.MaxFloat64}, "cannot be drawn"},
		{"ordinary values", []float64{0.5, 0.75}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New()
			require.NoError(t, c.Add(result(t0, gpu(0, "", sampleapi.Series{Field: "DCGM_FI_PROF_SM_ACTIVE",
				T: []int64{t0, t0 + 1e8}, V: sampleapi.Values(tt.v)}))))
			done := make(chan error, 1)
			go func() { done <- WriteChart(io.Discard, c, "svg") }()
			select {
			case err := <-done:
				if tt.err == "" {
					require.NoError(t, err)
					return
				}
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				assert.Contains(t, err.Error(), "DCGM_FI_PROF_SM_ACTIVE")
			case <-time.After(20 * time.Second):
				t.Fatal("drawing the chart did not end")
			}
		})
	}
}

// TestTraceOfNegativeTimestampsIsValidJSON: a sample stamped before 1970
// (a server with a broken clock) still writes a trace that parses, with
// the time it says.
func TestTraceOfNegativeTimestampsIsValidJSON(t *testing.T) {
	for _, ns := range []int64{-1, -999, -1000, -1_500_000, math.MinInt64} {
		t.Run(fmt.Sprint(ns), func(t *testing.T) {
			c := New()
			require.NoError(t, c.Add(result(0, gpu(0, "", sampleapi.Series{Field: "DCGM_FI_PROF_SM_ACTIVE", T: []int64{ns}, V: sampleapi.Values{1}}))))
			var buf bytes.Buffer
			require.NoError(t, WriteTrace(&buf, c, Meta{}))
			var tf traceFile
			require.NoError(t, json.Unmarshal(buf.Bytes(), &tf), buf.String())
			var got []float64
			for _, ev := range tf.TraceEvents {
				if ev.Ph == "C" {
					f, err := ev.TS.Float64()
					require.NoError(t, err, "ts %q", ev.TS)
					got = append(got, f)
				}
			}
			require.Len(t, got, 1)
			assert.InDelta(t, float64(ns)/1000, got[0], math.Abs(float64(ns))*1e-12+1e-3)
		})
	}
}

// TestCaptureRefusesMismatchedSeries: a server whose series have more
// timestamps than values makes capture fail with a decode error, not an
// index out of range.
func TestCaptureRefusesMismatchedSeries(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"now":1,"fields":[{"name":"F"}],"entities":[{"key":"g","kind":"gpu","series":[{"field":"F","t":[1,2,3],"v":[1]}]}]}`))
	}))
	defer srv.Close()
	_, err := Record(context.Background(), &sampleapi.Client{Base: srv.URL}, sampleapi.Query{Fields: []string{"F"}}, 0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "3 timestamps and 1 values")
}
