package server

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/internal/sampleapi"
)

// stream serves /api/v1/stream: server-sent events, one "samples" event per
// collection with the samples each series gained since the last event. The
// rings are the buffer: a stream keeps only a cursor per series.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	// HEAD would take a slot and hold it while its client keeps the
	// connection: the server eats every event written to a HEAD response,
	// so no write ever fails.
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		apiError(w, http.StatusMethodNotAllowed, "use GET: a stream has no headers-only form")
		return
	}
	q, ok := s.samplesQuery(w, r)
	if !ok || !s.takeStreamSlot(w) {
		return
	}
	defer func() { <-s.streamSlots }()
	// The first read checks the fields and the size before the response
	// is committed, so a bad field is a 400 and not an event.
	res, err := s.opts.Samples.Samples(q)
	if err != nil {
		s.queryError(w, err)
		return
	}
	s.api.streams.Inc()
	defer s.api.streams.Dec()
	c, ok := s.openStream(w, r)
	if !ok {
		return
	}
	if r.URL.Query().Get("since") == "" {
		// Without since the stream starts now: the rings' past is what
		// /api/v1/samples is for.
		c.advance(res)
		res = nil
	}
	s.streamLoop(c, q, res)
}

// takeStreamSlot takes one of the --api-max-streams slots, or answers 429.
func (s *Server) takeStreamSlot(w http.ResponseWriter) bool {
	select {
	case s.streamSlots <- struct{}{}:
		return true
	default:
		s.api.streamsRefused.Inc()
		apiError(w, http.StatusTooManyRequests, "at most "+strconv.Itoa(cap(s.streamSlots))+" streams at once (--api-max-streams)")
		return false
	}
}

// streamConn is one open stream: where its events go and what it has sent.
type streamConn struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	log     *logrus.Entry
	timeout time.Duration
	slow    func()
	buf     []byte
	// cursors holds the newest timestamp sent of each series.
	cursors map[string]int64
	enc     sampleapi.StreamEncoder
	// done is closed when the client goes away.
	done <-chan struct{}
}

// openStream commits the response and sends its headers, so the client
// knows the stream is open before the first samples are in.
func (s *Server) openStream(w http.ResponseWriter, r *http.Request) (*streamConn, bool) {
	c := &streamConn{w: w, rc: http.NewResponseController(w), log: s.opts.Log.WithField("remote", r.RemoteAddr),
		timeout: s.opts.StreamWriteTimeout, cursors: map[string]int64{}, done: r.Context().Done(),
		slow: func() { s.api.streamDrops.WithLabelValues("slow").Inc() }}
	// A --web-read-timeout would end the stream's connection (and its
	// context) once it passed: the request is read, so lift it.
	if s.opts.ReadTimeout > 0 {
		_ = c.rc.SetReadDeadline(time.Time{})
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return c, c.rc.Flush() == nil
}

// streamLoop sends an event whenever the rings gain samples, a keep-alive
// when they do not, until the client leaves, falls behind or the server
// shuts down.
func (s *Server) streamLoop(c *streamConn, q sampleapi.Query, res *sampleapi.Result) {
	keepAlive := time.NewTicker(streamKeepAlive)
	defer keepAlive.Stop()
	for {
		updated := s.opts.Samples.Updated()
		if !s.streamStep(c, q, res) {
			return
		}
		res = nil
		select {
		case <-updated:
		case <-keepAlive.C:
			if !c.send([]byte(": keep-alive\n\n")) {
				return
			}
		case <-c.done:
			return
		case <-s.shutdown:
			return
		}
	}
}

// streamStep sends the samples gained since the cursors (res when the
// caller has read them already) and says whether the stream goes on.
func (s *Server) streamStep(c *streamConn, q sampleapi.Query, res *sampleapi.Result) bool {
	if res == nil {
		q.After = c.cursors
		var err error
		if res, err = s.opts.Samples.Samples(q); err != nil {
			// A reload dropped a field of the stream, or the client fell
			// so far behind that one event would pass the byte bound.
			c.sendError(err.Error())
			return false
		}
	}
	if lagged(res) {
		s.api.streamDrops.WithLabelValues("lagged").Inc()
		c.sendError("the client fell behind the rings and lost samples; reconnect with since= the last timestamp read")
		return false
	}
	if res.Len() > 0 {
		// The cursors move first: Compact leaves out labels in place.
		c.advance(res)
		c.enc.Compact(res)
		body, err := json.Marshal(res)
		if err != nil {
			c.log.WithError(err).Warn("Encoding stream samples failed")
			return false
		}
		c.buf = appendEvent(c.buf[:0], "samples", body)
		return c.send(c.buf)
	}
	c.advance(res)
	return true
}

func (c *streamConn) advance(res *sampleapi.Result) { advance(c.cursors, res) }

func (c *streamConn) sendError(msg string) {
	c.buf = appendEvent(c.buf[:0], "error", mustJSON(map[string]string{"error": msg}))
	c.send(c.buf)
}

// send writes one event and says whether the client took it in time.
func (c *streamConn) send(b []byte) bool {
	// The server's WriteTimeout would cut a long stream; each write gets
	// its own deadline instead.
	if err := c.rc.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		c.log.WithError(err).Debug("Setting the stream write deadline failed")
	}
	_, err := c.w.Write(b)
	if err == nil {
		err = c.rc.Flush()
	}
	if err != nil {
		// A client that left is no news; one whose write timed out did not
		// keep up.
		var ne net.Error
		if errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
			c.slow()
			c.log.WithError(err).Info("Dropping a stream client that does not keep up")
		}
		return false
	}
	return true
}
