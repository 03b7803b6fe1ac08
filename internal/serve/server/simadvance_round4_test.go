package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSimAdvanceRound4CrossSiteGuard (round 4, item 17): a POST a page of
// another site could send (a form, text/plain, no content type) does not
// move the simulated clock; one with the request header or a JSON body
// does, as on the profiling API.
func TestSimAdvanceRound4CrossSiteGuard(t *testing.T) {
	moved := 0
	advance := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { moved++ })
	s, err := New(Options{Engine: &fakeEngine{body: "a 1\n"}, Gatherer: prometheus.NewRegistry(), Log: quiet(), SimClock: advance})
	require.NoError(t, err)
	tests := []struct {
		name, contentType, header string
		want                      int
	}{
		{"form", "application/x-www-form-urlencoded", "", http.StatusForbidden},
		{"multipart", "multipart/form-data; boundary=x", "", http.StatusForbidden},
		{"text/plain", "text/plain", "", http.StatusForbidden},
		{"no content type", "", "", http.StatusForbidden},
		{"the request header", "", "1", http.StatusOK},
		{"JSON", "application/json", "", http.StatusOK},
	}
	for _, tt := range tests {
		before := moved
		req := httptest.NewRequest(http.MethodPost, "/api/v1/sim/advance?by=24h", strings.NewReader("by=24h"))
		if tt.contentType != "" {
			req.Header.Set("Content-Type", tt.contentType)
		}
		if tt.header != "" {
			req.Header.Set(ProfilingRequestHeader, tt.header)
		}
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		assert.Equal(t, tt.want, rec.Code, tt.name)
		assert.Equal(t, tt.want == http.StatusOK, moved > before, "%s moved the clock", tt.name)
	}
}
