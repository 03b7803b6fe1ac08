// Command gpuscope-load measures a running gpuscope on this machine: it
// scrapes /metrics with concurrent clients for a fixed duration and reports
// the latency percentiles and errors, while it samples the exporter's CPU
// time and resident memory from /proc and, optionally, sends it SIGHUP
// reloads. It only targets loopback addresses and always stops by itself.
//
//	gpuscope-load -url http://127.0.0.1:9400/metrics -c 10 -d 30s
//	gpuscope-load -pid 1234 -c 0 -d 60s            # CPU and RSS only
//	gpuscope-load -pid 1234 -c 50 -pause 1s -hup 1m -d 20m
//
// The result is one line of key=value pairs, for scripts.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/internal/clock"
)

// maxDuration bounds a run, so a typo cannot leave load running for days.
const maxDuration = 24 * time.Hour

// maxProcSamples bounds the /proc samples of a run (a day at 1 s).
const maxProcSamples = 86_400

type config struct {
	url         string
	concurrency int
	duration    time.Duration
	pause       time.Duration
	timeout     time.Duration
	pid         int
	sample      time.Duration
	warmup      time.Duration
	hup         time.Duration
	procRoot    string
	gzip        bool
	// idle and slow open that many held connections instead of scraping.
	idle, slow int
	// hostile serves a broken or hostile raw-sample API instead.
	hostile string
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("gpuscope-load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.url, "url", "http://127.0.0.1:9400/metrics", "URL to scrape; loopback hosts only")
	fs.IntVar(&c.concurrency, "c", 1, "concurrent scrapers (0: only sample the process)")
	fs.DurationVar(&c.duration, "d", 10*time.Second, "duration of the run")
	fs.DurationVar(&c.pause, "pause", 0, "pause of each scraper between scrapes (0: back to back)")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "timeout of one scrape")
	fs.IntVar(&c.pid, "pid", 0, "process whose CPU time and RSS are sampled from /proc (0: none)")
	fs.DurationVar(&c.sample, "sample", time.Second, "interval of the /proc samples")
	fs.DurationVar(&c.warmup, "warmup", 30*time.Second, "start of the run left out of the RSS drift")
	fs.DurationVar(&c.hup, "hup", 0, "send SIGHUP to -pid at this interval (0: never)")
	fs.StringVar(&c.procRoot, "proc", "/proc", "proc file system")
	fs.BoolVar(&c.gzip, "gzip", false, "ask for gzip and decompress, as Prometheus does")
	fs.IntVar(&c.idle, "idle", 0, "open this many keep-alive connections, one request each, then hold them idle until the server closes them or -d ends")
	fs.IntVar(&c.slow, "slowloris", 0, "open this many connections that send headers one line a second and never finish, until the server closes them or -d ends")
	fs.StringVar(&c.hostile, "hostile", "", "serve a broken or hostile /api/v1 on the -url address for -d, instead of measuring: "+hostileModeList())
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.hostile != "" {
		if c.duration <= 0 || c.duration > maxDuration {
			return c, fmt.Errorf("-d %s: must be between 0 and %s", c.duration, maxDuration)
		}
		if _, ok := hostileModes[c.hostile]; !ok {
			return c, fmt.Errorf("-hostile %q: use one of %s", c.hostile, hostileModeList())
		}
		_, err := checkLoopback(c.url)
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	switch {
	case c.duration <= 0 || c.duration > maxDuration:
		return c, fmt.Errorf("-d %s: must be between 0 and %s", c.duration, maxDuration)
	case c.concurrency < 0 || c.concurrency > 10_000:
		return c, fmt.Errorf("-c %d: must be between 0 and 10000", c.concurrency)
	case c.idle < 0 || c.slow < 0 || c.idle > 20_000 || c.slow > 20_000 || (c.idle > 0 && c.slow > 0):
		return c, errors.New("-idle and -slowloris: one of them, at most 20000 connections")
	case (c.idle > 0 || c.slow > 0) && c.concurrency > 0:
		return c, errors.New("-idle and -slowloris hold connections; set -c 0")
	case c.concurrency == 0 && c.pid == 0 && c.idle == 0 && c.slow == 0:
		return c, errors.New("-c 0 needs -pid: there is nothing to measure")
	case c.pid < 0:
		return c, fmt.Errorf("-pid %d: must be positive", c.pid)
	case c.hup > 0 && c.pid == 0:
		return c, errors.New("-hup needs -pid")
	case c.pause < 0 || c.timeout <= 0 || c.warmup < 0 || c.hup < 0:
		return c, errors.New("-pause, -warmup and -hup must not be negative, -timeout must be positive")
	case c.pid > 0 && (c.sample <= 0 || c.duration/c.sample > maxProcSamples):
		return c, fmt.Errorf("-sample %s: must be positive and give at most %d samples over -d %s", c.sample, maxProcSamples, c.duration)
	}
	if c.concurrency > 0 || c.idle > 0 || c.slow > 0 {
		if _, err := checkLoopback(c.url); err != nil {
			return c, err
		}
	}
	return c, nil
}

func main() {
	log := logrus.NewEntry(logrus.StandardLogger())
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		log.WithError(err).Fatal("Bad command line")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	line, err := run(ctx, cfg, log)
	if err != nil {
		log.WithError(err).Fatal("Load run failed")
	}
	fmt.Println(line)
}

// run does one measurement and formats its result line.
func run(ctx context.Context, cfg config, log *logrus.Entry) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	if cfg.hostile != "" {
		return runHostile(ctx, cfg.url, cfg.hostile)
	}
	if cfg.idle > 0 || cfg.slow > 0 {
		u, err := checkLoopback(cfg.url)
		if err != nil {
			return "", err
		}
		mode, n := "idle", cfg.idle
		if cfg.slow > 0 {
			mode, n = "slowloris", cfg.slow
		}
		st, err := runConns(ctx, u.Host, n, cfg.slow > 0, cfg.pid, cfg.procRoot)
		if err != nil {
			return "", err
		}
		return st.line(mode), nil
	}
	var (
		wg      sync.WaitGroup
		samples []procSample
		procErr error
		hups    int
	)
	if cfg.pid > 0 {
		first, err := readProc(cfg.procRoot, cfg.pid)
		if err != nil {
			return "", err
		}
		samples = append(samples, first)
		wg.Add(1)
		go func() {
			defer wg.Done()
			samples, hups, procErr = watchProc(ctx, cfg, samples, log)
		}()
	}
	var ls loadStats
	if cfg.concurrency > 0 {
		ls = runLoad(ctx, cfg.url, cfg.concurrency, cfg.duration, cfg.pause, cfg.timeout, cfg.gzip, clock.Real)
	}
	wg.Wait()
	if procErr != nil {
		return "", procErr
	}
	var b strings.Builder
	if cfg.concurrency > 0 {
		if ls.firstErr != nil {
			log.WithError(ls.firstErr).WithField("errors", ls.errors).Warn("Some scrapes failed")
		}
		fmt.Fprintf(&b, "concurrency=%d scrapes=%d errors=%d rate_per_s=%.1f p50_ms=%s p99_ms=%s max_ms=%s body_bytes=%.0f",
			ls.concurrency, ls.scrapes, ls.errors, ls.perSecond, ms(ls.p50), ms(ls.p99), ms(ls.maxLat), ls.meanBytes)
	}
	if cfg.pid > 0 {
		ps := summariseProc(samples, cfg.warmup)
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "pid=%d cpu_pct=%.3f cpu_s=%.2f wall_s=%.3f rss_max_mib=%.1f rss_anon_max_mib=%.1f rss_early_mib=%.1f rss_late_mib=%.1f rss_drift_pct=%.2f proc_samples=%d hups=%d",
			cfg.pid, ps.cpuPct, ps.cpuSec, ps.wallSec, ps.rssMaxMiB, ps.anonMaxMiB, ps.rssEarlyMiB, ps.rssLateMiB, ps.driftPct, ps.samples, hups)
	}
	return b.String(), nil
}

