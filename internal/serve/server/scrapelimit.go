package server

import (
	"net/http"
)

// limitScrapes answers 503 to a /metrics request past
// Options.MaxConcurrentScrapes, as dcgm-exporter's --max-concurrent-scrapes
// does; the admitted ones still share one rendering (coalescer).
func (s *Server) limitScrapes(next http.Handler) http.Handler {
	if s.opts.MaxConcurrentScrapes <= 0 {
		return next
	}
	slots := make(chan struct{}, s.opts.MaxConcurrentScrapes)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
			next.ServeHTTP(w, r)
		default:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many concurrent scrapes (--max-concurrent-scrapes)", http.StatusServiceUnavailable)
		}
	})
}

// health answers /health: ok, or 503 with the reason while Options.Health
// says the exporter cannot serve what it should (dcgm-exporter's
// --health-require-gpus: no GPU seen).
func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if s.opts.Health != nil {
		if ok, why := s.opts.Health(); !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(why + "\n"))
			return
		}
	}
	_, _ = w.Write([]byte("ok\n"))
}
