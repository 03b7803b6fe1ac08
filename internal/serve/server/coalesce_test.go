package server

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// textSnapshot renders as its text, and as nothing in protobuf.
func textSnapshot(text string) Exposition { return &fakeSnapshot{text: text} }

func TestCoalescerSharesOneRenderAmongConcurrentScrapes(t *testing.T) {
	var renders atomic.Int32
	release := make(chan struct{})
	c := &coalescer{render: func(b *body, _ Exposition) {
		renders.Add(1)
		<-release
		b.snap = textSnapshot("up 1\n")
	}}
	first := make(chan *body)
	go func() {
		b, err := c.get()
		assert.NoError(t, err)
		first <- b
	}()
	require.Eventually(t, func() bool { return renders.Load() == 1 }, time.Second, time.Millisecond)

	// Nine more scrapes arrive while the first render runs: they wait for
	// it instead of rendering again.
	var wg sync.WaitGroup
	got := make([]*body, 9)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			got[i], err = c.get()
			assert.NoError(t, err)
		}()
	}
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.inflight != nil && c.inflight.refs == 10
	}, time.Second, time.Millisecond)
	close(release)
	wg.Wait()
	b := <-first
	assert.Equal(t, int32(1), renders.Load())
	for _, g := range got {
		assert.Same(t, b, g)
	}
	snap := b.snap
	for range 10 {
		c.release(b)
	}
	assert.Equal(t, []Exposition{snap}, c.free, "the last release keeps the snapshot for the next render")

	// The next scrape renders anew, into the kept snapshot.
	var prev Exposition
	c.render = func(b *body, p Exposition) { prev = p; b.snap = textSnapshot("up 1\n") }
	nb, err := c.get()
	require.NoError(t, err)
	assert.Same(t, snap, prev)
	assert.Empty(t, c.free)
	c.release(nb)
}

func TestCoalescerKeepsFewSnapshots(t *testing.T) {
	c := &coalescer{render: func(b *body, _ Exposition) { b.snap = textSnapshot("x") }}
	var held []*body
	for range 5 {
		b, err := c.get()
		require.NoError(t, err)
		held = append(held, b)
	}
	for _, b := range held {
		c.release(b)
	}
	assert.Len(t, c.free, maxFreeSnapshots)
}

// TestCoalescerFailsEveryScrapeOfARenderThatPanics: the scrape that
// rendered and those that joined it get the render's error, none a body
// that was never made, and the next scrape renders again.
func TestCoalescerFailsEveryScrapeOfARenderThatPanics(t *testing.T) {
	started := make(chan struct{})
	proceed := make(chan struct{})
	c := &coalescer{maxAge: time.Hour, render: func(*body, Exposition) {
		close(started)
		<-proceed
		panic("render failed")
	}}
	errs := make(chan error, 2)
	go func() {
		_, err := c.get()
		errs <- err
	}()
	<-started
	go func() {
		_, err := c.get()
		errs <- err
	}()
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.inflight.refs == 2
	}, time.Second, time.Millisecond)
	close(proceed)
	for range 2 {
		select {
		case err := <-errs:
			require.Error(t, err)
			assert.Contains(t, err.Error(), "render failed")
		case <-time.After(5 * time.Second):
			t.Fatal("a scrape hung after the render panicked")
		}
	}
	c.mu.Lock()
	assert.Nil(t, c.inflight, "the next scrape renders again")
	assert.Nil(t, c.last, "a failed render is not served again")
	c.mu.Unlock()
	c.render = func(b *body, _ Exposition) { b.snap = textSnapshot("x") }
	b, err := c.get()
	require.NoError(t, err)
	c.release(b)
}

func TestCoalescerServesAFreshBodyAgain(t *testing.T) {
	renders := 0
	now := time.Unix(0, 0)
	c := &coalescer{
		render: func(b *body, _ Exposition) { renders++; b.snap = textSnapshot("x") },
		maxAge: 100 * time.Millisecond,
		now:    func() time.Time { return now },
	}
	a, err := c.get()
	require.NoError(t, err)
	c.release(a)
	now = now.Add(50 * time.Millisecond)
	b, err := c.get()
	require.NoError(t, err)
	assert.Same(t, a, b, "a body younger than maxAge is served again")
	assert.Equal(t, 1, renders)
	now = now.Add(60 * time.Millisecond)
	d, err := c.get()
	require.NoError(t, err)
	assert.NotSame(t, a, d, "an older one is rendered anew")
	assert.Equal(t, 2, renders)
	c.release(b)
	c.release(d)
	// The coalescer holds the newest body; the older one's snapshot went
	// back to the free list once its last scrape let go.
	assert.Len(t, c.free, 1)
	assert.Equal(t, 1, d.refs)
}
