// Package server serves gpuscope's HTTP endpoints: /metrics, /health, /ready,
// the landing page, the profiling pause/resume API and the raw-sample API
// (/api/v1/samples, /api/v1/stream), behind the
// exporter-toolkit's TLS and basic-auth web config.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/internal/serve/slogrus"
	"github.com/gpuscope/gpuscope/source"
)

// Renderer writes the GPU series of the last samples; the engine implements it.
type Renderer interface {
	Render(buf []byte) []byte
	Ready() (bool, string)
}

// Options configure the server.
type Options struct {
	Address       string
	WebConfigFile string
	Engine        Renderer
	// Families writes the GPU series with their native histograms in the
	// protobuf exposition, served with gpuscope's own families to scrapers
	// that negotiate it; nil serves the text format to every scraper.
	Families FamilySource
	// Gatherer holds gpuscope's own families (self metrics, Go and process
	// collectors, enrichers); it is appended to the GPU series.
	Gatherer prometheus.Gatherer
	// Profiling pauses and resumes DCGM profiling; nil when the source has
	// no profiling lock.
	Profiling source.ProfilingController
	// Pprof serves Go's profiles under /debug/pprof/ (dcgm-exporter's
	// --enable-pprof); off by default, since they expose internals.
	Pprof bool
	// SystemdSocket serves on the socket systemd passes in rather than on
	// Address (dcgm-exporter's --web-systemd-socket).
	SystemdSocket bool
	// Samples answers /api/v1/samples and /api/v1/stream; nil turns them off.
	Samples SampleSource
	// MaxStreams bounds the /api/v1/stream clients served at once;
	// DefaultMaxStreams when 0.
	MaxStreams int
	// MaxRequests bounds the /api/v1/samples answers and /fields pages
	// built at once; DefaultMaxRequests when 0.
	MaxRequests int
	// MaxResponseBytes bounds one /api/v1/samples answer and the first
	// event of a stream; DefaultMaxResponseBytes when 0.
	MaxResponseBytes int
	// StreamWriteTimeout is how long one stream event may take to reach
	// its client before the client is dropped; 10 s when 0.
	StreamWriteTimeout time.Duration
	// Registerer takes the API's own metrics; none are kept when nil.
	Registerer prometheus.Registerer
	Version    string
	Log        *logrus.Entry
	// EnableProfilingAPI registers POST /api/v1/profiling/{pause,resume}.
	// Off by default: without a web config anyone who reaches the port
	// could stop the profiling fields.
	EnableProfilingAPI bool
	// MaxConnections caps the connections served at once; the excess is
	// answered 503 and closed. 0 means DefaultMaxConnections.
	MaxConnections int
	// IdleTimeout and WriteTimeout bound how long a keep-alive connection
	// waits for its next request and how long a response may take to
	// write; 0 means the defaults below.
	IdleTimeout, WriteTimeout time.Duration
	// OnServing is called once the listener is bound, with its address,
	// so that "serving" is said only when it is true.
	OnServing func(addr string)
	// Fields serves /fields and /fields.csv (package fieldspage); nil
	// leaves them out.
	Fields http.Handler
	// Now is the clock a rendered body's age is measured on; time.Now when
	// nil. A simulated node on a manual clock gives its own, so that a
	// scrape after the clock moved renders again however little real time
	// passed.
	Now func() time.Time
	// SimClock, when set, serves POST /api/v1/sim/advance, which moves the
	// manual clock of a simulated node (package simclock).
	SimClock http.Handler
}

// Limits of the HTTP server. A scrape renders in well under a second even
// with full windows, so a response still writing after a minute is a
// client that stopped reading; Prometheus reuses a connection every scrape
// interval (up to a minute or two), so idle ones can go after two minutes.
const (
	DefaultMaxConnections = 1024
	DefaultIdleTimeout    = 2 * time.Minute
	DefaultWriteTimeout   = time.Minute
	readHeaderTimeout     = 10 * time.Second
	maxHeaderBytes        = 64 << 10
)

// ProfilingRequestHeader marks a request to the profiling API as not forged
// by a browser: a cross-site form or a no-cors fetch cannot set it.
const ProfilingRequestHeader = "X-Gpuscope-Request"

// Server is gpuscope's HTTP server.
type Server struct {
	opts   Options
	mux    *http.ServeMux
	bodies coalescer

	api          *apiMetrics
	auth         *authGate
	streamSlots  chan struct{}
	requestSlots chan struct{}
	// shutdown is closed when the HTTP server shuts down, ending streams
	// that would otherwise hold the shutdown until its timeout.
	shutdown     chan struct{}
	shutdownOnce sync.Once
	conns        atomic.Int64 // connections open now
}

