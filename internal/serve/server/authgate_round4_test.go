package server

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFailedAuthCostBrokenConfigRemembersNothing (round 4, item 7): while
// the web config is broken the toolkit answers 500, not 401; credentials
// sent meanwhile were remembered as good, pushed the scraper's out of the
// known set, and its scrapes then got 429 in a wrong-password storm. Only a
// success (2xx, 3xx) is remembered now.
func TestFailedAuthCostBrokenConfigRemembersNothing(t *testing.T) {
	var broken atomic.Bool
	inner := &slowAuth{}
	g := newAuthGate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if broken.Load() {
			http.Error(w, "web config: cannot load", http.StatusInternalServerError)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	do := func(pass string) int {
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, authReq(pass))
		return rec.Code
	}
	require.Equal(t, http.StatusOK, do("right"))
	require.Equal(t, 1, g.knownLen())

	broken.Store(true)
	for i := range maxKnownAuth {
		assert.Equal(t, http.StatusInternalServerError, do("junk-"+strconv.Itoa(i)))
	}
	assert.Equal(t, 1, g.knownLen(), "no credential is remembered from a failed answer")
	for _, code := range []int{http.StatusForbidden, http.StatusBadRequest, http.StatusServiceUnavailable} {
		h := newAuthGate(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }))
		h.ServeHTTP(httptest.NewRecorder(), authReq("x"))
		assert.Zero(t, h.knownLen(), "answered %d", code)
	}

	// The config comes back; a storm of wrong passwords holds every slot.
	broken.Store(false)
	inner.checking, inner.release = make(chan string, maxAuthChecks+1), make(chan struct{})
	done := make(chan int, maxAuthChecks)
	for i := range maxAuthChecks {
		go func() { done <- do("wrong-" + strconv.Itoa(i)) }()
	}
	for range maxAuthChecks {
		<-inner.checking
	}
	assert.Equal(t, http.StatusTooManyRequests, do("another-wrong"))
	scrape := make(chan int, 1)
	go func() { scrape <- do("right") }()
	select {
	case pass := <-inner.checking:
		assert.Equal(t, "right", pass, "the scraper's credential is still known")
		close(inner.release)
		assert.Equal(t, http.StatusOK, <-scrape)
	case code := <-scrape:
		close(inner.release)
		t.Errorf("the scraper's scrape was answered %d without a check: its credential was pushed out", code)
	}
	for range maxAuthChecks {
		assert.Equal(t, http.StatusUnauthorized, <-done)
	}
}
