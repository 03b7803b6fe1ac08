package server

import (
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// blockingEngine holds each rendering until released, so that a test can
// keep a scrape in flight.
type blockingEngine struct {
	fakeEngine
	entered, release chan struct{}
}

func (b *blockingEngine) Snapshot(prev Exposition, proto bool) Exposition {
	b.entered <- struct{}{}
	<-b.release
	return b.fakeEngine.Snapshot(prev, proto)
}

// dcgm-exporter's --max-concurrent-scrapes (pkg/cmd/app.go, newest stored
// copy): "Excess requests receive HTTP 503".
func TestMaxConcurrentScrapesAnswers503PastTheLimit(t *testing.T) {
	eng := &blockingEngine{fakeEngine: fakeEngine{body: "up 1\n", ready: true},
		entered: make(chan struct{}), release: make(chan struct{})}
	s, err := New(Options{Engine: eng, Gatherer: prometheus.NewRegistry(), Log: quiet(), MaxConcurrentScrapes: 1})
	require.NoError(t, err)

	first := make(chan int)
	go func() { first <- get(t, s.mux, http.MethodGet, "/metrics").Code }()
	<-eng.entered // the first scrape holds the only slot

	rec := get(t, s.mux, http.MethodGet, "/metrics")
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Equal(t, "1", rec.Header().Get("Retry-After"))
	assert.Contains(t, rec.Body.String(), "--max-concurrent-scrapes")
	assert.Equal(t, http.StatusOK, get(t, s.mux, http.MethodGet, "/health").Code, "other paths are not limited")

	close(eng.release)
	assert.Equal(t, http.StatusOK, <-first)
	go func() { <-eng.entered }()
	assert.Equal(t, http.StatusOK, get(t, s.mux, http.MethodGet, "/metrics").Code, "the slot is free again")
}

// dcgm-exporter's --health-require-gpus: /health is 503 while no GPU is
// seen, ok otherwise; without the check /health is always ok.
func TestHealthAsksTheCheck(t *testing.T) {
	gpus := 0
	tests := []struct {
		name     string
		health   func() (bool, string)
		gpus     int
		wantCode int
		wantBody string
	}{
		{"no check", nil, 0, http.StatusOK, "ok\n"},
		{"no GPU", func() (bool, string) { return gpus > 0, "no GPU seen" }, 0, http.StatusServiceUnavailable, "no GPU seen\n"},
		{"a GPU", func() (bool, string) { return gpus > 0, "ok" }, 1, http.StatusOK, "ok\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gpus = tt.gpus
			s, err := New(Options{Engine: &fakeEngine{ready: true}, Gatherer: prometheus.NewRegistry(), Log: quiet(), Health: tt.health})
			require.NoError(t, err)
			rec := get(t, s.mux, http.MethodGet, "/health")
			assert.Equal(t, tt.wantCode, rec.Code)
			assert.Equal(t, tt.wantBody, rec.Body.String())
		})
	}
}
