package server

import (
	"bytes"
	"compress/gzip"
	"sync"
	"time"
)

// maxFreeBodies is how many rendered bodies are kept for reuse once their
// scrapes are written. Coalescing keeps the number in use small, so a couple
// is enough; more would only pin memory.
const maxFreeBodies = 2

// body is one rendered /metrics response, shared by every scrape that asked
// for one while it was being rendered.
type body struct {
	buf  []byte
	refs int
	done chan struct{}

	// gz is buf gzip-compressed, made once by the first scrape that asks,
	// so concurrent gzip scrapes share the compression as they share the
	// render.
	gzOnce sync.Once
	gz     []byte

	// proto is the protobuf exposition of buf with the native histograms,
	// and protoGz it compressed, each made once for the scrapes that ask.
	protoOnce   sync.Once
	proto       []byte
	protoErr    error
	protoGzOnce sync.Once
	protoGz     []byte
}

var gzipWriters = sync.Pool{New: func() any {
	gz, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return gz
}}

// gzipped returns the body compressed at gzip's fastest level.
func (b *body) gzipped() []byte {
	b.gzOnce.Do(func() { b.gz = gzipBytes(b.buf) })
	return b.gz
}

func gzipBytes(in []byte) []byte {
	var out bytes.Buffer
	out.Grow(len(in)/8 + 64)
	gz := gzipWriters.Get().(*gzip.Writer)
	gz.Reset(&out)
	// Writes to a bytes.Buffer cannot fail.
	_, _ = gz.Write(in)
	_ = gz.Close()
	gzipWriters.Put(gz)
	return out.Bytes()
}

// coalescer renders /metrics once for all the scrapes that arrive while a
// render is running. Fifty concurrent scrapers of a large node then hold a
// few bodies instead of fifty, and the store's read lock is taken once.
// A scrape that joins a render gets data at most one render older than its
// arrival, which is below the resolution of the samples.
type coalescer struct {
	render func([]byte) []byte
	// maxAge is how long a finished body is served again to new scrapes;
	// 0 renders for every scrape that finds no render running. Within the
	// sampling resolution a newer render would show nothing newer.
	maxAge time.Duration
	now    func() time.Time

	mu       sync.Mutex
	inflight *body
	// last is the latest finished body while maxAge > 0; the coalescer
	// holds one reference to it.
	last   *body
	lastAt time.Time
	free   [][]byte
	// lastLen is the length of the latest render; a new buffer is made a
	// little larger, rather than grown by doubling from nothing to up to
	// twice what it holds.
	lastLen int
}

// get returns a rendered body; the caller writes it and calls release.
func (c *coalescer) get() *body {
	c.mu.Lock()
	if b := c.inflight; b != nil {
		b.refs++
		c.mu.Unlock()
		<-b.done
		return b
	}
	if b := c.last; b != nil && c.clock().Sub(c.lastAt) < c.maxAge {
		b.refs++
		c.mu.Unlock()
		return b
	}
	b := &body{refs: 1, done: make(chan struct{})}
	c.inflight = b
	var buf []byte
	if n := len(c.free); n > 0 {
		buf, c.free = c.free[n-1], c.free[:n-1]
	} else if c.lastLen > 0 {
		buf = make([]byte, 0, c.lastLen+c.lastLen/8)
	}
	c.mu.Unlock()
	rendered := false
	// Waiters are released even if the render panics (net/http recovers
	// handler panics); they then serve an empty body rather than hang.
	defer func() {
		c.mu.Lock()
		c.inflight = nil
		if rendered {
			c.lastLen = len(b.buf)
		}
		if rendered && c.maxAge > 0 {
			if old := c.last; old != nil {
				c.releaseLocked(old)
			}
			b.refs++
			c.last, c.lastAt = b, c.clock()
		}
		c.mu.Unlock()
		close(b.done)
	}()
	b.buf = c.render(buf[:0])
	rendered = true
	return b
}

func (c *coalescer) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// release hands a body back; the last scrape to let go keeps its buffer for
// the next render.
func (c *coalescer) release(b *body) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releaseLocked(b)
}

func (c *coalescer) releaseLocked(b *body) {
	b.refs--
	// A buffer far larger than the latest render (the exposition shrank)
	// is left to the garbage collector rather than kept.
	oversized := cap(b.buf) > 2*c.lastLen+64<<10
	if b.refs == 0 && b.buf != nil && cap(b.buf) <= maxPooledBuffer && !oversized && len(c.free) < maxFreeBodies {
		c.free = append(c.free, b.buf[:0])
	}
}
