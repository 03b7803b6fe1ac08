package podresources

import (
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
)

// HTTP/2 frame types (RFC 9113, section 6) that carry a request or an
// answer; every other frame is control.
const (
	frameData         = 0x0
	frameHeaders      = 0x1
	frameContinuation = 0x9
	flagEndStream     = 0x1
	frameHeaderLen    = 9
)

// FloodError is a connection the kubelet sent more control frames on than
// Limits.MaxControlFrames allows between two calls: a PING or SETTINGS
// flood costs the exporter a write per frame for as long as the connection
// lives, so it is dropped.
type FloodError struct {
	Frames, Limit int
	// Type is the type of the frame that passed the limit (6 is PING, 4
	// SETTINGS).
	Type byte
}

func (e *FloodError) Error() string {
	return fmt.Sprintf("the kubelet sent more than %d control frames (the last of type %d, %s) on one connection between two calls; connection dropped",
		e.Limit, e.Type, frameName(e.Type))
}

func frameName(t byte) string {
	names := [...]string{"DATA", "HEADERS", "PRIORITY", "RST_STREAM", "SETTINGS", "PUSH_PROMISE", "PING", "GOAWAY", "WINDOW_UPDATE", "CONTINUATION"}
	if int(t) < len(names) {
		return names[t]
	}
	return "unknown"
}

// conns are the connections a client has open, so that Close ends them
// all, not only the idle ones: a kubelet that accepts and never answers
// leaves a connection in use, and with it the transport's reader.
type conns struct {
	mu   sync.Mutex
	open map[*frameConn]struct{}
}

func (cs *conns) add(c *frameConn) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.open == nil {
		cs.open = map[*frameConn]struct{}{}
	}
	cs.open[c] = struct{}{}
}

func (cs *conns) remove(c *frameConn) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	delete(cs.open, c)
}

// each calls f for every open connection.
func (cs *conns) each(f func(*frameConn)) {
	cs.mu.Lock()
	list := make([]*frameConn, 0, len(cs.open))
	for c := range cs.open {
		list = append(list, c)
	}
	cs.mu.Unlock()
	for _, c := range list {
		f(c)
	}
}

// frameConn reads the frames the kubelet sends as they pass to the HTTP/2
// transport, counting the control frames since the last call started. Its
// Read runs on the transport's one reader goroutine.
type frameConn struct {
	net.Conn
	client *Client
	limit  int

	hdr  [frameHeaderLen]byte
	hn   int    // bytes of hdr read
	left uint32 // payload bytes of the current frame still to come

	control atomic.Int32
	once    sync.Once
	// flood is the error to return once the bytes before the frame that
	// passed the limit are delivered.
	flood error
}

func (c *frameConn) Read(p []byte) (int, error) {
	if c.flood != nil {
		return 0, c.flood
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		keep, ferr := c.scan(p[:n])
		if ferr != nil {
			// The frames before the flood's are still delivered: an answer
			// that came just before it completes its call.
			c.flood = ferr
			c.drop(ferr)
			if keep > 0 {
				return keep, nil
			}
			return 0, ferr
		}
	}
	return n, err
}

// scan follows the frame boundaries in b and counts the control frames.
// Past the limit it returns the error, and how many bytes of b come before
// the header of the frame that passed it.
func (c *frameConn) scan(b []byte) (int, error) {
	off := 0
	for off < len(b) {
		if c.left > 0 {
			k := min(uint32(len(b)-off), c.left)
			c.left -= k
			off += int(k)
			continue
		}
		start := off - c.hn // where this frame's header began in b
		k := copy(c.hdr[c.hn:], b[off:])
		c.hn += k
		off += k
		if c.hn < frameHeaderLen {
			return len(b), nil
		}
		c.hn = 0
		c.left = uint32(c.hdr[0])<<16 | uint32(binary.BigEndian.Uint16(c.hdr[1:3]))
		typ, flags := c.hdr[3], c.hdr[4]
		control := typ != frameData && typ != frameHeaders && typ != frameContinuation
		// An empty DATA frame that does not end its stream carries
		// nothing: a flood of them costs as much as one of PINGs.
		emptyData := typ == frameData && c.left == 0 && flags&flagEndStream == 0
		if (control || emptyData) && int(c.control.Add(1)) > c.limit {
			return max(start, 0), &FloodError{Frames: int(c.control.Load()), Limit: c.limit, Type: typ}
		}
	}
	return len(b), nil
}

// drop closes the connection once and tells the client why.
func (c *frameConn) drop(err error) {
	c.once.Do(func() {
		_ = c.Conn.Close()
		c.client.dropped(err)
	})
}

func (c *frameConn) Close() error {
	c.client.conns.remove(c)
	return c.Conn.Close()
}
