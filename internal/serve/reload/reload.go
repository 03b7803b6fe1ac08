// Package reload re-reads the counters file on SIGHUP and when its content
// changes, and swaps it into the engine. A bad file is refused and the old
// set keeps running.
package reload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/counters"
)

// DefaultSettle is the pause between the two reads of a load.
const DefaultSettle = 50 * time.Millisecond

// errChanging is a file whose two reads differ: it is being written.
var errChanging = errors.New("changed between two reads (rewritten in place?): not loaded; the next poll or SIGHUP reads it again. Write a new file and rename it over the old one")

// DefaultReadTimeout bounds one read of the counters file. A local file
// reads in microseconds; a read that takes seconds is a hung network mount.
const DefaultReadTimeout = 5 * time.Second

// Watcher reloads one counters file.
type Watcher struct {
	Path string
	// Apply swaps a parsed set in; the engine's Reload.
	Apply func(*counters.Set) error
	// Poll is how often the file's content is compared; ConfigMap updates
	// swap a symlink, which polling sees where inotify on the file does not.
	Poll time.Duration
	Log  *logrus.Entry
	// ReadTimeout bounds each read of the file, so a read that hangs cannot
	// stop later polls and SIGHUPs from being answered.
	ReadTimeout time.Duration
	// ReadFile reads the file; counters.ReadFile, which refuses anything but
	// a regular file of at most 1 MiB.
	ReadFile func(path string) ([]byte, error)
	// Settle is the pause between the two reads of each load, which must
	// agree: a file rewritten in place (truncated, then written in parts)
	// reads as a prefix of itself between its writes, and a prefix of a
	// counters file parses.
	Settle time.Duration

	mu       sync.Mutex
	lastSum  []byte
	lastErr  string // the failure last logged by a poll; "" after a success
	inflight chan struct{}

	success   prometheus.Gauge
	successTS prometheus.Gauge
	reloads   *prometheus.CounterVec
}

// New returns a watcher for path whose current content is already loaded.
func New(path string, apply func(*counters.Set) error, poll time.Duration, log *logrus.Entry) *Watcher {
	w := &Watcher{
		Path: path, Apply: apply, Poll: poll, Log: log,
		ReadTimeout: DefaultReadTimeout,
		ReadFile:    counters.ReadFile,
		Settle:      DefaultSettle,
		success: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gpuscope_config_last_reload_successful",
			Help: "1 when the last load of the counters file succeeded, 0 when it was refused or could not be read and the previous set kept running.",
		}),
		successTS: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gpuscope_config_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last successful load of the counters file.",
		}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpuscope_config_reloads_total",
			Help: "Reloads of the counters file, by result (success or failure).",
		}, []string{"result"}),
	}
	w.success.Set(1)
	w.successTS.SetToCurrentTime()
	if b, err := w.read(); err == nil {
		w.lastSum = checksum(b)
	}
	return w
}

// Describe implements prometheus.Collector.
func (w *Watcher) Describe(ch chan<- *prometheus.Desc) {
	w.success.Describe(ch)
	w.successTS.Describe(ch)
	w.reloads.Describe(ch)
}

// Collect implements prometheus.Collector.
func (w *Watcher) Collect(ch chan<- prometheus.Metric) {
	w.success.Collect(ch)
	w.successTS.Collect(ch)
	w.reloads.Collect(ch)
}

func checksum(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

// read reads the file within ReadTimeout. A read past its deadline is left
// to finish on its own, and no other starts until it has: at most one
// goroutine is ever stuck on the file.
func (w *Watcher) read() ([]byte, error) {
	if w.inflight != nil {
		select {
		case <-w.inflight:
			w.inflight = nil
		default:
			return nil, fmt.Errorf("read counters file %s: an earlier read has not returned after %s", w.Path, w.ReadTimeout)
		}
	}
	type result struct {
		b   []byte
		err error
	}
	done := make(chan struct{})
	res := make(chan result, 1)
	go func() {
		defer close(done)
		b, err := w.readTwice()
		res <- result{b, err}
	}()
	timer := time.NewTimer(w.ReadTimeout + w.Settle)
	defer timer.Stop()
	select {
	case r := <-res:
		return r.b, r.err
	case <-timer.C:
		w.inflight = done
		return nil, fmt.Errorf("read counters file %s: no answer after %s", w.Path, w.ReadTimeout)
	}
}

// readTwice reads the file, waits Settle, and reads it again: only a
// content both reads agree on is loaded.
func (w *Watcher) readTwice() ([]byte, error) {
	b, err := w.ReadFile(w.Path)
	if err != nil {
		return nil, err
	}
	if w.Settle > 0 {
		time.Sleep(w.Settle)
	}
	again, err := w.ReadFile(w.Path)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(b, again) {
		return nil, fmt.Errorf("counters file %s %w", w.Path, errChanging)
	}
	return b, nil
}

// Run reloads on each signal from hup and on each content change, until ctx
// ends.
func (w *Watcher) Run(ctx context.Context, hup <-chan os.Signal) {
	var tick <-chan time.Time
	if w.Poll > 0 {
		t := time.NewTicker(w.Poll)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			w.Log.WithField("file", w.Path).Info("SIGHUP: reloading the counters file")
			w.Reload()
		case <-tick:
			w.Check()
		}
	}
}

// Check reads the file once and reloads it when its content changed. A file
// that cannot be read (gone, a directory, a dangling link, unreadable, not
// a regular file, too large) counts as a failed reload: it is logged once
// per distinct problem, and the previous set keeps running.
func (w *Watcher) Check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	b, err := w.read()
	if err != nil {
		// Whatever comes back next is loaded, even the same content.
		w.lastSum = nil
		w.failLocked(err, false)
		return
	}
	if sum := checksum(b); bytes.Equal(sum, w.lastSum) {
		return
	}
	w.Log.WithField("file", w.Path).Info("Counters file changed: reloading")
	w.loadLocked(b)
}

// Reload loads the file and applies it; a failure leaves the running set.
func (w *Watcher) Reload() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	b, err := w.read()
	if err != nil {
		w.lastSum = nil
		w.failLocked(err, true)
		return false
	}
	return w.loadLocked(b)
}

func (w *Watcher) loadLocked(b []byte) bool {
	w.lastSum = checksum(b)
	set, err := counters.Parse(w.Path, bytes.NewReader(b))
	if err == nil {
		err = w.Apply(set)
	}
	if err != nil {
		w.failLocked(err, true)
		return false
	}
	for _, warn := range set.Warnings {
		w.Log.WithField("file", w.Path).Warn(warn)
	}
	w.lastErr = ""
	w.success.Set(1)
	w.successTS.SetToCurrentTime()
	w.reloads.WithLabelValues("success").Inc()
	w.Log.WithFields(logrus.Fields{"file": w.Path, "fields": len(set.Fields)}).Info("Counters file reloaded")
	return true
}

// failLocked records a refused or unreadable file. A poll that finds the
// same problem again says nothing more; an explicit reload always answers.
func (w *Watcher) failLocked(err error, explicit bool) {
	w.success.Set(0)
	msg := err.Error()
	if !explicit && msg == w.lastErr {
		return
	}
	w.lastErr = msg
	w.reloads.WithLabelValues("failure").Inc()
	entry := w.Log.WithError(err).WithField("file", w.Path)
	var pe *counters.ParseError
	if errors.As(err, &pe) {
		entry.Error("Refused the new counters file; the previous fields keep running")
		return
	}
	entry.Error("Cannot read the counters file; the previous fields keep running")
}
