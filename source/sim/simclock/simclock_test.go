package simclock

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loop is a sampling loop as the engine runs one: it samples, then waits
// on the clock for its next interval; it records the clock's time at each
// sample.
type loop struct {
	mu      sync.Mutex
	samples []time.Duration
}

func (l *loop) run(ctx context.Context, c *Clock, interval time.Duration, done *sync.WaitGroup) {
	defer done.Done()
	clk := c.Clock()
	next := clk.Now()
	for {
		l.mu.Lock()
		l.samples = append(l.samples, clk.Now().Sub(Epoch))
		l.mu.Unlock()
		now := clk.Now()
		for !next.After(now) {
			next = next.Add(interval)
		}
		t := clk.NewTimer(next.Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

func (l *loop) taken() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Duration(nil), l.samples...)
}

// start runs a 100 ms and a 1 s loop on a clock whose moves step through
// their last fine.
func start(t *testing.T, fine time.Duration) (*Clock, *loop, *loop) {
	t.Helper()
	c := New(fine)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	fast, slow := &loop{}, &loop{}
	wg.Add(2)
	go fast.run(ctx, c, 100*time.Millisecond, &wg)
	go slow.run(ctx, c, time.Second, &wg)
	t.Cleanup(func() { cancel(); wg.Wait() })
	c.Attach(func() int { return 2 })
	return c, fast, slow
}

func TestAMoveSamplesItsLastFineSpanAtEveryInterval(t *testing.T) {
	c, fast, slow := start(t, 500*time.Millisecond)
	now, err := c.Advance(2 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, Epoch.Add(2*time.Second), now)
	assert.Equal(t, now, c.Now())
	ms := time.Millisecond
	// Both loops sampled at the start; the move jumped to 1.5 s, where
	// both were due, then stepped through every 100 ms to 2 s.
	assert.Equal(t, []time.Duration{0, 1500 * ms, 1600 * ms, 1700 * ms, 1800 * ms, 1900 * ms, 2000 * ms}, fast.taken())
	assert.Equal(t, []time.Duration{0, 1500 * ms, 2000 * ms}, slow.taken())

	_, err = c.Advance(300 * time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{2100 * ms, 2200 * ms, 2300 * ms}, fast.taken()[7:], "a move shorter than the span steps through all of it")
}

func TestAdvanceRefusesWhatItCannotDo(t *testing.T) {
	c := New(time.Second)
	_, err := c.Advance(time.Second)
	require.ErrorContains(t, err, "have not started")
	c.Attach(func() int { return 0 })
	for _, d := range []time.Duration{0, -time.Second, MaxAdvance + time.Second} {
		_, err := c.Advance(d)
		assert.ErrorContains(t, err, "must be more than 0", "advance %s", d)
	}
	assert.Equal(t, Epoch, c.Now(), "a refused move leaves the clock where it was")
}

func TestHandler(t *testing.T) {
	c, fast, _ := start(t, time.Second)
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()

	resp, err := http.Post(srv.URL+"?by=30s", "text/plain", nil)
	require.NoError(t, err)
	body := readAll(t, resp)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "1970-01-01T00:00:30Z\n", body)
	assert.Len(t, fast.taken(), 1+11, "the answer comes once the move's samples are taken")

	tests := []struct {
		method, query string
		status        int
		says          string
	}{
		{http.MethodGet, "?by=30s", http.StatusMethodNotAllowed, "use POST"},
		{http.MethodPost, "?by=soon", http.StatusBadRequest, `by "soon"`},
		{http.MethodPost, "", http.StatusBadRequest, `by ""`},
		{http.MethodPost, "?by=-1s", http.StatusBadRequest, "must be more than 0"},
	}
	for _, tc := range tests {
		req, err := http.NewRequest(tc.method, srv.URL+tc.query, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		assert.Equal(t, tc.status, resp.StatusCode, "%s %s", tc.method, tc.query)
		assert.Contains(t, readAll(t, resp), tc.says, "%s %s", tc.method, tc.query)
	}
	assert.Equal(t, Epoch.Add(30*time.Second), c.Now(), "refused requests leave the clock where it was")
}

func TestAMoveGivesUpOnLoopsThatNeverComeBack(t *testing.T) {
	c := New(time.Second)
	c.timeout = time.Millisecond
	// Two loops are said to wait, but only one ever arms a timer.
	c.Attach(func() int { return 2 })
	c.fake.NewTimer(time.Hour)
	_, err := c.Advance(time.Second)
	require.ErrorIs(t, err, ErrNotSettled)
	assert.ErrorContains(t, err, "1 of 2 waiting")

	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	resp, err := http.Post(srv.URL+"?by=1s", "text/plain", nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Contains(t, readAll(t, resp), "did not finish")
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}