// reuseBodyFor is how long a rendered /metrics body is served again: the
// fastest fields are sampled every 100 ms, so a newer render would show
// nothing newer, and scrapers arriving together (an HA pair of Prometheus
// servers, say) share one render and one compression.
const reuseBodyFor = 100 * time.Millisecond

// maxPooledBuffer keeps one huge exposition from pinning memory in the pool.
const maxPooledBuffer = 8 << 20

// setDefaults fills in the options left at 0.
func (opts *Options) setDefaults() {
	if opts.Log == nil {
		opts.Log = logrus.NewEntry(logrus.StandardLogger())
	}
	if opts.StreamWriteTimeout <= 0 {
		opts.StreamWriteTimeout = defaultStreamWriteTimeout
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = DefaultMaxStreams
	}
	if opts.MaxRequests <= 0 {
		opts.MaxRequests = DefaultMaxRequests
	}
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = DefaultMaxResponseBytes
	}
}

// New builds the handlers.
func New(opts Options) (*Server, error) {
	opts.setDefaults()
	s := &Server{opts: opts, mux: http.NewServeMux(), api: newAPIMetrics(),
		streamSlots: make(chan struct{}, opts.MaxStreams), requestSlots: make(chan struct{}, opts.MaxRequests),
		shutdown: make(chan struct{}), auth: newAuthGate(nil)}
	if opts.Registerer != nil {
		if err := s.api.register(opts.Registerer); err != nil {
			return nil, fmt.Errorf("registering the API metrics: %w", err)
		}
		if err := opts.Registerer.Register(s.auth.throttled); err != nil {
			return nil, fmt.Errorf("registering the authentication metrics: %w", err)
		}
	}
	s.bodies.render = s.renderAll
	s.bodies.maxAge = reuseBodyFor
	s.bodies.now = opts.Now
	links := []web.LandingLinks{
		{Address: "metrics", Text: "Metrics", Description: "GPU series and gpuscope's own metrics"},
		{Address: "ready", Text: "Ready", Description: "Whether a source is up and the first sample is in"},
		{Address: "health", Text: "Health", Description: "Liveness"},
		{Address: "api/v1/samples?field=DCGM_FI_DEV_GPU_TEMP", Text: "Samples", Description: "The raw samples in memory, as JSON (field=, gpu=, since=)"},
	}
	// The toolkit's page links to the heap and CPU profiles unless told
	// not to; they exist only with Pprof.
	if opts.Fields != nil {
		links = append(links, web.LandingLinks{Address: "fields", Text: "Fields", Description: "Pick the fields to collect, with what they cost; download the counters file"})
	}
	profiling := "false"
	if opts.Pprof {
		profiling = "true"
		links = append(links, web.LandingLinks{Address: "debug/pprof/", Text: "Profiles", Description: "Go runtime profiles (pprof)"})
	}
	landing, err := web.NewLandingPage(web.LandingConfig{
		Name:        "gpuscope",
		Description: "High-resolution GPU metrics from DCGM and NVML for Prometheus",
		Version:     opts.Version,
		Links:       links,
		Profiling:   profiling,
	})
	if err != nil {
		return nil, fmt.Errorf("building the landing page: %w", err)
	}
	s.mux.Handle("/", landing)
	s.mux.Handle("/metrics", readOnly(http.HandlerFunc(s.metrics)))
	s.mux.Handle("/health", readOnly(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})))
	s.mux.Handle("/ready", readOnly(http.HandlerFunc(s.ready)))
	if opts.EnableProfilingAPI {
		s.mux.HandleFunc("/api/v1/profiling/pause", s.profiling(true))
		s.mux.HandleFunc("/api/v1/profiling/resume", s.profiling(false))
	}
	if opts.Fields != nil {
		// A page holds a parsed exposition and its rendering: it takes one
		// of the samples API's slots.
		s.mux.Handle("/fields", readOnly(s.bounded(opts.Fields)))
		s.mux.Handle("/fields.csv", readOnly(s.bounded(opts.Fields)))
	}
	if opts.SimClock != nil {
		s.mux.Handle("/api/v1/sim/advance", opts.SimClock)
	}
	s.mux.HandleFunc("/api/v1/samples", s.samplesHandler)
	s.mux.HandleFunc("/api/v1/stream", s.stream)
	if opts.Pprof {
		s.mux.HandleFunc("/debug/pprof/", pprof.Index)
		s.mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		s.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		s.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		s.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return s, nil
}

// Exposition returns the /metrics body as a scrape would get it now.
func (s *Server) Exposition() []byte {
	b := s.bodies.get()
	defer s.bodies.release(b)
	return append([]byte(nil), b.buf...)
}