// watchProc samples the process every cfg.sample and sends it SIGHUP every
// cfg.hup until ctx ends; the last sample is taken at the end of the run so
// the CPU figure covers all of it.
func watchProc(ctx context.Context, cfg config, samples []procSample, log *logrus.Entry) ([]procSample, int, error) {
	tick := time.NewTicker(cfg.sample)
	defer tick.Stop()
	var hupC <-chan time.Time
	if cfg.hup > 0 {
		h := time.NewTicker(cfg.hup)
		defer h.Stop()
		hupC = h.C
	}
	hups := 0
	for {
		select {
		case <-ctx.Done():
			s, err := readProc(cfg.procRoot, cfg.pid)
			if err != nil {
				return samples, hups, fmt.Errorf("last sample: %w", err)
			}
			return append(samples, s), hups, nil
		case <-tick.C:
			s, err := readProc(cfg.procRoot, cfg.pid)
			if err != nil {
				return samples, hups, err
			}
			if len(samples) < maxProcSamples {
				samples = append(samples, s)
			}
		case <-hupC:
			if err := syscall.Kill(cfg.pid, syscall.SIGHUP); err != nil {
				return samples, hups, fmt.Errorf("sending SIGHUP to pid %d: %w", cfg.pid, err)
			}
			hups++
			log.WithFields(logrus.Fields{"pid": cfg.pid, "hups": hups}).Debug("Sent SIGHUP")
		}
	}
}

// ms formats seconds as milliseconds; NaN says there was no scrape.
func ms(sec float64) string {
	if math.IsNaN(sec) {
		return "NaN"
	}
	return fmt.Sprintf("%.3f", sec*1000)
}
