package server

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuscope/gpuscope/internal/samples"
)

// SampleSource answers the raw-sample API from the engine's rings.
type SampleSource interface {
	Samples(q samples.Query) (*samples.Result, error)
	// Updated returns a channel closed when the next samples are in.
	Updated() <-chan struct{}
}

// DefaultMaxStreams is the number of /api/v1/stream clients served at once
// when the options do not say.
const DefaultMaxStreams = 8

// defaultStreamWriteTimeout is how long one event may take to reach a client. A
// client that does not take it in time is dropped: the engine never waits
// for it, and its samples are only ever one encoded batch in memory.
const defaultStreamWriteTimeout = 10 * time.Second

// streamKeepAlive is how often an idle stream sends a comment, so that
// proxies (kubectl port-forward) keep it open and a gone client is noticed.
const streamKeepAlive = 15 * time.Second

type apiMetrics struct {
	streams        prometheus.Gauge
	streamsRefused prometheus.Counter
	streamDrops    *prometheus.CounterVec
}

func newAPIMetrics() *apiMetrics {
	m := &apiMetrics{
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gpuscope_api_streams",
			Help: "Clients connected to /api/v1/stream.",
		}),
		streamsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gpuscope_api_streams_refused_total",
			Help: "/api/v1/stream requests refused because --api-max-streams clients were connected.",
		}),
		streamDrops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpuscope_api_stream_drops_total",
			Help: "Stream clients dropped by gpuscope, by reason: slow (an event took longer than " +
				defaultStreamWriteTimeout.String() + " to send) or lagged (the rings overwrote samples the client had not read).",
		}, []string{"reason"}),
	}
	m.streamDrops.WithLabelValues("slow")
	m.streamDrops.WithLabelValues("lagged")
	return m
}

func (m *apiMetrics) register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.streams, m.streamsRefused, m.streamDrops} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// onlyGet answers 405 to anything but GET and HEAD.
func onlyGet(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	apiError(w, http.StatusMethodNotAllowed, "use GET")
	return false
}

func apiError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// queryError answers a bad query: 400 with the reason for the user's
// mistakes, 500 for anything else.
func queryError(w http.ResponseWriter, err error) {
	var fe *samples.FieldError
	if errors.As(err, &fe) {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	apiError(w, http.StatusInternalServerError, err.Error())
}

// samplesQuery checks what /api/v1/samples and /api/v1/stream both need
// (a GET, a server holding samples, a valid query) and answers the error
// itself when one is missing.
func (s *Server) samplesQuery(w http.ResponseWriter, r *http.Request) (samples.Query, bool) {
	if !onlyGet(w, r) {
		return samples.Query{}, false
	}
	if s.opts.Samples == nil {
		apiError(w, http.StatusNotImplemented, "this server holds no samples")
		return samples.Query{}, false
	}
	q, err := samples.ParseQuery(r.URL.Query())
	if err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return samples.Query{}, false
	}
	return q, true
}

