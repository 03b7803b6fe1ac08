package server

import (
	"crypto/sha256"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Bounds of the authentication gate.
const (
	// maxAuthChecks is how many requests with credentials not seen to
	// succeed may be checked at once. exporter-toolkit checks a password
	// its 100-entry cache does not hold with bcrypt (tens of milliseconds
	// of CPU), one at a time: two in flight keep a core's worth of work
	// ahead of any request at most.
	maxAuthChecks = 2
	// maxKnownAuth bounds the credentials remembered as good.
	maxKnownAuth = 64
)

// authGate stands in front of exporter-toolkit's basic auth and bounds what
// failed authentication costs. A storm of distinct wrong passwords evicts
// the right one from the toolkit's cache and queues every check behind one
// lock, so a correct scrape waited for all of them (10.9 s with 3,000 from
// 150 clients). Credentials seen to succeed pass straight on; others are
// checked at most maxAuthChecks at a time and refused with 429 past that,
// before any bcrypt. The gate only orders the work: every request is still
// authenticated by the toolkit.
type authGate struct {
	next      http.Handler
	slots     chan struct{}
	throttled prometheus.Counter

	mu    sync.Mutex
	known map[[sha256.Size]byte]uint64 // credential digest -> last use
	tick  uint64
}

func newAuthGate(next http.Handler) *authGate {
	return &authGate{
		next:  next,
		slots: make(chan struct{}, maxAuthChecks),
		throttled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gpuscope_http_auth_throttled_total",
			Help: "Requests with credentials not seen to succeed refused with 429 while " +
				"other such credentials were being checked (a storm of wrong passwords).",
		}),
		known: map[[sha256.Size]byte]uint64{},
	}
}

func (g *authGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cred := r.Header.Get("Authorization")
	if cred == "" {
		g.next.ServeHTTP(w, r)
		return
	}
	key := sha256.Sum256([]byte(cred))
	if g.isKnown(key) {
		g.next.ServeHTTP(w, r)
		return
	}
	select {
	case g.slots <- struct{}{}:
	default:
		g.throttled.Inc()
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many authentication attempts at once; retry in a second", http.StatusTooManyRequests)
		return
	}
	// The slot is held until the toolkit has answered, not for the whole
	// response: a stream authenticated this way must not keep it.
	var once sync.Once
	release := func(code int) {
		once.Do(func() {
			<-g.slots
			// Only a success says the credential is good: a broken web
			// config answers 500 to every credential, and remembering
			// those would let junk push the scrapers' out.
			if code >= 200 && code < 400 {
				g.remember(key)
			}
		})
	}
	defer release(http.StatusOK)
	g.next.ServeHTTP(&statusWriter{ResponseWriter: w, onHeader: release}, r)
}

func (g *authGate) isKnown(key [sha256.Size]byte) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.known[key]; ok {
		g.tick++
		g.known[key] = g.tick
		return true
	}
	return false
}

// remember keeps key as good, forgetting the least recently used past
// maxKnownAuth.
func (g *authGate) remember(key [sha256.Size]byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.known) >= maxKnownAuth {
		var oldest [sha256.Size]byte
		first := true
		for k, t := range g.known {
			if first || t < g.known[oldest] {
				oldest, first = k, false
			}
		}
		delete(g.known, oldest)
	}
	g.tick++
	g.known[key] = g.tick
}

func (g *authGate) knownLen() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.known)
}

// statusWriter reports the status of a response as it is written.
type statusWriter struct {
	http.ResponseWriter
	onHeader func(code int)
}

func (s *statusWriter) WriteHeader(code int) {
	s.onHeader(code)
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	s.onHeader(http.StatusOK)
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flushes and
// write deadlines of streams).
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
