// Package server serves gpuscope's HTTP endpoints: /metrics, /health, /ready,
// the landing page, the profiling pause/resume API and the raw-sample API
// (/api/v1/samples, /api/v1/stream), behind the
// exporter-toolkit's TLS and basic-auth web config.
package server

import (
	"bytes"
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
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/internal/serve/toolkitlog"
	"github.com/gpuscope/gpuscope/source"
)

// Options configure the server.
type Options struct {
	Address       string
	WebConfigFile string
	Engine        Renderer
	// Protobuf serves the delimited protobuf exposition, with the native
	// histograms, to scrapers that negotiate it; false serves the text
	// format to every scraper.
	Protobuf bool
	// Gatherer holds gpuscope's own families (self metrics, enrichers),
	// gathered for each exposition and appended to the GPU series.
	Gatherer prometheus.Gatherer
	// Sampled holds own families that are gathered in the background every
	// SampleOwnEvery (DefaultSampleOwnEvery when 0) while the server
	// serves, and appended as last gathered: the Go runtime's and the
	// process's, which cost more than a render to gather.
	Sampled        prometheus.Gatherer
	SampleOwnEvery time.Duration
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
	// ReadTimeout bounds the reading of a whole request; 0: only the
	// headers are bounded (10 s).
	ReadTimeout time.Duration
	// MaxConcurrentScrapes bounds the /metrics requests served at once;
	// the excess is answered 503. 0: no bound beyond MaxConnections.
	MaxConcurrentScrapes int
	// Health, when set, is asked by /health: false answers 503 with the
	// reason.
	Health func() (ok bool, why string)
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
	opts Options
	mux  *http.ServeMux
	// text and proto share the snapshots of /metrics among scrapes of
	// each format.
	text, proto coalescer
	sampled     *sampledFamilies

	api  *apiMetrics
	auth *authGate
	// webConfig is the web config exporter-toolkit reads, with the default
	// cipher suites; nil without a web config.
	webConfig    *webConfigView
	streamSlots  chan struct{}
	requestSlots chan struct{}
	// shutdown is closed when the HTTP server shuts down, ending streams
	// that would otherwise hold the shutdown until its timeout.
	shutdown     chan struct{}
	shutdownOnce sync.Once
	conns        atomic.Int64 // connections open now
}

