package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sort"
	"sync"
	"time"

	"github.com/gpuscope/gpuscope/internal/clock"
)

// maxLatencies bounds the latencies kept for the percentiles. Beyond it the
// recorder keeps a uniform reservoir of that many, so a long soak at high
// concurrency neither grows without end nor skews towards its start.
const maxLatencies = 1 << 20

// recorder collects scrape latencies and errors from all scrapers.
type recorder struct {
	mu        sync.Mutex
	lat       []float64 // seconds
	seen      uint64
	errors    uint64
	bytes     uint64
	firstErr  error
	rng       *rand.Rand
	limit     int
	maxLatSec float64
}

func newRecorder(limit int) *recorder {
	return &recorder{limit: limit, rng: rand.New(rand.NewPCG(1, 2))}
}

func (r *recorder) ok(d time.Duration, n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := d.Seconds()
	r.seen++
	r.bytes += uint64(n)
	r.maxLatSec = max(r.maxLatSec, s)
	if len(r.lat) < r.limit {
		r.lat = append(r.lat, s)
		return
	}
	if j := r.rng.Uint64N(r.seen); j < uint64(r.limit) {
		r.lat[j] = s
	}
}

func (r *recorder) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors++
	if r.firstErr == nil {
		r.firstErr = err
	}
}

// loadStats summarises the scrapes of a run.
type loadStats struct {
	scrapes, errors   uint64
	p50, p99, maxLat  float64 // seconds; NaN without a scrape
	perSecond         float64
	meanBytes         float64
	firstErr          error
	concurrency       int
	elapsed           time.Duration
	latenciesRetained int
}

func (r *recorder) stats(elapsed time.Duration) loadStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := append([]float64(nil), r.lat...)
	sort.Float64s(v)
	st := loadStats{
		scrapes: r.seen, errors: r.errors, firstErr: r.firstErr, elapsed: elapsed, latenciesRetained: len(v),
		p50:    percentile(v, 0.50),
		p99:    percentile(v, 0.99),
		maxLat: math.NaN(),
	}
	if r.seen > 0 {
		st.maxLat = r.maxLatSec
	}
	if elapsed > 0 {
		st.perSecond = float64(r.seen) / elapsed.Seconds()
	}
	if r.seen > 0 {
		st.meanBytes = float64(r.bytes) / float64(r.seen)
	}
	return st
}

// percentile of sorted values by linear interpolation between the closest
// ranks (the same definition as the engine's window percentiles); NaN when
// there is no value.
func percentile(sorted []float64, q float64) float64 {
	switch len(sorted) {
	case 0:
		return math.NaN()
	case 1:
		return sorted[0]
	}
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	if lo >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	frac := pos - float64(lo)
	return sorted[lo] + frac*(sorted[lo+1]-sorted[lo])
}

// checkLoopback refuses any target that is not a loopback address: the
// load generator is for measuring an exporter on this machine, never for
// sending load elsewhere.
func checkLoopback(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("-url %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("-url %q: scheme must be http or https", raw)
	}
	host := u.Hostname()
	if host == "localhost" {
		return u, nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("-url %q: host %q is not a loopback address (use 127.0.0.1, [::1] or localhost)", raw, host)
	}
	return u, nil
}

// scrapeLoop scrapes target until ctx ends, pausing pause between scrapes
// (0: back to back), and times each scrape on clk. A scrape cut short by the
// end of the run is not counted.
func scrapeLoop(ctx context.Context, client *http.Client, target string, pause time.Duration, rec *recorder, clk clock.Clock) {
	for ctx.Err() == nil {
		start := clk.Now()
		n, err := scrapeOnce(ctx, client, target)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			rec.fail(err)
		default:
			rec.ok(clk.Now().Sub(start), n)
		}
		if pause > 0 {
			t := clk.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
		}
	}
}

func scrapeOnce(ctx context.Context, client *http.Client, target string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, fmt.Errorf("building the request: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", target, err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return n, fmt.Errorf("GET %s: reading the body: %w", target, err)
	}
	if resp.StatusCode != http.StatusOK {
		return n, fmt.Errorf("GET %s: status %s", target, resp.Status)
	}
	return n, nil
}

// runLoad starts c scrapers against target for d and returns their stats;
// clk times each scrape, each pause and the run itself. With gz the scrapers ask for gzip and decompress,
// as Prometheus does.
func runLoad(ctx context.Context, target string, c int, d, pause, timeout time.Duration, gz bool, clk clock.Clock) loadStats {
	rec := newRecorder(maxLatencies)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	end := clk.NewTimer(d)
	defer end.Stop()
	go func() {
		select {
		case <-end.C():
			cancel()
		case <-ctx.Done():
		}
	}()
	tr := &http.Transport{MaxIdleConnsPerHost: max(c, 2), MaxConnsPerHost: max(c, 1), DisableCompression: !gz}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: timeout}
	start := clk.Now()
	var wg sync.WaitGroup
	for i := 0; i < c; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			scrapeLoop(ctx, client, target, pause, rec, clk)
		}()
	}
	wg.Wait()
	st := rec.stats(clk.Now().Sub(start))
	st.concurrency = c
	return st
}
