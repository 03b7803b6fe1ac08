package server

import (
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFieldsHasNoConcurrencyBound: /fields and /fields.csv are built at
// most --api-max-requests at a time, sharing the samples API's slots (each
// holds a parsed exposition and a rendered page); the others get 429 with
// Retry-After at once, counted as busy. Before, 150 pages at once took
// memory from 24 MiB to 1.2 GB and a scrape meanwhile two seconds.
func TestFieldsHasNoConcurrencyBound(t *testing.T) {
	entered, release := make(chan struct{}, 8), make(chan struct{})
	var once sync.Once
	releaseAll := func() { once.Do(func() { close(release) }) }
	t.Cleanup(releaseAll)
	fields := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		entered <- struct{}{}
		<-release
		_, _ = io.WriteString(w, "page")
	})
	hs := &heldSamples{entered: make(chan struct{}, 8), release: make(chan struct{})}
	s, err := New(Options{Engine: &fakeEngine{}, Samples: hs, Fields: fields, MaxRequests: 2, Log: quiet()})
	require.NoError(t, err)
	base := "http://" + serve(t, s)

	var wg sync.WaitGroup
	codes := make(chan int, 2)
	for _, path := range []string{"/fields", "/fields.csv?field=DCGM_FI_DEV_GPU_TEMP"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(base + path)
			if err == nil {
				codes <- resp.StatusCode
				resp.Body.Close()
			}
		}()
	}
	for range 2 {
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatal("the first two requests did not reach the page")
		}
	}
	// A request past the bound would wait for the release without one.
	client := &http.Client{Timeout: 5 * time.Second}
	for _, path := range []string{"/fields", "/fields.csv?field=DCGM_FI_DEV_GPU_TEMP", "/api/v1/samples?field=DCGM_FI_DEV_GPU_TEMP"} {
		resp, err := client.Get(base + path)
		require.NoError(t, err, "%s: refused at once, not held", path)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, path)
		assert.Contains(t, string(body), "--api-max-requests", path)
		assert.NotEmpty(t, resp.Header.Get("Retry-After"), path)
	}
	assert.Equal(t, 3.0, testutil.ToFloat64(s.api.requestsRefused.WithLabelValues("busy")))
	releaseAll()
	wg.Wait()
	close(codes)
	for c := range codes {
		assert.Equal(t, http.StatusOK, c)
	}
	resp, err := http.Get(base + "/fields")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the slots are free again")
}