// reuseBodyFor is how long a /metrics snapshot is served again: the
// fastest fields are sampled every 100 ms, so a newer render would show
// nothing newer, and scrapers arriving together (an HA pair of Prometheus
// servers, say) share one render and one compression.
const reuseBodyFor = 100 * time.Millisecond

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
	if opts.SampleOwnEvery <= 0 {
		opts.SampleOwnEvery = DefaultSampleOwnEvery
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
	s.sampled = &sampledFamilies{g: opts.Sampled, every: opts.SampleOwnEvery, log: opts.Log}
	if opts.WebConfigFile != "" {
		v, err := newWebConfigView(opts.WebConfigFile)
		if err != nil {
			return nil, err
		}
		s.webConfig = v
	}
	s.text = coalescer{render: s.renderAll, maxAge: reuseBodyFor, now: opts.Now}
	s.proto = coalescer{render: s.renderAll, maxAge: reuseBodyFor, proto: true, now: opts.Now}
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
	s.mux.Handle("/metrics", readOnly(s.limitScrapes(http.HandlerFunc(s.metrics))))
	s.mux.Handle("/health", readOnly(http.HandlerFunc(s.health)))
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
		s.mux.Handle("/api/v1/sim/advance", crossSiteGuard(opts.SimClock))
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

// Exposition returns the text /metrics body as a scrape would get it now,
// or nil when the render failed.
func (s *Server) Exposition() []byte {
	b, err := s.text.get()
	if err != nil {
		s.opts.Log.WithError(err).Error("Rendering /metrics failed")
		return nil
	}
	defer s.text.release(b)
	var out bytes.Buffer
	_ = b.writeTo(&out) // a bytes.Buffer takes every write
	return out.Bytes()
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
	c, format := &s.text, textFormat
	if s.opts.Protobuf {
		w.Header().Add("Vary", "Accept")
		if wantsProto(r) {
			c, format = &s.proto, protoFormat
		}
	}
	b, err := c.get()
	if err != nil {
		s.opts.Log.WithError(err).Error("Rendering /metrics failed")
		http.Error(w, "rendering the exposition failed; gpuscope's log says why", http.StatusInternalServerError)
		return
	}
	defer c.release(b)
	h := w.Header()
	h.Set("Content-Type", string(format))
	if !acceptsGzip(r) {
		// The body goes out in pieces as it is formatted, from the
		// snapshot all scrapes of the moment share.
		if err := b.writeTo(w); err != nil {
			s.abort(err)
		}
		return
	}
	// Prometheus asks for gzip; an 8-GPU body shrinks about 17 times,
	// compressed once per snapshot at the fastest level, so its length is
	// known before it is sent.
	gz, err := b.gzipped()
	if err != nil {
		s.opts.Log.WithError(err).Error("Compressing /metrics failed")
		http.Error(w, "compressing the exposition failed", http.StatusInternalServerError)
		return
	}
	h.Set("Content-Encoding", "gzip")
	h.Add("Vary", "Accept-Encoding")
	h.Set("Content-Length", strconv.Itoa(len(gz)))
	if _, err := w.Write(gz); err != nil {
		s.abort(err)
	}
}

// abort ends a /metrics response whose body could not be written whole:
// net/http then closes the connection without ending the body, so the
// scraper sees a truncated response and not a shorter exposition.
func (s *Server) abort(err error) {
	s.opts.Log.WithError(err).Debug("Writing /metrics to the client failed")
	panic(http.ErrAbortHandler)
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

// crossSiteGuard refuses a POST a page of another site could send (a
// form), as the profiling API does: moving a simulated clock is a change.
func crossSiteGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && !notForgeable(r) {
			http.Error(w, "send the header "+ProfilingRequestHeader+" or a JSON body: a browser cannot forge either across sites", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
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
		ReadTimeout:       s.opts.ReadTimeout,
		IdleTimeout:       idle,
		// A streaming handler lifts this for its own response with
		// http.NewResponseController(w).SetWriteDeadline(time.Time{}).
		WriteTimeout:   write,
		MaxHeaderBytes: maxHeaderBytes,
		// Connections are counted as they are accepted, before TLS, so the
		// cap holds against clients that never finish a handshake.
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
			gateOnce.Do(func() { s.gateAuth(srv) })
			if s.webConfig != nil {
				// Before the handshake, which reads the web config.
				s.webConfig.sync()
			}
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
	next := srv.Handler
	s.auth.next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.webConfig.sync() // the toolkit reads the users at every request
		next.ServeHTTP(w, r)
	})
	srv.Handler = s.auth
}

// webConfigPath is the web config file exporter-toolkit reads: the
// effective copy, or "" without a web config.
func (s *Server) webConfigPath() string {
	if s.webConfig == nil {
		return ""
	}
	return s.webConfig.out
}

// ListenAndServe serves until ctx ends, with TLS and basic auth from the web
// config file when one is given.
func (s *Server) ListenAndServe(ctx context.Context) error {
	if s.opts.SystemdSocket {
		srv := s.httpServer()
		cfg, on := s.webConfigPath(), true
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
	cfg := s.webConfigPath()
	flags := &web.FlagConfig{WebConfigFile: &cfg, WebListenAddresses: &[]string{s.opts.Address}}
	logger := s.webLogger()
	s.serving(l.Addr().String())
	return s.run(ctx, srv, l.Addr().String(), func() error { return web.Serve(l, srv, flags, logger) })
}

// webLogger is exporter-toolkit's logger: its lines go through logrus, in
// gpuscope's --log-format and at its --log-level.
func (s *Server) webLogger() *slog.Logger {
	return toolkitlog.Logger(s.opts.Log.WithField("component", "web"))
}

func (s *Server) serving(addr string) {
	if s.opts.OnServing != nil {
		s.opts.OnServing(addr)
	}
}

// run serves until ctx ends, then shuts srv down.
func (s *Server) run(ctx context.Context, srv *http.Server, where string, serve func() error) error {
	if s.webConfig != nil {
		defer s.webConfig.remove()
	}
	srv.RegisterOnShutdown(s.endStreams)
	bg, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	go s.sampled.run(bg)
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
