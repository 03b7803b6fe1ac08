package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeEngine serves body as its text exposition, and the families fams
// gives as its protobuf one.
type fakeEngine struct {
	body  string
	ready bool
	fams  func() []*dto.MetricFamily
}

func (f *fakeEngine) Snapshot(_ Exposition, proto bool) Exposition {
	s := &fakeSnapshot{text: f.body}
	if proto && f.fams != nil {
		w := appendWriter{}
		enc := expfmt.NewEncoder(&w, protoFormat)
		for _, mf := range f.fams() {
			if err := enc.Encode(mf); err != nil {
				panic(err)
			}
		}
		s.proto = w.buf
	}
	return s
}

type fakeSnapshot struct {
	text  string
	proto []byte
}

func (s *fakeSnapshot) WriteText(w io.Writer) error {
	_, err := io.WriteString(w, s.text)
	return err
}

func (s *fakeSnapshot) WriteProto(w io.Writer) error {
	_, err := w.Write(s.proto)
	return err
}

func (f *fakeEngine) Ready() (bool, string) {
	if f.ready {
		return true, "source sim is up"
	}
	return false, "waiting for the first sample"
}

type fakeProfiling struct {
	paused bool
	err    error
}

func (f *fakeProfiling) PauseProfiling() error {
	if f.err != nil {
		return f.err
	}
	f.paused = true
	return nil
}

func (f *fakeProfiling) ResumeProfiling() error {
	if f.err != nil {
		return f.err
	}
	f.paused = false
	return nil
}

func quiet() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return logrus.NewEntry(l)
}

func newTestServer(t *testing.T, eng *fakeEngine, prof *fakeProfiling) *Server {
	t.Helper()
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpuscope_test_gauge", Help: "A test gauge."})
	g.Set(3)
	reg.MustRegister(g)
	opts := Options{Engine: eng, Gatherer: reg, Version: "test", Log: quiet(), EnableProfilingAPI: true}
	if prof != nil {
		opts.Profiling = prof
	}
	s, err := New(opts)
	require.NoError(t, err)
	return s
}

func get(t *testing.T, h http.Handler, method, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

func TestMetricsJoinsGPUSeriesAndOwnMetrics(t *testing.T) {
	eng := &fakeEngine{body: "# HELP DCGM_FI_DEV_GPU_TEMP t\n# TYPE DCGM_FI_DEV_GPU_TEMP gauge\nDCGM_FI_DEV_GPU_TEMP{gpu=\"0\"} 40\n"}
	s := newTestServer(t, eng, nil)
	rec := get(t, s.Handler(), http.MethodGet, "/metrics")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, rec.Header().Get("Content-Type"), "text/plain; version=0.0.4")
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(rec.Body.Bytes()))
	require.NoError(t, err)
	assert.Equal(t, 40.0, mfs["DCGM_FI_DEV_GPU_TEMP"].Metric[0].GetGauge().GetValue())
	assert.Equal(t, 3.0, mfs["gpuscope_test_gauge"].Metric[0].GetGauge().GetValue())
	// A second scrape reuses the pooled buffer and gives the same answer.
	rec2 := get(t, s.Handler(), http.MethodGet, "/metrics")
	assert.Equal(t, rec.Body.String(), rec2.Body.String())
}

func TestHealthAndReady(t *testing.T) {
	eng := &fakeEngine{}
	s := newTestServer(t, eng, nil)
	assert.Equal(t, http.StatusOK, get(t, s.Handler(), http.MethodGet, "/health").Code)
	rec := get(t, s.Handler(), http.MethodGet, "/ready")
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Contains(t, rec.Body.String(), "first sample")
	eng.ready = true
	rec = get(t, s.Handler(), http.MethodGet, "/ready")
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, get(t, s.Handler(), http.MethodGet, "/").Body.String(), "gpuscope")
}

func TestProfilingEndpoints(t *testing.T) {
	tests := []struct {
		name   string
		prof   *fakeProfiling
		method string
		path   string
		code   int
		paused bool
	}{
		{"pause", &fakeProfiling{}, http.MethodPost, "/api/v1/profiling/pause", http.StatusOK, true},
		{"resume", &fakeProfiling{paused: true}, http.MethodPost, "/api/v1/profiling/resume", http.StatusOK, false},
		{"GET is refused", &fakeProfiling{}, http.MethodGet, "/api/v1/profiling/pause", http.StatusMethodNotAllowed, false},
		{"source without a lock", nil, http.MethodPost, "/api/v1/profiling/pause", http.StatusNotImplemented, false},
		{"DCGM refuses", &fakeProfiling{err: errors.New("profiling module not loaded")}, http.MethodPost, "/api/v1/profiling/pause", http.StatusInternalServerError, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestServer(t, &fakeEngine{}, tt.prof)
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(tt.method, tt.path, nil)
			req.Header.Set(ProfilingRequestHeader, "1")
			s.Handler().ServeHTTP(rec, req)
			assert.Equal(t, tt.code, rec.Code, rec.Body.String())
			if tt.prof != nil {
				assert.Equal(t, tt.paused, tt.prof.paused)
			}
		})
	}
}