func (s *Server) samplesHandler(w http.ResponseWriter, r *http.Request) {
	q, ok := s.samplesQuery(w, r)
	if !ok {
		return
	}
	res, err := s.opts.Samples.Samples(q)
	if err != nil {
		queryError(w, err)
		return
	}
	body, err := json.Marshal(res)
	if err != nil {
		apiError(w, http.StatusInternalServerError, "encoding the samples: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if !acceptsGzip(r) {
		_, _ = w.Write(body)
		return
	}
	w.Header().Set("Content-Encoding", "gzip")
	w.Header().Add("Vary", "Accept-Encoding")
	gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
	_, _ = gz.Write(body)
	if err := gz.Close(); err != nil {
		s.opts.Log.WithError(err).Debug("Writing /api/v1/samples to the client failed")
	}
}

// stream serves /api/v1/stream: server-sent events, one "samples" event per
// collection with the samples each series gained since the last event. The
// rings are the buffer: a stream keeps only a cursor per series.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	q, ok := s.samplesQuery(w, r)
	if !ok {
		return
	}
	sinceGiven := r.URL.Query().Get("since") != ""
	// The first read checks the fields before the response is committed,
	// so a bad field is a 400 and not an event.
	res, err := s.opts.Samples.Samples(q)
	if err != nil {
		queryError(w, err)
		return
	}
	select {
	case s.streamSlots <- struct{}{}:
	default:
		s.api.streamsRefused.Inc()
		apiError(w, http.StatusTooManyRequests, "at most "+strconv.Itoa(cap(s.streamSlots))+" streams at once (--api-max-streams)")
		return
	}
	defer func() { <-s.streamSlots }()
	s.api.streams.Inc()
	defer s.api.streams.Dec()

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	log := s.opts.Log.WithField("remote", r.RemoteAddr)
	// The headers go out now, so the client knows the stream is open
	// before the first samples are in.
	if err := rc.Flush(); err != nil {
		return
	}

	send := func(b []byte) bool {
		// The server's WriteTimeout would cut a long stream; each write
		// gets its own deadline instead.
		if err := rc.SetWriteDeadline(time.Now().Add(s.opts.StreamWriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			log.WithError(err).Debug("Setting the stream write deadline failed")
		}
		_, err := w.Write(b)
		if err == nil {
			err = rc.Flush()
		}
		if err != nil {
			// A client that left is no news; one whose write timed out
			// did not keep up.
			var ne net.Error
			if errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
				s.api.streamDrops.WithLabelValues("slow").Inc()
				log.WithError(err).Info("Dropping a stream client that does not keep up")
			}
			return false
		}
		return true
	}

	cursors := map[string]int64{}
	if !sinceGiven {
		// Without since the stream starts now: the rings' past is what
		// /api/v1/samples is for.
		advance(cursors, res)
		res = nil
	}
	keepAlive := time.NewTicker(streamKeepAlive)
	defer keepAlive.Stop()
	var buf []byte
	for {
		updated := s.opts.Samples.Updated()
		if res == nil {
			q.After = cursors
			if res, err = s.opts.Samples.Samples(q); err != nil {
				// A reload dropped a field of the stream.
				buf = appendEvent(buf[:0], "error", mustJSON(map[string]string{"error": err.Error()}))
				send(buf)
				return
			}
		}
		if lagged(res) {
			s.api.streamDrops.WithLabelValues("lagged").Inc()
			buf = appendEvent(buf[:0], "error", mustJSON(map[string]string{"error": "the client fell behind the rings and lost samples; reconnect with since= the last timestamp read"}))
			send(buf)
			return
		}
		if res.Len() > 0 {
			body, err := json.Marshal(res)
			if err != nil {
				log.WithError(err).Warn("Encoding stream samples failed")
				return
			}
			buf = appendEvent(buf[:0], "samples", body)
			if !send(buf) {
				return
			}
		}
		advance(cursors, res)
		res = nil
		select {
		case <-updated:
		case <-keepAlive.C:
			if !send([]byte(": keep-alive\n\n")) {
				return
			}
		case <-r.Context().Done():
			return
		case <-s.shutdown:
			return
		}
	}
}

// advance moves each series' cursor to its newest sample. The map is
// rebuilt from the answer, so it holds only the series that still exist.
func advance(cursors map[string]int64, res *samples.Result) {
	next := make(map[string]int64, len(cursors))
	for _, e := range res.Entities {
		for _, s := range e.Series {
			k := samples.SeriesKey(e.Key, s.Field)
			if n := len(s.T); n > 0 {
				next[k] = s.T[n-1]
			} else if c, ok := cursors[k]; ok {
				next[k] = c
			} else {
				next[k] = res.Now
			}
		}
	}
	clear(cursors)
	for k, v := range next {
		cursors[k] = v
	}
}

func lagged(res *samples.Result) bool {
	for _, e := range res.Entities {
		for _, s := range e.Series {
			if s.Missed {
				return true
			}
		}
	}
	return false
}

func appendEvent(buf []byte, event string, data []byte) []byte {
	buf = append(buf, "event: "...)
	buf = append(buf, event...)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, data...)
	return append(buf, "\n\n"...)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(`{"error":"encoding failed"}`)
	}
	return b
}
