package server

import (
	"bufio"
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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deadline is generous: the machine running the tests may be loaded.
const deadline = 15 * time.Second

// serve runs s on a loopback port until the test ends and returns its
// address.
func serve(t *testing.T, s *Server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(deadline):
			t.Error("server did not stop")
		}
	})
	return l.Addr().String()
}

// request sends one keep-alive GET on conn and returns the response, its
// body read.
func request(t *testing.T, conn net.Conn, br *bufio.Reader, path, extra string) *http.Response {
	t.Helper()
	_, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: gpuscope\r\n"+extra+"\r\n")
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(deadline)))
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	return resp
}

// closedByServer waits until the server closes conn: a read returns EOF.
func closedByServer(conn net.Conn, br *bufio.Reader) error {
	if err := conn.SetReadDeadline(time.Now().Add(deadline)); err != nil {
		return err
	}
	_, err := br.ReadByte()
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || (err != nil && strings.Contains(err.Error(), "reset")) {
		return nil
	}
	if err == nil {
		return errors.New("the server sent more bytes")
	}
	return err
}

// TestIdleConnectionsAreClosed: keep-alive connections that stay idle after
// a request, answered or refused with 401, are closed by the server after
// IdleTimeout instead of being held for good.
func TestIdleConnectionsAreClosed(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "web.yml")
	// bcrypt of "s3cret" at cost 4.
	require.NoError(t, os.WriteFile(cfg, []byte("basic_auth_users:\n  prom: $2a$04$jcD672bfJ/EIqmVDvRIBvu8auDJS4b2fjhsI1lo83EczAtbvJJ7HO\n"), 0o600))
	s, err := New(Options{Engine: &fakeEngine{ready: true}, Gatherer: prometheus.NewRegistry(), WebConfigFile: cfg, Log: quiet(),
		IdleTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	addr := serve(t, s)
	const n = 40
	conns := make([]net.Conn, n)
	readers := make([]*bufio.Reader, n)
	for i := range conns {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		conns[i], readers[i] = conn, bufio.NewReader(conn)
		auth, want := "", http.StatusUnauthorized
		if i%2 == 0 {
			auth, want = "Authorization: Basic cHJvbTpzM2NyZXQ=\r\n", http.StatusOK
		}
		resp := request(t, conn, readers[i], "/health", auth)
		require.Equal(t, want, resp.StatusCode)
		require.False(t, resp.Close, "the connection is kept alive")
	}
	for i := range conns {
		assert.NoError(t, closedByServer(conns[i], readers[i]), "connection %d", i)
	}
	require.Eventually(t, func() bool { return s.conns.Load() == 0 }, deadline, time.Millisecond, "no connection left open")
}

// TestIdleConnectionsAreClosedPastTheCap: connections past MaxConnections
// are answered 503 and closed; a slot freed is served again.
func TestIdleConnectionsAreClosedPastTheCap(t *testing.T) {
	s, err := New(Options{Engine: &fakeEngine{ready: true}, Gatherer: prometheus.NewRegistry(), Log: quiet(), MaxConnections: 3})
	require.NoError(t, err)
	addr := serve(t, s)
	var held []net.Conn
	for range 3 {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		require.Equal(t, http.StatusOK, request(t, conn, bufio.NewReader(conn), "/health", "").StatusCode)
		held = append(held, conn)
	}
	extra, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer extra.Close()
	br := bufio.NewReader(extra)
	resp := request(t, extra, br, "/metrics", "")
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.True(t, resp.Close, "the excess connection is closed")
	assert.NoError(t, closedByServer(extra, br))

	require.NoError(t, held[0].Close())
	require.Eventually(t, func() bool {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		defer conn.Close()
		return request(t, conn, bufio.NewReader(conn), "/health", "").StatusCode == http.StatusOK
	}, deadline, time.Millisecond, "a freed slot is served")
}

// TestIdleConnectionsAreClosedHeadersAreBounded: a request with headers
// over 64 KiB is refused with 431 instead of being read into memory, and
// the server's timeouts are set.
func TestIdleConnectionsAreClosedHeadersAreBounded(t *testing.T) {
	s, err := New(Options{Engine: &fakeEngine{ready: true}, Gatherer: prometheus.NewRegistry(), Log: quiet()})
	require.NoError(t, err)
	addr := serve(t, s)
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	resp := request(t, conn, bufio.NewReader(conn), "/health", "X-Big: "+strings.Repeat("a", 200<<10)+"\r\n")
	assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)

	srv := s.httpServer()
	assert.Equal(t, DefaultIdleTimeout, srv.IdleTimeout)
	assert.Equal(t, DefaultWriteTimeout, srv.WriteTimeout)
	assert.Equal(t, readHeaderTimeout, srv.ReadHeaderTimeout)
}

