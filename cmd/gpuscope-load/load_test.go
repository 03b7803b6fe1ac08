package main

import (
	"bytes"
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/clock"
	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
)

func TestPercentile(t *testing.T) {
	tests := []struct {
		name   string
		sorted []float64
		q      float64
		want   float64
	}{
		{"one value", []float64{7}, 0.99, 7},
		{"median of an even count interpolates", []float64{1, 2, 3, 4}, 0.5, 2.5},
		{"p99 of 1..101 is 100", seq(1, 101), 0.99, 100},
		{"p99 between ranks", seq(1, 100), 0.99, 99.01},
		{"max", []float64{1, 5, 9}, 1, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.InDelta(t, tt.want, percentile(tt.sorted, tt.q), 1e-9)
		})
	}
	assert.True(t, math.IsNaN(percentile(nil, 0.5)), "no sample has no percentile")
}

func seq(from, to int) []float64 {
	var v []float64
	for i := from; i <= to; i++ {
		v = append(v, float64(i))
	}
	return v
}

func TestRecorderKeepsABoundedReservoir(t *testing.T) {
	r := newRecorder(100)
	for i := 0; i < 10_000; i++ {
		r.ok(time.Duration(i)*time.Microsecond, 10)
	}
	st := r.stats(time.Second)
	assert.Equal(t, uint64(10_000), st.scrapes)
	assert.Equal(t, 100, st.latenciesRetained)
	// A uniform reservoir of 0..10ms has its median near 5ms, not near the
	// start of the run.
	assert.InDelta(t, 0.005, st.p50, 0.0015)
	assert.InDelta(t, 0.009999, st.maxLat, 1e-9)
	assert.Equal(t, 10.0, st.meanBytes)
}

func TestCheckLoopback(t *testing.T) {
	tests := []struct {
		url, err string
	}{
		{url: "http://127.0.0.1:9400/metrics"},
		{url: "http://[::1]:9400/metrics"},
		{url: "http://localhost:9400/metrics"},
		{url: "http://10.0.0.5:9400/metrics", err: `host "10.0.0.5" is not a loopback address`},
		{url: "http://example.com/metrics", err: "is not a loopback address"},
		{url: "ftp://127.0.0.1/metrics", err: "scheme must be http or https"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			_, err := checkLoopback(tt.url)
			if tt.err == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tt.err)
		})
	}
}

func TestParseFlagsRejectsBadRuns(t *testing.T) {
	tests := []struct {
		args []string
		err  string
	}{
		{[]string{"-d", "0s"}, "-d 0s"},
		{[]string{"-d", "48h"}, "-d 48h0m0s"},
		{[]string{"-c", "0"}, "-c 0 needs -pid"},
		{[]string{"-hup", "1m"}, "-hup needs -pid"},
		{[]string{"-url", "http://192.168.1.1/metrics"}, "not a loopback address"},
		{[]string{"-pid", "1", "-sample", "1ms", "-d", "24h"}, "-sample 1ms"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := parseFlags(tt.args, &bytes.Buffer{})
			assert.ErrorContains(t, err, tt.err)
		})
	}
	c, err := parseFlags([]string{"-c", "10", "-d", "2s"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, 10, c.concurrency)
	assert.Equal(t, 2*time.Second, c.duration)
}

func TestRunLoadCountsScrapesAndErrors(t *testing.T) {
	var n atomic.Int64
	clk := clock.NewFake(time.Unix(1_750_000_000, 0))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// Every fourth scrape fails, so errors are counted apart from the
		// latencies.
		if n.Add(1)%4 == 0 {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		// Each answer takes 2ms of the scrapers' clock.
		clk.Add(2 * time.Millisecond)
		_, _ = w.Write([]byte("up 1\n"))
	}))
	defer srv.Close()
	// The run lasts 300ms of the scrapers' clock: 150 answers of 2ms.
	st := runLoad(context.Background(), srv.URL, 4, 300*time.Millisecond, 0, time.Second, false, clk)
	require.Greater(t, st.scrapes, uint64(100))
	assert.Equal(t, 4, st.concurrency)
	assert.InDelta(t, float64(st.scrapes)/3, float64(st.errors), float64(st.scrapes)/6+2, "about one scrape in four fails")
	assert.ErrorContains(t, st.firstErr, "500")
	assert.GreaterOrEqual(t, st.p50, 0.002, "latency includes the handler's 2ms")
	assert.GreaterOrEqual(t, st.p99, st.p50)
	assert.Equal(t, 5.0, st.meanBytes)
}