// TestBasicAuthFromWebConfig runs the real exporter-toolkit listener with a
// web config that asks for basic auth: every endpoint, the profiling API
// included, needs the password.
func TestBasicAuthFromWebConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "web.yml")
	// bcrypt of "s3cret" at cost 4.
	require.NoError(t, os.WriteFile(cfg, []byte("basic_auth_users:\n  prom: $2a$04$jcD672bfJ/EIqmVDvRIBvu8auDJS4b2fjhsI1lo83EczAtbvJJ7HO\n"), 0o600))
	prof := &fakeProfiling{}
	reg := prometheus.NewRegistry()
	s, err := New(Options{Engine: &fakeEngine{ready: true}, Gatherer: reg, Profiling: prof, WebConfigFile: cfg, Log: quiet(), EnableProfilingAPI: true})
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("server did not stop")
		}
	}()
	base := "http://" + l.Addr().String()
	do := func(method, path, user, pass string) int {
		req, err := http.NewRequest(method, base+path, nil)
		require.NoError(t, err)
		req.Header.Set(ProfilingRequestHeader, "1")
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		var resp *http.Response
		require.Eventually(t, func() bool { resp, err = http.DefaultClient.Do(req); return err == nil }, 5*time.Second, 20*time.Millisecond)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusUnauthorized, do(http.MethodGet, "/metrics", "", ""))
	assert.Equal(t, http.StatusUnauthorized, do(http.MethodGet, "/metrics", "prom", "wrong"))
	assert.Equal(t, http.StatusOK, do(http.MethodGet, "/metrics", "prom", "s3cret"))
	assert.Equal(t, http.StatusUnauthorized, do(http.MethodPost, "/api/v1/profiling/pause", "", ""))
	assert.False(t, prof.paused)
	assert.Equal(t, http.StatusOK, do(http.MethodPost, "/api/v1/profiling/pause", "prom", "s3cret"))
	assert.True(t, prof.paused)
}

func TestMetricsGzipWhenAsked(t *testing.T) {
	eng := &fakeEngine{body: strings.Repeat("DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"} 40\n", 100)}
	s := newTestServer(t, eng, nil)
	tests := []struct {
		accept string
		gzip   bool
	}{
		{"gzip", true},
		{"deflate, gzip;q=1.0, *;q=0.5", true},
		{"gzip;q=0", false},
		{"identity", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.accept, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			if tt.accept != "" {
				req.Header.Set("Accept-Encoding", tt.accept)
			}
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, req)
			require.Equal(t, http.StatusOK, rec.Code)
			body := rec.Body.Bytes()
			if tt.gzip {
				assert.Equal(t, "gzip", rec.Header().Get("Content-Encoding"))
				zr, err := gzip.NewReader(bytes.NewReader(body))
				require.NoError(t, err)
				body, err = io.ReadAll(zr)
				require.NoError(t, err)
				assert.Less(t, rec.Body.Len(), len(body)/5, "the body compresses")
			} else {
				assert.Empty(t, rec.Header().Get("Content-Encoding"))
			}
			assert.True(t, strings.HasPrefix(string(body), eng.body), "the exposition is intact")
		})
	}
}

// pprof is served, and linked from the landing page, only when asked for
// (dcgm-exporter's --enable-pprof, pkg/cmd/app.go).
func TestPprofOnlyWhenAsked(t *testing.T) {
	for _, on := range []bool{false, true} {
		s, err := New(Options{Engine: &fakeEngine{}, Gatherer: prometheus.NewRegistry(), Version: "test", Log: quiet(), Pprof: on})
		require.NoError(t, err)
		rec := get(t, s.Handler(), http.MethodGet, "/debug/pprof/")
		landing := get(t, s.Handler(), http.MethodGet, "/")
		if on {
			assert.Equal(t, http.StatusOK, rec.Code)
			assert.Contains(t, rec.Body.String(), "goroutine")
			assert.Contains(t, landing.Body.String(), "debug/pprof/")
		} else {
			assert.NotEqual(t, http.StatusOK, rec.Code)
			assert.NotContains(t, landing.Body.String(), `href="/debug/pprof`)
		}
	}
}

// TestSimClockRouteAndClock: the manual clock of a simulated node is served
// only when given, and the age of a rendered body is measured on the clock
// given, so that a scrape after the clock moved renders anew at once.
func TestSimClockRouteAndClock(t *testing.T) {
	s := newTestServer(t, &fakeEngine{body: "a 1\n"}, nil)
	assert.Equal(t, http.StatusNotFound, get(t, s.Handler(), http.MethodPost, "/api/v1/sim/advance?by=1s").Code,
		"no manual clock, no route")

	eng := &fakeEngine{body: "a 1\n"}
	now := time.Unix(0, 0)
	moved := 0
	advance := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { moved++; now = now.Add(time.Second) })
	s, err := New(Options{Engine: eng, Gatherer: prometheus.NewRegistry(), Log: quiet(), Now: func() time.Time { return now }, SimClock: advance})
	require.NoError(t, err)
	assert.Contains(t, get(t, s.Handler(), http.MethodGet, "/metrics").Body.String(), "a 1")
	eng.body = "a 2\n"
	assert.Contains(t, get(t, s.Handler(), http.MethodGet, "/metrics").Body.String(), "a 1", "the clock stood still: the body is served again")
	req := httptest.NewRequest(http.MethodPost, "/api/v1/sim/advance?by=1s", nil)
	req.Header.Set(ProfilingRequestHeader, "1")
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, 1, moved)
	assert.Contains(t, get(t, s.Handler(), http.MethodGet, "/metrics").Body.String(), "a 2", "the clock moved: rendered anew")
}
