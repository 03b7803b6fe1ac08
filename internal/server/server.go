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
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/sirupsen/logrus"

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
	// StreamWriteTimeout is how long one stream event may take to reach
	// its client before the client is dropped; 10 s when 0.
	StreamWriteTimeout time.Duration
	// Registerer takes the API's own metrics; none are kept when nil.
	Registerer prometheus.Registerer
	Version    string
	Log        *logrus.Entry
}

// Server is gpuscope's HTTP server.
type Server struct {
	opts   Options
	mux    *http.ServeMux
	bodies coalescer

	api         *apiMetrics
	streamSlots chan struct{}
	// shutdown is closed when the HTTP server shuts down, ending streams
	// that would otherwise hold the shutdown until its timeout.
	shutdown     chan struct{}
	shutdownOnce sync.Once
}

// reuseBodyFor is how long a rendered /metrics body is served again: the
// fastest fields are sampled every 100 ms, so a newer render would show
// nothing newer, and scrapers arriving together (an HA pair of Prometheus
// servers, say) share one render and one compression.
const reuseBodyFor = 100 * time.Millisecond

// maxPooledBuffer keeps one huge exposition from pinning memory in the pool.
const maxPooledBuffer = 8 << 20

// New builds the handlers.
func New(opts Options) (*Server, error) {
	if opts.Log == nil {
		opts.Log = logrus.NewEntry(logrus.StandardLogger())
	}
	if opts.StreamWriteTimeout <= 0 {
		opts.StreamWriteTimeout = defaultStreamWriteTimeout
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = DefaultMaxStreams
	}
	s := &Server{opts: opts, mux: http.NewServeMux(), api: newAPIMetrics(),
		streamSlots: make(chan struct{}, opts.MaxStreams), shutdown: make(chan struct{})}
	if opts.Registerer != nil {
		if err := s.api.register(opts.Registerer); err != nil {
			return nil, fmt.Errorf("registering the API metrics: %w", err)
		}
	}
	s.bodies.render = s.renderAll
	s.bodies.maxAge = reuseBodyFor
	links := []web.LandingLinks{
		{Address: "metrics", Text: "Metrics", Description: "GPU series and gpuscope's own metrics"},
		{Address: "ready", Text: "Ready", Description: "Whether a source is up and the first sample is in"},
		{Address: "health", Text: "Health", Description: "Liveness"},
		{Address: "api/v1/samples?field=DCGM_FI_DEV_GPU_TEMP", Text: "Samples", Description: "The raw samples in memory, as JSON (field=, gpu=, since=)"},
	}
	// The toolkit's page links to the heap and CPU profiles unless told
	// not to; they exist only with Pprof.
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
	s.mux.HandleFunc("/metrics", s.metrics)
	s.mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	s.mux.HandleFunc("/ready", s.ready)
	s.mux.HandleFunc("/api/v1/profiling/pause", s.profiling(true))
	s.mux.HandleFunc("/api/v1/profiling/resume", s.profiling(false))
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

// Handler returns the server's routes, without TLS or authentication.
func (s *Server) Handler() http.Handler { return s.mux }

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	b := s.bodies.get()
	defer s.bodies.release(b)
	w.Header().Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	out := b.buf
	if acceptsGzip(r) {
		// Prometheus asks for gzip; an 8-GPU body shrinks about 17 times,
		// compressed once per render at the fastest level.
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Add("Vary", "Accept-Encoding")
		out = b.gzipped()
	}
	if _, err := w.Write(out); err != nil {
		s.opts.Log.WithError(err).Debug("Writing /metrics to the client failed")
	}
}

// acceptsGzip says whether the request's Accept-Encoding allows gzip.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.TrimSpace(enc) != "gzip" {
			continue
		}
		// "gzip;q=0" refuses it.
		q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
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

// ListenAndServe serves until ctx ends, with TLS and basic auth from the web
// config file when one is given.
func (s *Server) ListenAndServe(ctx context.Context) error {
	if s.opts.SystemdSocket {
		srv := &http.Server{Handler: s.mux, ReadHeaderTimeout: 10 * time.Second}
		cfg, on := s.opts.WebConfigFile, true
		flags := &web.FlagConfig{WebConfigFile: &cfg, WebSystemdSocket: &on, WebListenAddresses: &[]string{s.opts.Address}}
		logger := slog.New(slog.NewTextHandler(s.opts.Log.Logger.Out, nil))
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
	srv := &http.Server{Handler: s.mux, ReadHeaderTimeout: 10 * time.Second}
	cfg := s.opts.WebConfigFile
	flags := &web.FlagConfig{WebConfigFile: &cfg, WebListenAddresses: &[]string{s.opts.Address}}
	logger := slog.New(slog.NewTextHandler(s.opts.Log.Logger.Out, nil))
	return s.run(ctx, srv, l.Addr().String(), func() error { return web.Serve(l, srv, flags, logger) })
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
