package top

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/sampleapi"
)

// feedMsgs runs Feed against base and returns the messages it sent until
// want says enough or the wait ends.
func feedMsgs(t *testing.T, c *sampleapi.Client, want func([]tea.Msg) bool) []tea.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var mu sync.Mutex
	var msgs []tea.Msg
	enough := make(chan struct{})
	var once sync.Once
	go Feed(ctx, c, func(m tea.Msg) {
		mu.Lock()
		defer mu.Unlock()
		msgs = append(msgs, m)
		if want(msgs) {
			once.Do(func() { close(enough) })
		}
	})
	select {
	case <-enough:
	case <-ctx.Done():
	}
	cancel()
	mu.Lock()
	defer mu.Unlock()
	return append([]tea.Msg(nil), msgs...)
}

func firstDown(msgs []tea.Msg) (DownMsg, bool) {
	for _, m := range msgs {
		if d, ok := m.(DownMsg); ok {
			return d, true
		}
	}
	return DownMsg{}, false
}

func hasDown(msgs []tea.Msg) bool { _, ok := firstDown(msgs); return ok }

// TestTopRefusesMismatchedSeries: series whose t and v differ in length
// are a decode error shown in the banner, never an index out of range.
func TestTopRefusesMismatchedSeries(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"now":1,"fields":[{"name":"` + FieldSM + `"}],"entities":[{"key":"g","kind":"gpu","series":[{"field":"` + FieldSM + `","t":[1,2],"v":[1]}]}]}`))
	}))
	defer srv.Close()
	d, ok := firstDown(feedMsgs(t, &sampleapi.Client{Base: srv.URL}, hasDown))
	require.True(t, ok)
	assert.Contains(t, d.Err.Error(), "2 timestamps and 1 values")
}

// TestTopTimesOutASilentServer: a server that accepts and never answers is
// shown as down, not as "connecting" forever.
func TestTopTimesOutASilentServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	c := &sampleapi.Client{Base: l.Addr().String(), HeaderTimeout: 200 * time.Millisecond}
	d, ok := firstDown(feedMsgs(t, c, hasDown))
	require.True(t, ok)
	assert.Contains(t, d.Err.Error(), "no answer")
}

// TestTopDoesNotDownloadATooLargeAnswerAgain: an answer past the client's
// bound is said once, and not fetched again every second.
func TestTopDoesNotDownloadATooLargeAnswerAgain(t *testing.T) {
	var fetches atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("since") != "" {
			// Served: every field is served.
			_, _ = w.Write([]byte(`{"now":1,"fields":[],"entities":[]}`))
			return
		}
		fetches.Add(1)
		_, _ = w.Write([]byte(`{"now":1,"pad":"` + strings.Repeat("x", 4096) + `"}`))
	}))
	defer srv.Close()
	c := &sampleapi.Client{Base: srv.URL, MaxEventBytes: 1024}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	downs := make(chan DownMsg, 16)
	go Feed(ctx, c, func(m tea.Msg) {
		if d, ok := m.(DownMsg); ok {
			downs <- d
		}
	})
	var d DownMsg
	select {
	case d = <-downs:
	case <-time.After(20 * time.Second):
		t.Fatal("no banner")
	}
	assert.Contains(t, d.Err.Error(), "too large")
	assert.Zero(t, d.Retry, "no retry is promised")
	select {
	case again := <-downs:
		t.Fatalf("fetched again: %v", again.Err)
	case <-time.After(3 * RetryEvery):
	}
	assert.Equal(t, int64(1), fetches.Load())
	m := New("node:9400", nil)
	m.Update(tea.WindowSizeMsg{Width: 300, Height: 20})
	m.Update(d)
	assert.Contains(t, m.View(), "not retrying")
}

// TestTopShowsNoControlCharacters: escape sequences in what a server sends
// (host name, pod, model, a 401 body) do not reach the terminal.
func TestTopShowsNoControlCharacters(t *testing.T) {
	esc := `\u001b]0;owned\u0007\u001b[?1049l`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"now":1,"hostname":"n` + esc + `","fields":[{"name":"` + FieldSM + `"}],"entities":[{"key":"g","kind":"gpu",` +
			`"labels":{"pod":"p` + esc + `","namespace":"ns","modelName":"m` + esc + `"},"series":[{"field":"` + FieldSM + `","t":[1],"v":[1]}]}]}`))
	}))
	defer srv.Close()
	r, err := (&sampleapi.Client{Base: srv.URL}).Fetch(context.Background(), sampleapi.Query{Fields: []string{FieldSM}})
	require.NoError(t, err)
	m := New("node:9400", nil)
	m.Update(tea.WindowSizeMsg{Width: 160, Height: 20})
	m.Update(ServedMsg{Served: []string{FieldSM}})
	m.Update(DataMsg{Result: r})
	m.Update(DownMsg{Err: &sampleapi.StatusError{Code: 401, URL: "u", Msg: "no\x1b]0;owned\x07"}, Retry: time.Second})
	view := m.View()
	assert.NotContains(t, view, "\x1b]")
	assert.NotContains(t, view, "\x07")
	assert.NotContains(t, view, "\x1b[?1049l")
	assert.Contains(t, view, "ns/p]0;owned")
}