// TestRunLoadHonoursThePause drives the scrapers' clock by hand: each
// scraper scrapes, then waits out its pause, so every 100ms of the run adds
// exactly one scrape per scraper.
func TestRunLoadHonoursThePause(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		_, _ = w.Write([]byte("up 1\n"))
	}))
	defer srv.Close()
	clk := clock.NewFake(time.Unix(1_750_000_000, 0))
	done := make(chan loadStats, 1)
	go func() {
		done <- runLoad(context.Background(), srv.URL, 2, 450*time.Millisecond, 100*time.Millisecond, time.Second, true, clk)
	}()
	// The run's own timer and one pause per scraper.
	for step := 1; step <= 4; step++ {
		require.True(t, clk.WaitForTimers(3, testwait.Timeout), "both scrapers pausing before step %d", step)
		assert.Equal(t, int64(2*step), n.Load(), "one scrape per scraper per pause, step %d", step)
		clk.Add(100 * time.Millisecond)
	}
	require.True(t, clk.WaitForTimers(3, testwait.Timeout), "both scrapers pausing at the end")
	assert.Equal(t, int64(10), n.Load(), "no scrape before the pause is over")
	clk.Add(50 * time.Millisecond)
	var st loadStats
	select {
	case st = <-done:
	case <-time.After(testwait.Timeout):
		t.Fatal("the run did not end when its 450ms had passed")
	}
	// Scrapes at 0, 100, 200, 300 and 400ms, none after 450ms.
	assert.Equal(t, uint64(10), st.scrapes)
	assert.Equal(t, int64(10), n.Load())
	assert.Zero(t, st.errors)
	assert.Equal(t, 450*time.Millisecond, st.elapsed)
}

