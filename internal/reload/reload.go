// Package reload re-reads the counters file on SIGHUP and when its content
// changes, and swaps it into the engine. A bad file is refused and the old
// set keeps running.
package reload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/counters"
)

// Watcher reloads one counters file.
type Watcher struct {
	Path string
	// Apply swaps a parsed set in; the engine's Reload.
	Apply func(*counters.Set) error
	// Poll is how often the file's content is compared; ConfigMap updates
	// swap a symlink, which polling sees where inotify on the file does not.
	Poll time.Duration
	Log  *logrus.Entry

	lastSum []byte

	success   prometheus.Gauge
	successTS prometheus.Gauge
	reloads   *prometheus.CounterVec
}

// New returns a watcher for path whose current content is already loaded.
func New(path string, apply func(*counters.Set) error, poll time.Duration, log *logrus.Entry) *Watcher {
	w := &Watcher{
		Path: path, Apply: apply, Poll: poll, Log: log,
		success: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gpuscope_config_last_reload_successful",
			Help: "1 when the last load of the counters file succeeded, 0 when it was refused and the previous set kept running.",
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
	w.lastSum = w.sum()
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

func (w *Watcher) sum() []byte {
	b, err := os.ReadFile(w.Path)
	if err != nil {
		return nil
	}
	s := sha256.Sum256(b)
	return s[:]
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
			if s := w.sum(); s != nil && !bytes.Equal(s, w.lastSum) {
				w.Log.WithField("file", w.Path).Info("Counters file changed: reloading")
				w.Reload()
			}
		}
	}
}

// Reload loads the file and applies it; a failure leaves the running set.
func (w *Watcher) Reload() bool {
	w.lastSum = w.sum()
	set, err := counters.Load(w.Path)
	if err == nil {
		err = w.Apply(set)
	}
	if err != nil {
		w.success.Set(0)
		w.reloads.WithLabelValues("failure").Inc()
		w.Log.WithError(err).WithField("file", w.Path).Error("Refused the new counters file; the previous fields keep running")
		return false
	}
	for _, warn := range set.Warnings {
		w.Log.WithField("file", w.Path).Warn(warn)
	}
	w.success.Set(1)
	w.successTS.SetToCurrentTime()
	w.reloads.WithLabelValues("success").Inc()
	w.Log.WithFields(logrus.Fields{"file": w.Path, "fields": len(set.Fields)}).Info("Counters file reloaded")
	return true
}