// TestProfilingEndpointsOffByDefault: without --web-enable-profiling-api
// the pause and resume endpoints do not exist.
func TestProfilingEndpointsOffByDefault(t *testing.T) {
	prof := &fakeProfiling{}
	s, err := New(Options{Engine: &fakeEngine{}, Profiling: prof, Log: quiet()})
	require.NoError(t, err)
	for _, path := range []string{"/api/v1/profiling/pause", "/api/v1/profiling/resume"} {
		req := httptest.NewRequest(http.MethodPost, path, nil)
		req.Header.Set(ProfilingRequestHeader, "1")
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		assert.Equal(t, http.StatusNotFound, rec.Code, path)
	}
	assert.False(t, prof.paused)
}

// TestProfilingEndpointsRefuseForgeableRequests: a page on another site can
// POST a form or a text/plain body, or a bodiless fetch, without a CORS
// preflight; those are refused. The custom header, or a JSON body, which a
// browser only sends after a preflight gpuscope never grants, is accepted.
func TestProfilingEndpointsRefuseForgeableRequests(t *testing.T) {
	tests := []struct {
		name, contentType, header string
		code                      int
	}{
		{"no content type", "", "", http.StatusForbidden},
		{"text/plain", "text/plain;charset=UTF-8", "", http.StatusForbidden},
		{"form", "application/x-www-form-urlencoded", "", http.StatusForbidden},
		{"multipart form", "multipart/form-data; boundary=x", "", http.StatusForbidden},
		{"JSON", "application/json", "", http.StatusOK},
		{"custom header", "", "1", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prof := &fakeProfiling{}
			s := newTestServer(t, &fakeEngine{}, prof)
			req := httptest.NewRequest(http.MethodPost, "/api/v1/profiling/pause", strings.NewReader("x"))
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			if tt.header != "" {
				req.Header.Set(ProfilingRequestHeader, tt.header)
			}
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, req)
			assert.Equal(t, tt.code, rec.Code, rec.Body.String())
			assert.Equal(t, tt.code == http.StatusOK, prof.paused)
		})
	}
}

// TestProfilingEndpointsReadOnlyRoutes: /metrics, /health and /ready answer
// GET and HEAD only.
func TestProfilingEndpointsReadOnlyRoutes(t *testing.T) {
	s := newTestServer(t, &fakeEngine{ready: true}, nil)
	for _, path := range []string{"/metrics", "/health", "/ready"} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			assert.Equal(t, http.StatusOK, get(t, s.Handler(), method, path).Code, method+" "+path)
		}
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
			rec := get(t, s.Handler(), method, path)
			assert.Equal(t, http.StatusMethodNotAllowed, rec.Code, method+" "+path)
			assert.Equal(t, "GET, HEAD", rec.Header().Get("Allow"))
		}
	}
}

// TestProfilingEndpointsGzipQZero: a q-value of 0, however it is written,
// refuses gzip; the wildcard allows it unless gzip is refused by name.
func TestProfilingEndpointsGzipQZero(t *testing.T) {
	tests := []struct {
		accept string
		gzip   bool
	}{
		{"gzip;q=0", false},
		{"gzip;q=0.", false},
		{"gzip; Q=0", false},
		{"gzip;level=1;q=0", false},
		{"GZIP", true},
		{"gzip;q=0.001", true},
		{"*", true},
		{"*;q=0", false},
		{"gzip;q=0, *", false},
		{"identity;q=1, *;q=0.5", true},
		{"gzip;q=bogus", false},
	}
	for _, tt := range tests {
		t.Run(tt.accept, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			req.Header.Set("Accept-Encoding", tt.accept)
			assert.Equal(t, tt.gzip, acceptsGzip(req))
		})
	}
}