// Handler returns the server's routes, without TLS or authentication.
func (s *Server) Handler() http.Handler { return s.mux }

// readOnly answers 405 to anything but GET and HEAD.
func readOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "use GET or HEAD", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	b := s.bodies.get()
	defer s.bodies.release(b)
	if s.opts.Families != nil {
		w.Header().Add("Vary", "Accept")
		if wantsProto(r) {
			s.metricsProto(w, r, b)
			return
		}
	}
	w.Header().Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	out := b.buf
	if acceptsGzip(r) {
		// Prometheus asks for gzip; an 8-GPU body shrinks about 17 times,
		// compressed once per render at the fastest level.
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Add("Vary", "Accept-Encoding")
		out = b.gzipped()
	}
	s.writeMetrics(w, out)
}

// metricsProto answers a scrape that negotiated the protobuf exposition;
// should a family not encode, the text is served instead, as it is what
// the protobuf would have held but for the histograms.
func (s *Server) metricsProto(w http.ResponseWriter, r *http.Request, b *body) {
	gz := acceptsGzip(r)
	var out []byte
	var err error
	if gz {
		out, err = b.protoGzipped(s.opts.Families, s.opts.Gatherer, s.opts.Log)
	} else {
		out, err = b.protobuf(s.opts.Families, s.opts.Gatherer, s.opts.Log)
	}
	if err != nil {
		s.opts.Log.WithError(err).Warn("Serving /metrics as text: the protobuf exposition failed")
		w.Header().Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
		out = b.buf
		gz = false
	} else {
		w.Header().Set("Content-Type", string(protoFormat))
	}
	if gz {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Add("Vary", "Accept-Encoding")
	}
	s.writeMetrics(w, out)
}

func (s *Server) writeMetrics(w http.ResponseWriter, out []byte) {
	if _, err := w.Write(out); err != nil {
		s.opts.Log.WithError(err).Debug("Writing /metrics to the client failed")
	}
}

// acceptsGzip says whether the request's Accept-Encoding allows gzip
// (RFC 9110, 12.5.3): "gzip" or "*" with a q-value above 0, the explicit
// gzip entry winning over the wildcard.
func acceptsGzip(r *http.Request) bool {
	gzip, star := -1.0, -1.0
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, params, _ := strings.Cut(part, ";")
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil || f < 0 || f > 1 {
					f = 0
				}
				q = f
			}
		}
		switch enc = strings.ToLower(strings.TrimSpace(enc)); enc {
		case "gzip", "x-gzip":
			gzip = max(gzip, q)
		case "*":
			star = q
		}
	}
	if gzip >= 0 {
		return gzip > 0
	}
	return star > 0
}

// renderAll appends the GPU series and then gpuscope's own families.
func (s *Server) renderAll(buf []byte) []byte {
	buf = s.opts.Engine.Render(buf)
	if s.opts.Gatherer == nil {
		return buf
	}
	mfs, err := s.opts.Gatherer.Gather()
	if err != nil {
		s.opts.Log.WithError(err).Warn("Gathering gpuscope's own metrics failed; serving what was gathered")
	}
	bw := appendWriter{buf: buf}
	enc := expfmt.NewEncoder(&bw, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			s.opts.Log.WithError(err).WithField("family", mf.GetName()).Warn("Encoding a metric family failed")
		}
	}
	return bw.buf
}

type appendWriter struct{ buf []byte }

func (a *appendWriter) Write(p []byte) (int, error) {
	a.buf = append(a.buf, p...)
	return len(p), nil
}

func (s *Server) ready(w http.ResponseWriter, _ *http.Request) {
	ok, why := s.opts.Engine.Ready()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_, _ = w.Write([]byte(why + "\n"))
}

func (s *Server) profiling(pause bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "use POST", http.StatusMethodNotAllowed)
			return
		}
		if !notForgeable(r) {
			http.Error(w, "send the header "+ProfilingRequestHeader+" (gpuscope profiling does) or a JSON body: a browser cannot forge either across sites", http.StatusForbidden)
			return
		}
		if s.opts.Profiling == nil {
			http.Error(w, "this source holds no profiling lock (only DCGM does)", http.StatusNotImplemented)
			return
		}
		var err error
		action := "resumed"
		if pause {
			action = "paused"
			err = s.opts.Profiling.PauseProfiling()
		} else {
			err = s.opts.Profiling.ResumeProfiling()
		}
		if err != nil {
			s.opts.Log.WithError(err).WithField("pause", pause).Error("Changing the profiling state failed")
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		s.opts.Log.WithField("remote", r.RemoteAddr).Infof("Profiling %s on request", action)
		_, _ = w.Write([]byte("profiling " + action + "\n"))
	}
}

