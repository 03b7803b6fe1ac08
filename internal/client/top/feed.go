package top

import (
	"context"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuscope/gpuscope/internal/sampleapi"
)

// RetryEvery is how often a lost server is tried again.
const RetryEvery = time.Second

// Feed reads the server into the view until ctx ends: which fields it
// serves, what its rings hold, then the stream. When the server goes away
// it says so and tries again every RetryEvery, unless asking again would
// get the same answer.
func Feed(ctx context.Context, c *sampleapi.Client, send func(tea.Msg)) {
	for ctx.Err() == nil {
		err := feedOnce(ctx, c, send)
		if ctx.Err() != nil {
			return
		}
		if sampleapi.Permanent(err) {
			// The same question would get the same answer (too large, a
			// wrong password): say so once instead of downloading it again
			// every second.
			send(DownMsg{Err: err})
			<-ctx.Done()
			return
		}
		send(DownMsg{Err: err, Retry: RetryEvery})
		select {
		case <-ctx.Done():
			return
		case <-time.After(RetryEvery):
		}
	}
}

func feedOnce(ctx context.Context, c *sampleapi.Client, send func(tea.Msg)) error {
	var served []string
	for {
		s, refused, err := c.Served(ctx, Fields)
		if err != nil {
			return err
		}
		send(ServedMsg{Served: s, Refused: refused})
		if served = s; len(served) > 0 {
			break
		}
		// Nothing to show but n/a cells: ask again now and then, which
		// also notices a server that goes away.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * RetryEvery):
		}
	}
	q := sampleapi.Query{Fields: served}
	r, err := c.Fetch(ctx, q)
	if err != nil {
		return err
	}
	send(DataMsg{Result: r})
	// The stream starts where the rings' answer ended; the view drops
	// samples it already holds.
	q.Since = r.Now
	for _, e := range r.Entities {
		for _, s := range e.Series {
			if n := len(s.T); n > 0 && s.T[n-1] < q.Since {
				q.Since = s.T[n-1]
			}
		}
	}
	return c.Stream(ctx, q, func(r *sampleapi.Result) error {
		send(DataMsg{Result: r})
		return nil
	})
}
