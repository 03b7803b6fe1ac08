package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
)

// slowAuth stands for exporter-toolkit's basic auth: a password is right
// or wrong, and checking one the caller holds blocks until released.
type slowAuth struct {
	checking chan string
	release  chan struct{}
}

func (s *slowAuth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, pass, _ := r.BasicAuth()
	if s.checking != nil {
		s.checking <- pass
		<-s.release
	}
	if pass != "right" {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func authReq(pass string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	r.SetBasicAuth("prom", pass)
	return r
}

// TestFailedAuthCostIsBounded: credentials not seen to succeed are checked
// at most maxAuthChecks at a time; past that they are refused at once with
// 429 (no bcrypt), and credentials that succeeded before pass ahead of the
// storm, so a correct scrape never waits behind it.
func TestFailedAuthCostIsBounded(t *testing.T) {
	inner := &slowAuth{}
	g := newAuthGate(inner)
	// A right password, once seen to succeed, is known.
	rec := httptest.NewRecorder()
	g.ServeHTTP(rec, authReq("right"))
	require.Equal(t, http.StatusOK, rec.Code)

	// A storm: every check slot held by a wrong password being checked.
	inner.checking, inner.release = make(chan string, maxAuthChecks), make(chan struct{})
	var wg sync.WaitGroup
	codes := make([]int, maxAuthChecks)
	for i := range maxAuthChecks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := httptest.NewRecorder()
			g.ServeHTTP(rec, authReq("wrong-"+string(rune('a'+i))))
			codes[i] = rec.Code
		}()
	}
	for range maxAuthChecks {
		<-inner.checking
	}
	// More wrong passwords are refused without a check.
	for range 50 {
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, authReq("another-wrong"))
		assert.Equal(t, http.StatusTooManyRequests, rec.Code)
		assert.NotEmpty(t, rec.Header().Get("Retry-After"))
	}
	assert.Equal(t, 50.0, testutil.ToFloat64(g.throttled))
	// The known password goes straight to its check.
	done := make(chan int, 1)
	go func() {
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, authReq("right"))
		done <- rec.Code
	}()
	assert.Equal(t, "right", <-inner.checking, "the known password is checked while the slots are full")
	close(inner.release)
	assert.Equal(t, http.StatusOK, <-done)
	wg.Wait()
	for _, c := range codes {
		assert.Equal(t, http.StatusUnauthorized, c)
	}
	// A request without credentials is the inner handler's to answer.
	rec = httptest.NewRecorder()
	g.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	assert.Equal(t, http.StatusUnauthorized, rec.Code)
}

// TestFailedAuthCostKnownSetIsBounded: the remembered credentials are a
// bounded set, however many distinct right ones come.
func TestFailedAuthCostKnownSetIsBounded(t *testing.T) {
	g := newAuthGate(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	for i := range 10 * maxKnownAuth {
		g.ServeHTTP(httptest.NewRecorder(), authReq("p"+string(rune(i))))
	}
	assert.LessOrEqual(t, g.knownLen(), maxKnownAuth)
}

// TestFailedAuthCostGateSitsBeforeTheToolkit: with a web config, requests
// reach the gate before exporter-toolkit's basic auth: a right password is
// remembered, a wrong one is not, and both are still decided by the
// toolkit.
func TestFailedAuthCostGateSitsBeforeTheToolkit(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "web.yml")
	// bcrypt of "s3cret" at cost 4.
	require.NoError(t, os.WriteFile(cfg, []byte("basic_auth_users:\n  prom: $2a$04$jcD672bfJ/EIqmVDvRIBvu8auDJS4b2fjhsI1lo83EczAtbvJJ7HO\n"), 0o600))
	reg := prometheus.NewRegistry()
	s, err := New(Options{Engine: &fakeEngine{ready: true}, Gatherer: reg, Registerer: reg, WebConfigFile: cfg, Log: quiet()})
	require.NoError(t, err)
	base := "http://" + serve(t, s)
	get := func(pass string) int {
		req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
		req.SetBasicAuth("prom", pass)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusUnauthorized, get("wrong"))
	assert.Zero(t, s.auth.knownLen())
	assert.Equal(t, http.StatusOK, get("s3cret"))
	assert.Equal(t, 1, s.auth.knownLen())
	assert.Equal(t, http.StatusOK, get("s3cret"))
	assert.Equal(t, http.StatusUnauthorized, get("wrong"), "the toolkit still decides")
}

// BenchmarkCorrectScrapeDuringWrongPasswordStorm serves /metrics behind a
// web config of 20 users with a bcrypt (cost 10) password, scrapes each
// once, then lets 40 clients send distinct wrong passwords without pause.
// Once 150 wrong passwords have been checked (enough for the storm to
// evict about half of the 20 from the toolkit's 100-entry cache), each
// iteration scrapes as one of the 20 users, every 100 ms, as Prometheus servers
// would. The median and slowest correct scrape are reported as p50_ms and
// max_ms; run it with -benchtime=40x. Without the gate a correct scrape
// whose entry was evicted waited behind every queued bcrypt.
func BenchmarkCorrectScrapeDuringWrongPasswordStorm(b *testing.B) {
	// bcrypt of "right" at cost 10, the cost htpasswd and the toolkit's
	// documentation use.
	const hash = "$2a$10$g6COsMLBY3PQPMlzQW7Pt.z9fvWK8cR/8tBez.gsjYPtFo.aQR0vq"
	const users = 20
	var cfgText strings.Builder
	cfgText.WriteString("basic_auth_users:\n")
	for u := range users {
		fmt.Fprintf(&cfgText, "  prom%d: %s\n", u, hash)
	}
	cfg := filepath.Join(b.TempDir(), "web.yml")
	require.NoError(b, os.WriteFile(cfg, []byte(cfgText.String()), 0o600))
	s, err := New(Options{Engine: &fakeEngine{ready: true, body: "x 1\n"}, Gatherer: prometheus.NewRegistry(), WebConfigFile: cfg, Log: quiet()})
	require.NoError(b, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	defer func() { cancel(); <-done }()
	base := "http://" + l.Addr().String() + "/metrics"
	get := func(c *http.Client, user, pass string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base, nil)
		req.SetBasicAuth(user, pass)
		resp, err := c.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	good := &http.Client{}
	for u := range users {
		require.Equal(b, http.StatusOK, get(good, fmt.Sprintf("prom%d", u), "right"))
	}
	stormCtx, stopStorm := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var checked atomic.Int64
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Transport: &http.Transport{}}
			defer c.CloseIdleConnections()
			for n := 0; stormCtx.Err() == nil; n++ {
				if get(c, fmt.Sprintf("prom%d", n%users), fmt.Sprintf("wrong-%d-%d", i, n)) == http.StatusUnauthorized {
					checked.Add(1)
				}
			}
		}()
	}
	require.True(b, testwait.Every(5*time.Minute, 100*time.Millisecond, func() bool { return checked.Load() >= 150 }))
	var lat []time.Duration
	pace := time.NewTicker(100 * time.Millisecond)
	defer pace.Stop()
	b.ResetTimer()
	for i := range b.N {
		<-pace.C
		start := time.Now()
		if code := get(good, fmt.Sprintf("prom%d", i%users), "right"); code != http.StatusOK {
			b.Fatalf("correct scrape %d answered %d", i, code)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	stopStorm()
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max_ms")
}
