package simclock

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAdvanceRound4AbandonedMovesStop (round 4, item 17): moves whose
// clients give up stop (the one under way at its next timer, the queued
// ones before they start), so the clock is free for the next move at once
// and not days on.
func TestAdvanceRound4AbandonedMovesStop(t *testing.T) {
	// A day stepped through at 100 ms: a long move.
	c, _, _ := start(t, MaxAdvance)
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"?by=24h", nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := c.Advance(time.Millisecond)
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the abandoned moves still hold the clock")
	}
	t.Logf("next move done %s after the clients gave up", time.Since(start))
	assert.Less(t, c.Now().Sub(Epoch), 24*time.Hour, "no abandoned move ran to its end")
}
