package sampleapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const oneEvent = `{"now":5,"hostname":"node-1","fields":[{"name":"F","interval_ns":100}],"entities":[{"key":"g0","kind":"gpu","gpu":0,"labels":{"gpu":"0"},"series":[{"field":"F","t":[1],"v":[2]}]}]}`

// TestStreamEventSizeBound: an event made of endless short data lines is
// refused once the event passes the bound, however short each line is, and
// the client stops reading there.
func TestStreamEventSizeBound(t *testing.T) {
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("event: samples\n"))
		line := []byte("data: " + strings.Repeat("x", 1000) + "\n")
		for i := 0; i < 1_000_000 && r.Context().Err() == nil; i++ {
			n, err := w.Write(line)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	c := &Client{Base: srv.URL, MaxEventBytes: 256 << 10}
	err := c.Stream(context.Background(), Query{Fields: []string{"F"}}, func(*Result) error { return nil })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "too large")
	assert.Contains(t, err.Error(), "262144 bytes")
	assert.Less(t, sent.Load(), int64(64<<20), "the client stopped reading near the bound")
}

// TestFetchTooLarge: an answer past the bound is "too large", not an
// "unexpected EOF" from a cut JSON document, whether or not the server
// says its length up front.
func TestFetchTooLarge(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			body := `{"now":1,"entities":[],"pad":"` + strings.Repeat("y", 300<<10) + `"}`
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if !chunked {
					w.Header().Set("Content-Length", fmt.Sprint(len(body)))
				}
				_, _ = w.Write([]byte(body))
			}))
			defer srv.Close()
			c := &Client{Base: srv.URL, MaxEventBytes: 256 << 10}
			_, err := c.Fetch(context.Background(), Query{Fields: []string{"F"}})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "too large")
			assert.NotContains(t, err.Error(), "unexpected EOF")
			assert.True(t, Permanent(err), "retrying the same question gets the same answer")
		})
	}
}

// TestClientTimeouts: a server that accepts and never answers, and a
// stream that falls silent after its headers, end in an error naming the
// wait instead of hanging or showing stale values as live.
func TestClientTimeouts(t *testing.T) {
	silent := func(headers bool) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if headers {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
			}
			<-r.Context().Done()
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	mute, err := net.Listen("tcp", "127.0.0.1:0") // accepts (the kernel does), never reads or answers
	require.NoError(t, err)
	t.Cleanup(func() { mute.Close() })
	tests := []struct {
		name   string
		base   string
		stream bool
		want   string
	}{
		{"fetch, no answer", "http://" + mute.Addr().String(), false, "no answer"},
		{"stream, no answer", silent(false), true, "no answer"},
		{"stream, silent after its headers", silent(true), true, "nothing from the stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Client{Base: tt.base, HeaderTimeout: 200 * time.Millisecond, StreamIdleTimeout: 300 * time.Millisecond}
			done := make(chan error, 1)
			go func() {
				if tt.stream {
					done <- c.Stream(context.Background(), Query{Fields: []string{"F"}}, func(*Result) error { return nil })
					return
				}
				_, err := c.Fetch(context.Background(), Query{Fields: []string{"F"}})
				done <- err
			}()
			select {
			case err := <-done:
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.want)
			case <-time.After(20 * time.Second):
				t.Fatal("the client still waits")
			}
		})
	}
}

// TestClientDefaultTimeouts: the stream's idle timeout leaves room for the
// server's keep-alive every 15 s.
func TestClientDefaultTimeouts(t *testing.T) {
	c := &Client{}
	assert.Greater(t, c.streamIdle(), 15*time.Second)
	assert.Positive(t, c.headerTimeout())
}

// TestClientStripsControlCharacters: terminal escapes in what a server
// sends (labels, host name, field help, an error body) never reach what
// top and capture show.
func TestClientStripsControlCharacters(t *testing.T) {
	esc := "\x1b]0;owned\x07\x1b[?1049l\u009b31m"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/stream" {
			http.Error(w, "denied"+esc, http.StatusUnauthorized)
			return
		}
		body := `{"now":5,"hostname":"node-1\u001b]0;owned\u0007\u001b[?1049l\u009b31m","fields":[{"name":"F","help":"h\u001b[2J"}],` +
			`"entities":[{"key":"g0","kind":"gpu","gpu":0,"labels":{"gpu":"0","pod":"p\u001b[2J"},"series":[{"field":"F","t":[1],"v":[2]}]}]}`
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	c := &Client{Base: srv.URL}
	r, err := c.Fetch(context.Background(), Query{Fields: []string{"F"}})
	require.NoError(t, err)
	assert.Equal(t, "node-1]0;owned[?1049l31m", r.Hostname)
	assert.Equal(t, "p[2J", r.Entities[0].Labels["pod"])
	assert.Equal(t, "h[2J", r.Fields[0].Help)
	err = c.Stream(context.Background(), Query{Fields: []string{"F"}}, func(*Result) error { return nil })
	var se *StatusError
	require.True(t, errors.As(err, &se))
	assert.NotContains(t, se.Error(), "\x1b")
	assert.NotContains(t, se.Error(), "\x07")
	assert.NotContains(t, se.Error(), "\u009b")
	assert.Contains(t, se.Error(), "denied")
}

// TestStreamDecoderKeepsLabels: events that leave out unchanged labels and
// fields reach the callback whole.
func TestStreamDecoderKeepsLabels(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		second := strings.Replace(strings.Replace(oneEvent, `"labels":{"gpu":"0"},`, "", 1), `"fields":[{"name":"F","interval_ns":100}],`, "", 1)
		second = strings.Replace(second, `"t":[1]`, `"t":[2]`, 1)
		fmt.Fprintf(w, "event: samples\ndata: %s\n\nevent: samples\ndata: %s\n\n", oneEvent, second)
	}))
	defer srv.Close()
	var got []*Result
	err := (&Client{Base: srv.URL}).Stream(context.Background(), Query{Fields: []string{"F"}}, func(r *Result) error {
		got = append(got, r)
		return nil
	})
	require.EqualError(t, err, "the server ended the stream")
	require.Len(t, got, 2)
	assert.Equal(t, map[string]string{"gpu": "0"}, got[1].Entities[0].Labels)
	require.Len(t, got[1].Fields, 1)
	assert.Equal(t, int64(100), got[1].Fields[0].IntervalNS)
}
