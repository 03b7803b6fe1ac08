package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuscope/gpuscope/internal/sampleapi"
)

// fuzzSamples knows one field; anything else is the user's mistake.
type fuzzSamples struct{}

func (fuzzSamples) Samples(q sampleapi.Query) (*sampleapi.Result, error) {
	for _, f := range q.Fields {
		if f != "DCGM_FI_PROF_SM_ACTIVE" {
			return nil, &sampleapi.FieldError{Field: f, Reason: "not in the counters file"}
		}
	}
	return &sampleapi.Result{}, nil
}

func (fuzzSamples) Updated() <-chan struct{} { return make(chan struct{}) }

// FuzzEndpointQueries sends arbitrary query strings and Accept-Encoding
// headers to every endpoint. None panics or answers 500; /metrics,
// /health and /ready ignore parameters; the sample API answers a bad query
// with 400 and a JSON error, never a partial answer.
func FuzzEndpointQueries(f *testing.F) {
	paths := []string{"/metrics", "/health", "/ready", "/api/v1/samples", "/api/v1/stream", "/"}
	for i, s := range []string{
		"", "field=DCGM_FI_PROF_SM_ACTIVE", "field=DCGM_FI_PROF_SM_ACTIVE&gpu=0,1&since=1700000000000000000",
		"field=", "field=a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q", "field=DCGM_FI_PROF_SM_ACTIVE&gpu=-1",
		"field=DCGM_FI_PROF_SM_ACTIVE&since=9223372036854775808", "gpu=%zz", "field=%ff%fe", "a=1;b=2",
		"field=DCGM_FI_PROF_SM_ACTIVE&gpu=" + strings.Repeat("1,", 2000),
	} {
		f.Add(uint8(i), s, "gzip")
		f.Add(uint8(i+3), s, "gzip;q=0, *")
	}
	s, err := New(Options{Engine: &fakeEngine{body: "x 1\n", ready: true}, Gatherer: prometheus.NewRegistry(),
		Samples: fuzzSamples{}, Log: quiet()})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, which uint8, query, acceptEncoding string) {
		path := paths[int(which)%len(paths)]
		u := &url.URL{Path: path, RawQuery: query}
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.URL, req.RequestURI = u, u.RequestURI()
		req.Header.Set("Accept-Encoding", acceptEncoding)
		// A stream that starts ends at once: only its first answer counts.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		req = req.WithContext(ctx)
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		switch {
		case rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable && rec.Code != http.StatusNotImplemented:
			t.Fatalf("%s?%s: %d %s", path, query, rec.Code, rec.Body.String())
		case (path == "/metrics" || path == "/health" || path == "/ready") && rec.Code != http.StatusOK:
			t.Fatalf("%s?%s: %d; parameters are ignored there", path, query, rec.Code)
		case rec.Code == http.StatusBadRequest:
			var body struct{ Error string }
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error == "" {
				t.Fatalf("%s?%s: 400 without a JSON error: %q", path, query, rec.Body.String())
			}
		}
	})
}
