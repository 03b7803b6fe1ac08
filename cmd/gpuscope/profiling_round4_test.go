package main

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProfilingRound4HostileServer (round 4, items 8 and 10): what the
// server answers reaches the terminal without escapes, the password never
// shows in an error, and a redirect to another port is not followed with
// the credentials.
func TestProfilingRound4HostileServer(t *testing.T) {
	var leaked atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Add(1)
		}
		_, _ = w.Write([]byte("paused\n"))
	}))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/redirect/"):
			http.Redirect(w, r, other.URL+"/api/v1/profiling/pause", http.StatusTemporaryRedirect)
		case strings.HasPrefix(r.URL.Path, "/fail/"):
			http.Error(w, "no\x1b]0;owned\x07\x1b[2J", http.StatusInternalServerError)
		default:
			_, _ = w.Write([]byte("profiling paused\x1b]0;owned\x07\n"))
		}
	}))
	defer srv.Close()
	client, err := profilingClient("", false)
	require.NoError(t, err)
	u, _ := url.Parse(srv.URL)
	withPW := "http://admin:s3cretPW@" + u.Host

	var out strings.Builder
	require.NoError(t, postProfiling(&out, client, srv.URL, "pause", "u", "p"))
	assert.True(t, strings.HasPrefix(out.String(), "profiling paused"), out.String())
	assert.NotContains(t, out.String(), "\x1b")
	assert.NotContains(t, out.String(), "\x07")

	err = postProfiling(&out, client, withPW+"/fail", "pause", "", "")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "\x1b")
	assert.NotContains(t, err.Error(), "s3cretPW")

	err = postProfiling(&out, client, withPW+"/redirect", "pause", "u", "p")
	require.Error(t, err)
	assert.Contains(t, err.Error(), other.URL)
	assert.NotContains(t, err.Error(), "s3cretPW")
	assert.Zero(t, leaked.Load(), "credentials sent to another port")
}
