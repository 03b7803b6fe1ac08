package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/internal/sampleapi"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

const apiCSV = "DCGM_FI_PROF_SM_ACTIVE, gauge, a, 100ms, max\nDCGM_FI_DEV_POWER_USAGE, gauge, p, 100ms\n"

// apiRig is a real engine driven by hand behind a real server on loopback.
type apiRig struct {
	eng   *engine.Engine
	clk   *sourcetest.Clock
	start time.Time
	srv   *Server
	reg   *prometheus.Registry
	base  string
}

func newAPIRig(t *testing.T, gpus int, opts Options) *apiRig {
	return newAPIRigWindow(t, gpus, 10*time.Second, opts)
}

func newAPIRigWindow(t *testing.T, gpus int, window time.Duration, opts Options) *apiRig {
	t.Helper()
	clk := sourcetest.NewClock(time.Unix(1_700_000_000, 0))
	start := clk.Now()
	src := sourcetest.NewGPUs(gpus, func(e *source.Entity, _ uint16, ts time.Time) (float64, bool) {
		return float64(e.GPU)*1000 + float64(ts.Sub(start)/time.Millisecond), true
	})
	src.Now = clk.Now
	set, err := counters.Parse("api.csv", strings.NewReader(apiCSV))
	require.NoError(t, err)
	eng, err := engine.New(engine.Options{Source: src, Counters: set, DefaultInterval: time.Second, Window: window,
		Hostname: "node-1", Now: clk.Now, Log: quiet()})
	require.NoError(t, err)
	require.NoError(t, eng.Open())
	reg := prometheus.NewRegistry()
	opts.Engine, opts.Samples, opts.Registerer, opts.Gatherer, opts.Log = Snapshots(eng.Snapshot, eng.Ready), eng, reg, reg, quiet()
	s, err := New(opts)
	require.NoError(t, err)
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := smallBufferListener{tl}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("server did not stop")
		}
	})
	return &apiRig{eng: eng, clk: clk, start: start, srv: s, reg: reg, base: "http://" + l.Addr().String()}
}

// smallBufferListener shrinks the server's socket send buffers, so that a
// client that stops reading blocks the server's writes after a few events
// rather than megabytes.
type smallBufferListener struct{ net.Listener }

func (l smallBufferListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

func (r *apiRig) collect(t *testing.T, n int) {
	t.Helper()
	for range n {
		r.clk.Add(100 * time.Millisecond)
		require.NoError(t, r.eng.CollectAll(context.Background()))
	}
}

func TestSamplesAPIAnswersAndRefuses(t *testing.T) {
	rig := newAPIRig(t, 2, Options{})
	rig.collect(t, 3)
	tests := []struct {
		name, query string
		code        int
		contains    string
	}{
		{"samples of one GPU", "field=DCGM_FI_PROF_SM_ACTIVE&gpu=1", 200, `"t":[`},
		{"comma lists", "field=DCGM_FI_PROF_SM_ACTIVE,DCGM_FI_DEV_POWER_USAGE", 200, `"unit":"W"`},
		{"no field", "", 400, "give at least one field"},
		{"unknown field", "field=DCGM_FI_PROF_SM_ACTIV", 400, "did you mean DCGM_FI_PROF_SM_ACTIVE"},
		{"field not in the counters file", "field=DCGM_FI_DEV_GPU_TEMP", 400, "not in the counters file api.csv"},
		{"bad gpu", "field=DCGM_FI_PROF_SM_ACTIVE&gpu=x", 400, `gpu \"x\"`},
		{"negative gpu", "field=DCGM_FI_PROF_SM_ACTIVE&gpu=-1", 400, "want a GPU index"},
		{"bad since", "field=DCGM_FI_PROF_SM_ACTIVE&since=yesterday", 400, "Unix time in nanoseconds"},
		{"too many fields", "field=" + manyFields(17), 400, "17 fields asked, at most 16"},
		{"garbage", "field=%ff%00&gpu=%%", 400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Get(rig.base + "/api/v1/samples?" + tt.query)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			assert.Equal(t, tt.code, resp.StatusCode, string(body))
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			assert.Contains(t, string(body), tt.contains)
			assert.True(t, json.Valid(body), "the body is JSON: %s", body)
		})
	}
	resp, err := http.Post(rig.base+"/api/v1/samples?field=DCGM_FI_PROF_SM_ACTIVE", "text/plain", nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

func TestSamplesAPIReturnsTheRingsThroughTheClient(t *testing.T) {
	rig := newAPIRig(t, 2, Options{})
	rig.collect(t, 4)
	c := &sampleapi.Client{Base: strings.TrimPrefix(rig.base, "http://")}
	res, err := c.Fetch(context.Background(), sampleapi.Query{Fields: []string{"DCGM_FI_PROF_SM_ACTIVE"}, GPUs: []int{1}})
	require.NoError(t, err)
	require.Len(t, res.Entities, 1)
	s := res.Entities[0].Series[0]
	require.Len(t, s.T, 4)
	for i := range s.T {
		assert.Equal(t, rig.start.Add(time.Duration(i+1)*100*time.Millisecond).UnixNano(), s.T[i])
		assert.Equal(t, 1000+float64(i+1)*100, s.V[i])
	}
	assert.Equal(t, "node-1", res.Entities[0].Labels["Hostname"])
	_, err = c.Fetch(context.Background(), sampleapi.Query{Fields: []string{"NOPE"}})
	var se *sampleapi.StatusError
	require.True(t, errors.As(err, &se), "%v", err)
	assert.Equal(t, 400, se.Code)
	assert.Contains(t, se.Msg, "field NOPE: unknown field name")
}

// The stream sends every sample once and in order, as collections happen.
func TestStreamSendsEachNewSampleOnce(t *testing.T) {
	rig := newAPIRig(t, 2, Options{})
	rig.collect(t, 2) // before the stream: not sent without since
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := &sampleapi.Client{Base: rig.base}
	got := map[string][]int64{}
	const rounds = 5
	errc := make(chan error, 1)
	go func() {
		errc <- c.Stream(ctx, sampleapi.Query{Fields: []string{"DCGM_FI_PROF_SM_ACTIVE"}}, func(r *sampleapi.Result) error {
			for _, e := range r.Entities {
				for _, s := range e.Series {
					got[e.Key] = append(got[e.Key], s.T...)
				}
			}
			n := 0
			for _, ts := range got {
				n += len(ts)
			}
			if n >= 2*rounds {
				return errStop
			}
			return nil
		})
	}()
	// The stream is open once the server counts it.
	require.Eventually(t, func() bool { return testutil.ToFloat64(rig.srv.api.streams) == 1 }, 10*time.Second, 5*time.Millisecond)
	for i := 0; i < rounds; i++ {
		rig.collect(t, 1)
	}
	select {
	case err := <-errc:
		require.ErrorIs(t, err, errStop)
	case <-ctx.Done():
		t.Fatal("the stream did not deliver the samples")
	}
	require.Len(t, got, 2)
	for key, ts := range got {
		require.Len(t, ts, rounds, key)
		for i := range ts {
			assert.Equal(t, rig.start.Add(time.Duration(i+3)*100*time.Millisecond).UnixNano(), ts[i], "%s sample %d", key, i)
		}
	}
}

var errStop = errors.New("stop")

func manyFields(n int) string {
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("F%d", i))
	}
	return strings.Join(names, ",")
}