func TestParseStatCPU(t *testing.T) {
	tests := []struct {
		name, stat string
		want       uint64
		err        string
	}{
		{
			name: "plain name",
			stat: "4242 (gpuscope) S 1 4242 4242 0 -1 4194560 1234 0 0 0 150 42 0 0 20 0 9 0 100 1000 500 18446744073709551615",
			want: 192,
		},
		{
			name: "name with spaces and parentheses",
			stat: "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 1 1 1 1",
			want: 7,
		},
		{name: "no name", stat: "7 R 1", err: "no command name"},
		{name: "truncated", stat: "7 (x) R 1 2", err: "only 3 fields"},
		{name: "bad utime", stat: "7 (x) R 1 7 7 0 -1 0 0 0 0 0 x 4 0", err: "field 14 (utime)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatCPU([]byte(tt.stat))
			if tt.err != "" {
				assert.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseStatusRSS(t *testing.T) {
	rss, anon, err := parseStatusRSS([]byte("Name:\tgpuscope\nVmPeak:\t  900 kB\nVmRSS:\t   23456 kB\nRssAnon:\t 5000 kB\nRssFile:\t 18456 kB\nThreads:\t9\n"))
	require.NoError(t, err)
	assert.Equal(t, uint64(23456), rss)
	assert.Equal(t, uint64(5000), anon)
	_, _, err = parseStatusRSS([]byte("Name:\tzombie\n"))
	assert.ErrorContains(t, err, "no VmRSS line")
	_, _, err = parseStatusRSS([]byte("VmRSS:\t12 MB\n"))
	assert.ErrorContains(t, err, `want "VmRSS: <n> kB"`)
}

// TestReadProcOfThisProcess reads the test's own /proc entries: its CPU time
// grows while it spins and its RSS is that of a running Go program.
func TestReadProcOfThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc on this system")
	}
	a, err := readProc("/proc", os.Getpid())
	require.NoError(t, err)
	// Spin until the CPU time read from /proc grows: on a loaded machine a
	// fixed spell of wall time may not earn the process a single tick.
	var b procSample
	testwait.For(t, "spinning to show in the CPU time", func() bool {
		for end := time.Now().Add(10 * time.Millisecond); time.Now().Before(end); {
		}
		b, err = readProc("/proc", os.Getpid())
		require.NoError(t, err)
		return b.cpuTicks > a.cpuTicks
	})
	assert.Greater(t, b.rssKiB, uint64(1024), "a Go test binary holds more than 1 MiB")
	assert.Greater(t, b.anonKiB, uint64(0))
	assert.Less(t, b.anonKiB, b.rssKiB)
	_, err = readProc(t.TempDir(), 1)
	assert.ErrorContains(t, err, "reading CPU time of pid 1")
}

func TestSummariseProc(t *testing.T) {
	t0 := time.Unix(0, 0)
	var s []procSample
	// 100s at 1s: 10 ticks (0.1s of CPU) per second, RSS 20 MiB during the
	// 30s warm-up, then 30 MiB, growing to 33 MiB over the last quarter.
	for i := 0; i <= 100; i++ {
		rss := uint64(20 << 10)
		switch {
		case i >= 80:
			rss = 33 << 10
		case i >= 30:
			rss = 30 << 10
		}
		s = append(s, procSample{at: t0.Add(time.Duration(i) * time.Second), cpuTicks: uint64(10 * i), rssKiB: rss})
	}
	st := summariseProc(s, 30*time.Second)
	assert.InDelta(t, 10.0, st.cpuPct, 1e-9, "10 ticks per second is 10% of a core")
	assert.InDelta(t, 10.0, st.cpuSec, 1e-9, "1000 ticks in all")
	assert.InDelta(t, 100.0, st.wallSec, 1e-9)
	assert.Equal(t, 33.0, st.rssMaxMiB)
	assert.Equal(t, 30.0, st.rssEarlyMiB, "the warm-up is left out")
	assert.Equal(t, 33.0, st.rssLateMiB)
	assert.InDelta(t, 10.0, st.driftPct, 1e-9)
	assert.Equal(t, 101, st.samples)
}

func TestRunReportsProcessAndLoad(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("up 1\n"))
	}))
	defer srv.Close()
	cfg := config{url: srv.URL, concurrency: 2, duration: 300 * time.Millisecond, timeout: time.Second,
		pid: os.Getpid(), sample: 50 * time.Millisecond, procRoot: "/proc"}
	if _, err := os.Stat(filepath.Join(cfg.procRoot, "self", "stat")); err != nil {
		t.Skip("no /proc on this system")
	}
	l := logrus.New()
	l.SetOutput(&bytes.Buffer{})
	line, err := run(context.Background(), cfg, logrus.NewEntry(l))
	require.NoError(t, err)
	for _, k := range []string{"concurrency=2 ", " errors=0 ", " p50_ms=", " p99_ms=", " cpu_pct=", " cpu_s=", " wall_s=", " rss_max_mib=", " rss_anon_max_mib=", " rss_drift_pct=", " hups=0"} {
		assert.Contains(t, line, k)
	}
	assert.NotContains(t, line, "NaN")
}

// TestRunConnsCountsWhatTheServerCloses holds idle and slowloris
// connections against a server with short timeouts: every one is counted
// as closed by the server, and none past the cap stays open.
func TestRunConnsCountsWhatTheServerCloses(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	}))
	srv.Config.IdleTimeout = 100 * time.Millisecond
	srv.Config.ReadHeaderTimeout = 1500 * time.Millisecond
	srv.Start()
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, slow := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		st, err := runConns(ctx, host, 20, slow, 0, "/proc")
		cancel()
		require.NoError(t, err)
		assert.Equal(t, 20, st.opened, "slow=%v", slow)
		assert.Equal(t, 20, st.closed, "slow=%v: %s", slow, st.line("x"))
		if !slow {
			assert.Equal(t, 20, st.ok)
		}
	}
}
