package server

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"time"
)

// maxFreeSnapshots is how many snapshots are kept for reuse once their
// scrapes are written. Coalescing keeps the number in use small, so a couple
// is enough; more would only pin memory.
const maxFreeSnapshots = 2

// body is one consistent view of /metrics in one exposition format: a
// snapshot of the GPU series and gpuscope's own families, encoded. It is
// shared by every scrape that asked for one while it was being taken, and
// by those of the next reuseBodyFor; each scrape writes it to its
// connection in pieces, so that no whole rendered body is held.
type body struct {
	snap  Exposition
	proto bool
	// own and sampled are gpuscope's own families, encoded in the body's
	// format: gathered for the body, and as last sampled in the background.
	own, sampled []byte
	// err says the render failed; the body holds nothing to serve.
	err  error
	refs int
	done chan struct{}

	// gz is the body gzip-compressed, made once by the first scrape that
	// asks, so concurrent gzip scrapes share the compression as they share
	// the snapshot; it is a small fraction of the body.
	gzOnce sync.Once
	gz     []byte
	gzErr  error
}

// writeTo writes the whole body to w; an error is w's.
func (b *body) writeTo(w io.Writer) error {
	var err error
	if b.proto {
		err = b.snap.WriteProto(w)
	} else {
		err = b.snap.WriteText(w)
	}
	if err == nil && len(b.own) > 0 {
		_, err = w.Write(b.own)
	}
	if err == nil && len(b.sampled) > 0 {
		_, err = w.Write(b.sampled)
	}
	return err
}

var gzipWriters = sync.Pool{New: func() any {
	gz, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return gz
}}

// gzipped returns the body compressed at gzip's fastest level, or why it
// could not be: a panic while writing the snapshot fails this scrape and
// every later one of the body, rather than leave them an empty one.
func (b *body) gzipped() ([]byte, error) {
	b.gzOnce.Do(func() {
		b.gzErr = errors.New("compressing the exposition panicked")
		var out bytes.Buffer
		gz := gzipWriters.Get().(*gzip.Writer)
		gz.Reset(&out)
		// Writes to a bytes.Buffer cannot fail.
		err := b.writeTo(gz)
		if cerr := gz.Close(); err == nil {
			err = cerr
		}
		gz.Reset(nil)
		gzipWriters.Put(gz)
		b.gz, b.gzErr = out.Bytes(), err
	})
	return b.gz, b.gzErr
}

// coalescer takes one snapshot for all the scrapes that arrive while one is
// being taken, and serves it again for maxAge. Fifty concurrent scrapers of
// a large node then share a few snapshots, and the store's read lock is
// taken once. A scrape that joins a render gets data at most one render
// older than its arrival, which is below the resolution of the samples.
type coalescer struct {
	// render fills b's snapshot and own families, reusing prev's memory
	// when prev is not nil.
	render func(b *body, prev Exposition)
	proto  bool
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
	// free are snapshots no scrape reads any longer, for the next render.
	free []Exposition
}

// get returns a body, or the error of a render that failed (a panic, which
// is recovered so that no scrape serves a body that was never made); the
// caller writes the body and calls release.
func (c *coalescer) get() (*body, error) {
	c.mu.Lock()
	if b := c.inflight; b != nil {
		b.refs++
		c.mu.Unlock()
		<-b.done
		return c.checked(b)
	}
	if b := c.last; b != nil && c.clock().Sub(c.lastAt) < c.maxAge {
		b.refs++
		c.mu.Unlock()
		return b, nil
	}
	b := &body{refs: 1, done: make(chan struct{}), proto: c.proto}
	c.inflight = b
	var prev Exposition
	if n := len(c.free); n > 0 {
		prev, c.free = c.free[n-1], c.free[:n-1]
	}
	c.mu.Unlock()
	c.run(b, prev)
	c.mu.Lock()
	c.inflight = nil
	if b.err == nil && c.maxAge > 0 {
		if old := c.last; old != nil {
			c.releaseLocked(old)
		}
		b.refs++
		c.last, c.lastAt = b, c.clock()
	}
	c.mu.Unlock()
	close(b.done)
	return c.checked(b)
}

// run renders b, turning a panic into b.err.
func (c *coalescer) run(b *body, prev Exposition) {
	defer func() {
		if p := recover(); p != nil {
			b.err = fmt.Errorf("rendering the exposition panicked: %v\n%s", p, debug.Stack())
			b.snap = nil
		}
	}()
	c.render(b, prev)
}

// checked returns b, or releases it and returns its render's error.
func (c *coalescer) checked(b *body) (*body, error) {
	if b.err != nil {
		c.release(b)
		return nil, b.err
	}
	return b, nil
}

func (c *coalescer) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// release hands a body back; the last scrape to let go keeps its snapshot
// for the next render.
func (c *coalescer) release(b *body) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releaseLocked(b)
}

func (c *coalescer) releaseLocked(b *body) {
	b.refs--
	if b.refs == 0 && b.snap != nil && len(c.free) < maxFreeSnapshots {
		c.free = append(c.free, b.snap)
		b.snap = nil
	}
}