func TestStreamWithSinceStartsInThePast(t *testing.T) {
	rig := newAPIRig(t, 1, Options{})
	rig.collect(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := &sampleapi.Client{Base: rig.base}
	var first *sampleapi.Result
	err := c.Stream(ctx, sampleapi.Query{Fields: []string{"DCGM_FI_PROF_SM_ACTIVE"}, Since: rig.start.Add(100 * time.Millisecond).UnixNano()},
		func(r *sampleapi.Result) error { first = r; return errStop })
	require.ErrorIs(t, err, errStop)
	assert.Len(t, first.Entities[0].Series[0].T, 2, "the samples after since")
}

func TestStreamLimitAndBadQuery(t *testing.T) {
	rig := newAPIRig(t, 1, Options{MaxStreams: 1})
	resp, err := http.Get(rig.base + "/api/v1/stream?field=NOPE")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "a bad field is refused before the stream starts")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, rig.base+"/api/v1/stream?field=DCGM_FI_PROF_SM_ACTIVE", nil)
	first, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer first.Body.Close()
	assert.Equal(t, http.StatusOK, first.StatusCode)
	assert.Equal(t, "text/event-stream", first.Header.Get("Content-Type"))
	second, err := http.Get(rig.base + "/api/v1/stream?field=DCGM_FI_PROF_SM_ACTIVE")
	require.NoError(t, err)
	body, _ := io.ReadAll(second.Body)
	second.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, second.StatusCode)
	assert.Contains(t, string(body), "at most 1 streams at once (--api-max-streams)")
	assert.Equal(t, 1.0, testutil.ToFloat64(rig.srv.api.streamsRefused))

	// The slot is free again once the first client leaves.
	cancel()
	require.Eventually(t, func() bool { return testutil.ToFloat64(rig.srv.api.streams) == 0 }, 10*time.Second, 5*time.Millisecond)
	third, err := http.Get(rig.base + "/api/v1/stream?field=DCGM_FI_PROF_SM_ACTIVE")
	require.NoError(t, err)
	third.Body.Close()
	assert.Equal(t, http.StatusOK, third.StatusCode)
}

