package server

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/sampleapi"
)

// heldSamples answers once release is closed, so that requests can be
// held in flight.
type heldSamples struct {
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	asked   []sampleapi.Query
}

func (h *heldSamples) Samples(q sampleapi.Query) (*sampleapi.Result, error) {
	h.mu.Lock()
	h.asked = append(h.asked, q)
	h.mu.Unlock()
	h.entered <- struct{}{}
	<-h.release
	return &sampleapi.Result{Entities: []sampleapi.Entity{}}, nil
}

func (h *heldSamples) Updated() <-chan struct{} { return make(chan struct{}) }

// TestSamplesAPIConcurrencyBound: past --api-max-requests answers being
// built at once, a request is refused with 429 at once instead of queueing
// another copy of the rings, and counted.
func TestSamplesAPIConcurrencyBound(t *testing.T) {
	hs := &heldSamples{entered: make(chan struct{}, 8), release: make(chan struct{})}
	s, err := New(Options{Engine: &fakeEngine{}, Samples: hs, MaxRequests: 2, Log: quiet()})
	require.NoError(t, err)
	base := "http://" + serve(t, s)
	var wg sync.WaitGroup
	codes := make(chan int, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(base + "/api/v1/samples?field=DCGM_FI_DEV_GPU_TEMP")
			if err == nil {
				codes <- resp.StatusCode
				resp.Body.Close()
			}
		}()
	}
	for range 2 {
		select {
		case <-hs.entered:
		case <-time.After(10 * time.Second):
			t.Fatal("the first two requests did not reach the engine")
		}
	}
	resp, err := http.Get(base + "/api/v1/samples?field=DCGM_FI_DEV_GPU_TEMP")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Contains(t, string(body), "--api-max-requests")
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))
	assert.Equal(t, 1.0, testutil.ToFloat64(s.api.requestsRefused.WithLabelValues("busy")))
	close(hs.release)
	wg.Wait()
	close(codes)
	for c := range codes {
		assert.Equal(t, http.StatusOK, c)
	}
	// The slots are free again.
	resp, err = http.Get(base + "/api/v1/samples?field=DCGM_FI_DEV_GPU_TEMP")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestSamplesAPIByteBound: an answer past --api-max-bytes is refused with
// 413 and a way out, and the engine is told the bound so that it stops
// copying samples past it instead of building the whole answer first.
func TestSamplesAPIByteBound(t *testing.T) {
	rig := newAPIRig(t, 4, Options{MaxResponseBytes: 4096})
	rig.collect(t, 90)
	resp, err := http.Get(rig.base + "/api/v1/samples?field=DCGM_FI_PROF_SM_ACTIVE,DCGM_FI_DEV_POWER_USAGE")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, string(body))
	assert.Contains(t, string(body), "--api-max-bytes")
	assert.Contains(t, string(body), "since=")
	assert.Equal(t, 1.0, testutil.ToFloat64(rig.srv.api.requestsRefused.WithLabelValues("too_large")))

	// A narrower question fits.
	resp, err = http.Get(rig.base + "/api/v1/samples?field=DCGM_FI_PROF_SM_ACTIVE&gpu=0&since=" + sinceNS(rig, 2*time.Second))
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	assert.LessOrEqual(t, len(body), 4096)

	// A stream's first answer is bounded the same way, before it starts.
	resp, err = http.Get(rig.base + "/api/v1/stream?field=DCGM_FI_PROF_SM_ACTIVE,DCGM_FI_DEV_POWER_USAGE&since=1")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
}

func sinceNS(rig *apiRig, ago time.Duration) string {
	return strconv.FormatInt(rig.clk.Now().Add(-ago).UnixNano(), 10)
}

// TestSamplesAPIPassesTheBoundToTheEngine: the sample budget reaches the
// source with the query.
func TestSamplesAPIPassesTheBoundToTheEngine(t *testing.T) {
	hs := &heldSamples{entered: make(chan struct{}, 1), release: make(chan struct{})}
	close(hs.release)
	s, err := New(Options{Engine: &fakeEngine{}, Samples: hs, MaxResponseBytes: 1 << 20, Log: quiet()})
	require.NoError(t, err)
	rec := get(t, s.Handler(), http.MethodGet, "/api/v1/samples?field=DCGM_FI_DEV_GPU_TEMP")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Len(t, hs.asked, 1)
	assert.Positive(t, hs.asked[0].MaxSamples)
	assert.Less(t, hs.asked[0].MaxSamples, 1<<20/8, "a sample takes at least 8 bytes of JSON")
}

// TestStreamHEADHoldsNoSlot: HEAD on /api/v1/stream is refused, so a client
// that sends it and keeps the connection cannot hold a stream slot.
func TestStreamHEADHoldsNoSlot(t *testing.T) {
	rig := newAPIRig(t, 1, Options{MaxStreams: 1})
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for range 3 {
		req, _ := http.NewRequest(http.MethodHead, rig.base+"/api/v1/stream?field=DCGM_FI_PROF_SM_ACTIVE", nil)
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
		assert.Equal(t, "GET", resp.Header.Get("Allow"))
	}
	assert.Zero(t, testutil.ToFloat64(rig.srv.api.streams))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, rig.base+"/api/v1/stream?field=DCGM_FI_PROF_SM_ACTIVE", nil)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the stream slot is free")
}

// TestStreamSendsLabelsOncePerStream: the first event carries every
// entity's labels and the fields' descriptions; the next ones, with the
// labels unchanged, carry only samples, and the client still hands whole
// answers on.
func TestStreamSendsLabelsOncePerStream(t *testing.T) {
	rig := newAPIRig(t, 2, Options{})
	rig.collect(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, rig.base+"/api/v1/stream?field=DCGM_FI_PROF_SM_ACTIVE&since=1", nil)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var events []string
	next := func() string {
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "data: ") {
				return line
			}
		}
		t.Fatalf("the stream ended: %v", sc.Err())
		return ""
	}
	events = append(events, next())
	for range 3 {
		rig.collect(t, 1)
		events = append(events, next())
	}
	assert.Contains(t, events[0], `"labels":{`)
	assert.Contains(t, events[0], `"help":`)
	for i, ev := range events[1:] {
		assert.NotContains(t, ev, `"labels"`, "event %d", i+1)
		assert.NotContains(t, ev, `"fields"`, "event %d", i+1)
		assert.Contains(t, ev, `"t":[`)
	}

	got := make(chan *sampleapi.Result)
	c := &sampleapi.Client{Base: rig.base}
	go func() {
		_ = c.Stream(ctx, sampleapi.Query{Fields: []string{"DCGM_FI_PROF_SM_ACTIVE"}, Since: 1}, func(r *sampleapi.Result) error {
			select {
			case got <- r:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	for i := range 3 {
		var r *sampleapi.Result
		select {
		case r = <-got:
		case <-ctx.Done():
			t.Fatalf("answer %d did not come", i)
		}
		rig.collect(t, 1)
		require.Len(t, r.Entities, 2)
		assert.Equal(t, "node-1", r.Entities[0].Labels["Hostname"], "answer %d", i)
		require.Len(t, r.Fields, 1, "answer %d", i)
	}
}
