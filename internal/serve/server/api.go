package server

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuscope/gpuscope/internal/sampleapi"
)

// SampleSource answers the raw-sample API from the engine's rings.
type SampleSource interface {
	Samples(q sampleapi.Query) (*sampleapi.Result, error)
	// Updated returns a channel closed when the next samples are in.
	Updated() <-chan struct{}
}

// DefaultMaxRequests is the number of /api/v1/samples answers built at
// once when the options do not say. Each holds a copy of the samples it
// answers with and their JSON, so a few at once keep memory within the
// chart's limit while scrapes stay fast.
const DefaultMaxRequests = 4

// DefaultMaxResponseBytes bounds one /api/v1/samples answer (and the first
// event of a stream) when the options do not say: a full 15 s window of 16
// fields on 8 GPUs with MIG is about 4 MB.
const DefaultMaxResponseBytes = 16 << 20

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
	streams         prometheus.Gauge
	streamsRefused  prometheus.Counter
	streamDrops     *prometheus.CounterVec
	requestsRefused *prometheus.CounterVec
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
	m.requestsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gpuscope_api_requests_refused_total",
		Help: "/api/v1/samples, /api/v1/stream, /fields and /fields.csv requests refused, by reason: busy (--api-max-requests answers or pages were being built, 429) or too_large (the answer would pass --api-max-bytes, 413).",
	}, []string{"reason"})
	m.streamDrops.WithLabelValues("slow")
	m.streamDrops.WithLabelValues("lagged")
	m.requestsRefused.WithLabelValues("busy")
	m.requestsRefused.WithLabelValues("too_large")
	return m
}

func (m *apiMetrics) register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.streams, m.streamsRefused, m.streamDrops, m.requestsRefused} {
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

// queryError answers a query the source refused: 400 with the reason for
// the user's mistakes, 413 for an answer past the byte bound, 500 for
// anything else.
func (s *Server) queryError(w http.ResponseWriter, err error) {
	var fe *sampleapi.FieldError
	var tl *sampleapi.TooLargeError
	switch {
	case errors.As(err, &fe):
		apiError(w, http.StatusBadRequest, err.Error())
	case errors.As(err, &tl):
		s.tooLarge(w)
	default:
		apiError(w, http.StatusInternalServerError, err.Error())
	}
}

// tooLarge answers 413 with the ways to ask for less.
func (s *Server) tooLarge(w http.ResponseWriter) {
	s.api.requestsRefused.WithLabelValues("too_large").Inc()
	apiError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the answer would be larger than %d bytes (--api-max-bytes): "+
		"ask for fewer fields (field=), fewer GPUs (gpu=) or a shorter past (since= a later Unix time in ns)", s.opts.MaxResponseBytes))
}

// samplesQuery checks what /api/v1/samples and /api/v1/stream both need
// (a GET, a server holding samples, a valid query) and answers the error
// itself when one is missing.
func (s *Server) samplesQuery(w http.ResponseWriter, r *http.Request) (sampleapi.Query, bool) {
	if !onlyGet(w, r) {
		return sampleapi.Query{}, false
	}
	if s.opts.Samples == nil {
		apiError(w, http.StatusNotImplemented, "this server holds no samples")
		return sampleapi.Query{}, false
	}
	q, err := sampleapi.ParseQuery(r.URL.Query())
	if err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return sampleapi.Query{}, false
	}
	// An answer of more samples than this cannot fit in the byte bound,
	// so the engine stops copying there.
	q.MaxSamples = max(1, s.opts.MaxResponseBytes/sampleapi.MinSampleBytes)
	return q, true
}

// takeRequestSlot takes one of the --api-max-requests slots, or answers
// 429 at once and counts the refusal; the caller frees a slot it took.
func (s *Server) takeRequestSlot(w http.ResponseWriter, refuse func(w http.ResponseWriter, code int, msg string)) bool {
	select {
	case s.requestSlots <- struct{}{}:
		return true
	default:
		s.api.requestsRefused.WithLabelValues("busy").Inc()
		w.Header().Set("Retry-After", "1")
		refuse(w, http.StatusTooManyRequests, fmt.Sprintf("at most %d answers are built at once (--api-max-requests); retry in a second", cap(s.requestSlots)))
		return false
	}
}

// bounded serves h within the --api-max-requests slots.
func (s *Server) bounded(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.takeRequestSlot(w, func(w http.ResponseWriter, code int, msg string) { http.Error(w, msg, code) }) {
			return
		}
		defer func() { <-s.requestSlots }()
		h.ServeHTTP(w, r)
	})
}

func (s *Server) samplesHandler(w http.ResponseWriter, r *http.Request) {
	q, ok := s.samplesQuery(w, r)
	if !ok {
		return
	}
	if !s.takeRequestSlot(w, apiError) {
		return
	}
	defer func() { <-s.requestSlots }()
	res, err := s.opts.Samples.Samples(q)
	if err != nil {
		s.queryError(w, err)
		return
	}
	body, err := json.Marshal(res)
	if err != nil {
		apiError(w, http.StatusInternalServerError, "encoding the samples: "+err.Error())
		return
	}
	if len(body) > s.opts.MaxResponseBytes {
		s.tooLarge(w)
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

// advance moves each series' cursor to its newest sample. The map is
// rebuilt from the answer, so it holds only the series that still exist.
func advance(cursors map[string]int64, res *sampleapi.Result) {
	next := make(map[string]int64, len(cursors))
	for _, e := range res.Entities {
		for _, s := range e.Series {
			k := sampleapi.SeriesKey(e.Key, s.Field)
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

func lagged(res *sampleapi.Result) bool {
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
