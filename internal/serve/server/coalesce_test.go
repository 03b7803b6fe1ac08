package server

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCoalescerSharesOneRenderAmongConcurrentScrapes(t *testing.T) {
	var renders atomic.Int32
	release := make(chan struct{})
	c := &coalescer{render: func(buf []byte) []byte {
		renders.Add(1)
		<-release
		return append(buf, "up 1\n"...)
	}}
	first := make(chan *body)
	go func() { first <- c.get() }()
	require.Eventually(t, func() bool { return renders.Load() == 1 }, time.Second, time.Millisecond)

	// Nine more scrapes arrive while the first render runs: they wait for
	// it instead of rendering again.
	var wg sync.WaitGroup
	got := make([]*body, 9)
	for i := range got {
		wg.Add(1)
		go func() { defer wg.Done(); got[i] = c.get() }()
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
		assert.Equal(t, "up 1\n", string(g.buf))
	}
	for range 10 {
		c.release(b)
	}
	assert.Len(t, c.free, 1, "the last release keeps the buffer for the next render")

	// The next scrape renders anew, into the kept buffer.
	nb := c.get()
	assert.Equal(t, int32(2), renders.Load())
	assert.Empty(t, c.free)
	c.release(nb)
}

func TestCoalescerKeepsFewBuffers(t *testing.T) {
	c := &coalescer{render: func(buf []byte) []byte { return append(buf, "x"...) }}
	var held []*body
	for range 5 {
		held = append(held, c.get())
	}
	for _, b := range held {
		c.release(b)
	}
	assert.Len(t, c.free, maxFreeBodies)

	huge := &body{buf: make([]byte, 0, maxPooledBuffer+1), refs: 1}
	c.free = nil
	c.release(huge)
	assert.Empty(t, c.free, "a huge body is left to the garbage collector")
}

// TestCoalescerSizesBuffersFromTheLastRender: a new buffer holds the
// latest render's length and an eighth more, where growing by appends
// would leave up to twice that; a kept buffer far larger than the
// exposition now is let go.
func TestCoalescerSizesBuffersFromTheLastRender(t *testing.T) {
	size := 300 << 10
	c := &coalescer{render: func(buf []byte) []byte { return append(buf, make([]byte, size)...) }}
	first := c.get()
	c.free = nil // as if the first body were still being written
	second := c.get()
	assert.Equal(t, size+size/8, cap(second.buf), "the second buffer is sized from the first render")
	c.release(first)
	c.release(second)
	assert.Len(t, c.free, 2)

	size = 10 << 10 // the exposition shrank: fewer GPUs or fields
	c.free = c.free[:1]
	small := c.get()
	c.release(small)
	assert.Empty(t, c.free, "a buffer 30 times the exposition is not kept")
}

func TestCoalescerReleasesWaitersWhenARenderPanics(t *testing.T) {
	started := make(chan struct{})
	proceed := make(chan struct{})
	c := &coalescer{render: func([]byte) []byte {
		close(started)
		<-proceed
		panic("render failed")
	}}
	go func() {
		defer func() { _ = recover() }()
		c.get()
	}()
	<-started
	waiter := make(chan *body)
	go func() { waiter <- c.get() }()
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.inflight.refs == 2
	}, time.Second, time.Millisecond)
	close(proceed)
	select {
	case b := <-waiter:
		assert.Empty(t, b.buf)
	case <-time.After(time.Second):
		t.Fatal("a waiter hung after the render panicked")
	}
	c.mu.Lock()
	assert.Nil(t, c.inflight, "the next scrape renders again")
	c.mu.Unlock()
}

func TestCoalescerServesAFreshBodyAgain(t *testing.T) {
	renders := 0
	now := time.Unix(0, 0)
	c := &coalescer{
		render: func(buf []byte) []byte { renders++; return append(buf, "x"...) },
		maxAge: 100 * time.Millisecond,
		now:    func() time.Time { return now },
	}
	a := c.get()
	c.release(a)
	now = now.Add(50 * time.Millisecond)
	b := c.get()
	assert.Same(t, a, b, "a body younger than maxAge is served again")
	assert.Equal(t, 1, renders)
	now = now.Add(60 * time.Millisecond)
	d := c.get()
	assert.NotSame(t, a, d, "an older one is rendered anew")
	assert.Equal(t, 2, renders)
	c.release(b)
	c.release(d)
	// The coalescer holds the newest body; the older one went back to the
	// free list once its last scrape let go.
	assert.Len(t, c.free, 1)
	assert.Equal(t, 1, d.refs)
}