// endStreams ends the open /api/v1/stream responses.
func (s *Server) endStreams() { s.shutdownOnce.Do(func() { close(s.shutdown) }) }

// notForgeable says whether a request carries something a cross-site page
// cannot send without a CORS preflight, which gpuscope never grants: a
// custom header, or a content type other than the three a form may use.
func notForgeable(r *http.Request) bool {
	if r.Header.Get(ProfilingRequestHeader) != "" {
		return true
	}
	ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	switch strings.ToLower(strings.TrimSpace(ct)) {
	case "", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data":
		return false
	}
	return true
}

// overLimitKey marks, in a connection's context, one accepted past
// MaxConnections.
type overLimitKey struct{}

// httpServer is the http.Server every listener is served with: bounded
// headers, idle connections and writes, and a cap on open connections.
func (s *Server) httpServer() *http.Server {
	limit := int64(s.opts.MaxConnections)
	if limit <= 0 {
		limit = DefaultMaxConnections
	}
	var gateOnce sync.Once
	idle, write := s.opts.IdleTimeout, s.opts.WriteTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	if write <= 0 {
		write = DefaultWriteTimeout
	}
	var srv *http.Server
	srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if over, _ := r.Context().Value(overLimitKey{}).(bool); over {
				w.Header().Set("Connection", "close")
				w.Header().Set("Retry-After", "1")
				http.Error(w, "too many connections", http.StatusServiceUnavailable)
				return
			}
			s.mux.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idle,
		// A streaming handler lifts this for its own response with
		// http.NewResponseController(w).SetWriteDeadline(time.Time{}).
		WriteTimeout:   write,
		MaxHeaderBytes: maxHeaderBytes,
		// Connections are counted as they are accepted, before TLS, so the
		// cap holds against clients that never finish a handshake.
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
			gateOnce.Do(func() { s.gateAuth(srv) })
			if s.conns.Add(1) > limit {
				return context.WithValue(ctx, overLimitKey{}, true)
			}
			return ctx
		},
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateClosed || st == http.StateHijacked {
				s.conns.Add(-1)
			}
		},
	}
	return srv
}

// gateAuth puts the authentication gate in front of the handler
// exporter-toolkit installed for the web config's basic auth. The toolkit
// wraps srv.Handler inside web.Serve, just before it accepts; the first
// connection's ConnContext runs on the accepting goroutine before any
// connection is served, so the swap is seen by every request.
func (s *Server) gateAuth(srv *http.Server) {
	if s.opts.WebConfigFile == "" {
		return
	}
	s.auth.next = srv.Handler
	srv.Handler = s.auth
}

// ListenAndServe serves until ctx ends, with TLS and basic auth from the web
// config file when one is given.
func (s *Server) ListenAndServe(ctx context.Context) error {
	if s.opts.SystemdSocket {
		srv := s.httpServer()
		cfg, on := s.opts.WebConfigFile, true
		flags := &web.FlagConfig{WebConfigFile: &cfg, WebSystemdSocket: &on, WebListenAddresses: &[]string{s.opts.Address}}
		logger := s.webLogger()
		// systemd has bound the socket before gpuscope started.
		s.serving("the systemd socket")
		return s.run(ctx, srv, "the systemd socket", func() error { return web.ListenAndServe(srv, flags, logger) })
	}
	l, err := net.Listen("tcp", s.opts.Address)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.opts.Address, err)
	}
	return s.Serve(ctx, l)
}

// Serve serves on l until ctx ends.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	srv := s.httpServer()
	cfg := s.opts.WebConfigFile
	flags := &web.FlagConfig{WebConfigFile: &cfg, WebListenAddresses: &[]string{s.opts.Address}}
	logger := s.webLogger()
	s.serving(l.Addr().String())
	return s.run(ctx, srv, l.Addr().String(), func() error { return web.Serve(l, srv, flags, logger) })
}

// webLogger is exporter-toolkit's logger: its lines go through logrus, in
// gpuscope's --log-format and at its --log-level.
func (s *Server) webLogger() *slog.Logger {
	return slogrus.Logger(s.opts.Log.WithField("component", "web"))
}

func (s *Server) serving(addr string) {
	if s.opts.OnServing != nil {
		s.opts.OnServing(addr)
	}
}

// run serves until ctx ends, then shuts srv down.
func (s *Server) run(ctx context.Context, srv *http.Server, where string, serve func() error) error {
	srv.RegisterOnShutdown(s.endStreams)
	errc := make(chan error, 1)
	go func() { errc <- serve() }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving HTTP on %s: %w", where, err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := srv.Shutdown(sctx)
		if e := <-errc; e != nil && !errors.Is(e, http.ErrServerClosed) && err == nil {
			err = e
		}
		return err
	}
}
