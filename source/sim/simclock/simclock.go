// Package simclock is the manual clock of a simulated node
// (--sim-clock=manual): the sim and the engine's sampling loops run on a
// clock that stands still until it is told to move, over HTTP, so that a
// test can compress hours of a node's life into seconds and still read
// every window the exporter would show at each scrape.
package simclock

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gpuscope/gpuscope/internal/clock"
)

// Epoch is where a manual clock starts: the Unix epoch, where promtool's
// rule unit tests start their series, so that timestamps the exporter
// writes (an XID's last-seen time, say) mean the same in such a test.
var Epoch = time.Unix(0, 0).UTC()

// MaxAdvance is the longest single move. A longer span is moved in several
// requests; the bound keeps one request's work, and its answer, prompt.
const MaxAdvance = 24 * time.Hour

// settleTimeout is how long, in real time, a move waits for the sampling
// loops to finish the collections it started.
const settleTimeout = 30 * time.Second

// Path is where the clock is served.
const Path = "/api/v1/sim/advance"

// ErrNotSettled says that the sampling loops did not all come back to wait
// on the clock in time.
var ErrNotSettled = errors.New("the sampling loops did not finish their collections")

// Clock is a manual clock and the driver that moves it.
type Clock struct {
	fake *clock.Fake
	// fine is how much of each move, up to its end, is stepped through at
	// every timer: the span whose samples the exporter's windows show.
	fine time.Duration

	// moving is held by the one move at a time; a request waits for it
	// only while its client does.
	moving chan struct{}
	mu     sync.Mutex // guards loops
	loops  func() int
	// timeout bounds each wait for the loops, in real time.
	timeout time.Duration
}

// New returns a clock standing at Epoch. Each move steps through every
// armed timer during its last fine (the window statistics' and the
// insight's span), so that the exporter's windows hold every sample at the
// move's end, and jumps over the time before it.
func New(fine time.Duration) *Clock {
	return &Clock{fake: clock.NewFake(Epoch), fine: fine, timeout: settleTimeout, moving: make(chan struct{}, 1)}
}

// Clock is the clock the sim and the engine run on.
func (c *Clock) Clock() clock.Clock { return c.fake }

// Now is the clock's time.
func (c *Clock) Now() time.Time { return c.fake.Now() }

// Attach names the loops that wait on the clock: loops says how many timers
// they arm when all of them wait (engine.Engine.Loops). Call it once the
// loops have started and before the first move.
func (c *Clock) Attach(loops func() int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loops = loops
}

// Advance moves the clock forward by d and returns once every collection
// the move started is done, with the clock's new time.
func (c *Clock) Advance(d time.Duration) (time.Time, error) {
	return c.AdvanceContext(context.Background(), d)
}

// AdvanceContext is Advance for a caller that may give up: a move waiting
// for another leaves when ctx ends, and a move under way stops at the
// next timer, the clock left where it got to. Abandoned requests kept
// moving the clock, one after the other (50 of a day each: 50 days on,
// 12 CPU-seconds).
func (c *Clock) AdvanceContext(ctx context.Context, d time.Duration) (time.Time, error) {
	if d <= 0 || d > MaxAdvance {
		return time.Time{}, fmt.Errorf("advance %s: must be more than 0 and at most %s", d, MaxAdvance)
	}
	select {
	case c.moving <- struct{}{}:
		defer func() { <-c.moving }()
	case <-ctx.Done():
		return time.Time{}, fmt.Errorf("advance %s: %w before it started", d, ctx.Err())
	}
	c.mu.Lock()
	loops := c.loops
	c.mu.Unlock()
	if loops == nil {
		return time.Time{}, errors.New("advance: the sampling loops have not started")
	}
	n := loops()
	if err := c.settle(n); err != nil {
		return time.Time{}, err
	}
	target := c.fake.Now().Add(d)
	if from := target.Add(-c.fine); from.After(c.fake.Now()) {
		c.fake.Set(from)
		if err := c.settle(n); err != nil {
			return time.Time{}, err
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			return time.Time{}, fmt.Errorf("advance %s: %w at %s", d, err, c.fake.Now().Format(time.RFC3339Nano))
		}
		next, ok := c.fake.Next()
		if !ok || next.After(target) {
			break
		}
		c.fake.Set(next)
		if err := c.settle(n); err != nil {
			return time.Time{}, err
		}
	}
	c.fake.Set(target)
	return target, nil
}

// settle waits until n timers are armed: every loop is back waiting.
func (c *Clock) settle(n int) error {
	if !c.fake.WaitForTimers(n, c.timeout) {
		return fmt.Errorf("%w within %s (%d of %d waiting)", ErrNotSettled, c.timeout, c.fake.Timers(), n)
	}
	return nil
}

// Handler serves POST ?by=DURATION: it moves the clock and answers with the
// new time (RFC 3339) once the collections are done, so that the next
// scrape shows the node at that time.
func (c *Clock) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "use POST "+Path+"?by=30s", http.StatusMethodNotAllowed)
			return
		}
		by := strings.TrimSpace(r.URL.Query().Get("by"))
		d, err := time.ParseDuration(by)
		if err != nil {
			http.Error(w, fmt.Sprintf("by %q: a Go duration such as 30s or 5m", by), http.StatusBadRequest)
			return
		}
		now, err := c.AdvanceContext(r.Context(), d)
		switch {
		case errors.Is(err, ErrNotSettled), r.Context().Err() != nil:
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		case err != nil:
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = fmt.Fprintln(w, now.Format(time.RFC3339Nano))
	})
}