// A client that stops reading is dropped once an event cannot reach it in
// time, and counted; the engine keeps collecting meanwhile.
func TestStreamDropsAClientThatStopsReading(t *testing.T) {
	// A long window, so the rings hold far more than the socket buffers
	// and the client is dropped for its writes, not for lagging.
	rig := newAPIRigWindow(t, 64, 400*time.Second, Options{StreamWriteTimeout: 200 * time.Millisecond})
	conn, err := net.Dial("tcp", strings.TrimPrefix(rig.base, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.(*net.TCPConn).SetReadBuffer(4096))
	q := url.Values{"field": {"DCGM_FI_PROF_SM_ACTIVE,DCGM_FI_DEV_POWER_USAGE"}}
	_, err = fmt.Fprintf(conn, "GET /api/v1/stream?%s HTTP/1.1\r\nHost: x\r\n\r\n", q.Encode())
	require.NoError(t, err)
	br := bufio.NewReader(conn)
	status, err := br.ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, status, "200")
	// The client reads nothing more; collections pile events into the
	// socket until a write cannot finish in time.
	drops := rig.srv.api.streamDrops.WithLabelValues("slow")
	deadline := time.Now().Add(30 * time.Second)
	for testutil.ToFloat64(drops) == 0 {
		require.True(t, time.Now().Before(deadline), "the slow client was never dropped; lagged %v streams %v", testutil.ToFloat64(rig.srv.api.streamDrops.WithLabelValues("lagged")), testutil.ToFloat64(rig.srv.api.streams))
		rig.collect(t, 1)
	}
	require.Eventually(t, func() bool { return testutil.ToFloat64(rig.srv.api.streams) == 0 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, 0.0, testutil.ToFloat64(rig.srv.api.streamDrops.WithLabelValues("lagged")))
}

// The API sits behind the web config's basic auth like /metrics.
func TestSamplesAPINeedsTheWebConfigPassword(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "web.yml")
	// bcrypt of "s3cret" at cost 4.
	require.NoError(t, os.WriteFile(cfg, []byte("basic_auth_users:\n  prom: $2a$04$jcD672bfJ/EIqmVDvRIBvu8auDJS4b2fjhsI1lo83EczAtbvJJ7HO\n"), 0o600))
	rig := newAPIRig(t, 1, Options{WebConfigFile: cfg})
	rig.collect(t, 1)
	for _, path := range []string{"/api/v1/samples", "/api/v1/stream"} {
		c := &sampleapi.Client{Base: rig.base}
		var se *sampleapi.StatusError
		var err error
		require.Eventually(t, func() bool {
			_, err = c.Fetch(context.Background(), sampleapi.Query{Fields: []string{"DCGM_FI_PROF_SM_ACTIVE"}})
			return err != nil && errors.As(err, &se)
		}, 5*time.Second, 20*time.Millisecond)
		if path == "/api/v1/stream" {
			err = c.Stream(context.Background(), sampleapi.Query{Fields: []string{"DCGM_FI_PROF_SM_ACTIVE"}}, func(*sampleapi.Result) error { return nil })
			require.True(t, errors.As(err, &se), "%v", err)
		}
		assert.Equal(t, http.StatusUnauthorized, se.Code, path)
	}
	c := &sampleapi.Client{Base: rig.base, Username: "prom", Password: "s3cret"}
	res, err := c.Fetch(context.Background(), sampleapi.Query{Fields: []string{"DCGM_FI_PROF_SM_ACTIVE"}})
	require.NoError(t, err)
	assert.Equal(t, 1, res.Len())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = c.Stream(ctx, sampleapi.Query{Fields: []string{"DCGM_FI_PROF_SM_ACTIVE"}, Since: 1}, func(r *sampleapi.Result) error { return errStop })
	assert.ErrorIs(t, err, errStop)
}

// A stream lives past the server's WriteTimeout: each event sets its own
// write deadline.
func TestStreamOutlivesTheServerWriteTimeout(t *testing.T) {
	rig := newAPIRig(t, 1, Options{WriteTimeout: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := &sampleapi.Client{Base: rig.base}
	start := time.Now()
	got := make(chan int64, 1024)
	errc := make(chan error, 1)
	go func() {
		errc <- c.Stream(ctx, sampleapi.Query{Fields: []string{"DCGM_FI_PROF_SM_ACTIVE"}}, func(r *sampleapi.Result) error {
			for _, e := range r.Entities {
				for _, ts := range e.Series[0].T {
					got <- ts
				}
			}
			return nil
		})
	}()
	require.Eventually(t, func() bool { return testutil.ToFloat64(rig.srv.api.streams) == 1 }, 10*time.Second, 5*time.Millisecond)
	n := 0
	for time.Since(start) < 4*300*time.Millisecond {
		rig.collect(t, 1)
		select {
		case <-got:
			n++
		case err := <-errc:
			t.Fatalf("the stream ended after %s and %d samples: %v", time.Since(start), n, err)
		case <-ctx.Done():
			t.Fatal("no sample arrived")
		}
	}
	assert.Equal(t, 1.0, testutil.ToFloat64(rig.srv.api.streams), "still connected")
}
