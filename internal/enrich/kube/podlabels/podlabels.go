// Package podlabels copies selected labels of the pods of this node from the
// Kubernetes API server, for the GPU series of the pods that hold a GPU.
//
// It is a small node-scoped informer built on net/http and encoding/json:
// LIST the node's pods, then WATCH from the list's resourceVersion, and
// re-list after a 410 Gone or any error, with capped backoff. client-go would
// do the same at the cost of tens of megabytes of binary for one resource.
// Only the labels whose key the allowlist matches are kept, per pod, within
// fixed bounds; the scrape path reads them from memory.
package podlabels

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/internal/clock"
	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/internal/enrich/kube/kubeapi"
	"github.com/gpuscope/gpuscope/internal/logonce"
)

// Defaults of Config.
const (
	DefaultTokenFile = kubeapi.DefaultTokenFile
	DefaultCAFile    = kubeapi.DefaultCAFile
	// DefaultMaxPods bounds the pods kept. The kubelet's default limit is
	// 110 pods per node; large nodes are configured for a few hundred.
	DefaultMaxPods = 1024
	// DefaultMaxLabelsPerPod bounds the labels copied from one pod, so a
	// loose allowlist cannot multiply the size of every series: it is the
	// room the label budget (internal/engine/labelbudget) leaves beside the
	// shipped counters files and pod, namespace and container. gpuscope
	// sets the bound from its actual configuration.
	DefaultMaxLabelsPerPod = 12
	// DefaultMaxLabelBytesPerPod bounds what one pod's labels add to each of
	// its series (`,name="value"` each): a dozen labels of typical names
	// and values, a fifth of an 8-GPU node's series line or less per label.
	DefaultMaxLabelBytesPerPod = 1024
	DefaultMinBackoff          = 500 * time.Millisecond
	DefaultMaxBackoff          = 30 * time.Second
	// maxListBytes bounds a LIST answer; pods of one node are far below it.
	maxListBytes = 64 << 20
	// maxEventBytes bounds one WATCH event; etcd stores objects up to 1.5 MB.
	maxEventBytes = 4 << 20
	// maxLogged bounds the set of messages logged only once.
	maxLogged = 1024
)

// Config configures a Watcher. Zero values take the defaults.
type Config struct {
	// Allowlist selects the label keys to copy; it must be set.
	Allowlist *regexp.Regexp
	// NodeName is the node whose pods are watched; it must be set.
	NodeName string
	// Server is the API server's base URL. Empty: https:// with
	// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT, as in a pod.
	Server string
	// TokenFile holds the service-account token, read on each connection
	// because the kubelet rotates it.
	TokenFile string
	// CAFile holds the API server's CA bundle, read on each LIST.
	CAFile string
	// MaxPods bounds the pods kept with selected labels.
	MaxPods int
	// MaxLabelsPerPod bounds the labels kept per pod.
	MaxLabelsPerPod int
	// MaxLabelBytesPerPod bounds the bytes a pod's labels add to a series.
	MaxLabelBytesPerPod int
	// MinBackoff and MaxBackoff bound the wait before a re-list after an
	// error; it doubles from the first to the second.
	MinBackoff, MaxBackoff time.Duration
	// WatchTimeout is how long one WATCH may last before the server ends it
	// and it is renewed (a random value between it and twice it is asked
	// for, so that a fleet of exporters does not reconnect at once).
	WatchTimeout time.Duration
	// Logger receives the watcher's logs.
	Logger logrus.FieldLogger
	// Clock times the waits between attempts; clock.Real when nil.
	Clock clock.Clock
}

func (c *Config) setDefaults() {
	if c.TokenFile == "" {
		c.TokenFile = DefaultTokenFile
	}
	if c.CAFile == "" {
		c.CAFile = DefaultCAFile
	}
	if c.MaxPods <= 0 {
		c.MaxPods = DefaultMaxPods
	}
	if c.MaxLabelsPerPod <= 0 {
		c.MaxLabelsPerPod = DefaultMaxLabelsPerPod
	}
	if c.MaxLabelBytesPerPod <= 0 {
		c.MaxLabelBytesPerPod = DefaultMaxLabelBytesPerPod
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = DefaultMinBackoff
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = max(DefaultMaxBackoff, c.MinBackoff)
	}
	if c.WatchTimeout <= 0 {
		c.WatchTimeout = 5 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = logrus.StandardLogger()
	}
	c.Clock = clock.Or(c.Clock)
}

type podKey struct{ namespace, name string }

// Watcher keeps the selected labels of the pods of one node. Labels and
// Generation are safe for concurrent use with Run.
type Watcher struct {
	cfg Config
	log logrus.FieldLogger

	mu     sync.RWMutex // guards pods
	pods   map[podKey][]enrich.Label
	gen    atomic.Uint64
	up     atomic.Bool
	logMu  sync.Mutex // guards down
	logged *logonce.Set
	down   bool

	api *kubeapi.Client

	apiErrors        prometheus.Counter
	dropped          *prometheus.CounterVec
	upDesc, podsDesc *prometheus.Desc
	lastList         atomic.Int64 // Unix seconds
	lastListDesc     *prometheus.Desc
}

// New returns a watcher; Run starts it.
func New(cfg Config) (*Watcher, error) {
	cfg.setDefaults()
	if cfg.Allowlist == nil {
		return nil, errors.New("pod labels: no allowlist")
	}
	if cfg.NodeName == "" {
		return nil, errors.New("pod labels: no node name (the Kubernetes node the pods run on)")
	}
	if cfg.Server == "" {
		s, err := kubeapi.InClusterServer()
		if err != nil {
			return nil, fmt.Errorf("pod labels: %w: pod labels need gpuscope to run in a Kubernetes pod", err)
		}
		cfg.Server = s
	}
	return &Watcher{
		cfg:    cfg,
		api:    &kubeapi.Client{Server: cfg.Server, TokenFile: cfg.TokenFile, CAFile: cfg.CAFile},
		log:    cfg.Logger.WithField("component", "podlabels"),
		pods:   map[podKey][]enrich.Label{},
		logged: logonce.New(maxLogged),
		apiErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gpuscope_kubernetes_pod_labels_api_errors_total",
			Help: "Failed LIST or WATCH calls to the Kubernetes API server for pod labels.",
		}),
		dropped: newDroppedCounter(),
		upDesc: prometheus.NewDesc("gpuscope_kubernetes_pod_labels_up",
			"1 while the watch of this node's pods on the Kubernetes API server is established; 0 means the last known pod labels are served.", nil, nil),
		podsDesc: prometheus.NewDesc("gpuscope_kubernetes_pod_labels_pods",
			"Pods of this node with at least one label selected by the allowlist.", nil, nil),
		lastListDesc: prometheus.NewDesc("gpuscope_kubernetes_pod_labels_last_list_timestamp_seconds",
			"When this node's pods were last listed from the Kubernetes API server.", nil, nil),
	}, nil
}

// Labels returns the selected labels of a pod, sorted by key; nil when it
// has none or is unknown. The slice is read-only.
func (w *Watcher) Labels(namespace, pod string) []enrich.Label {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.pods[podKey{namespace, pod}]
}

// MaxLabels is the most labels Labels returns for one pod.
func (w *Watcher) MaxLabels() int { return w.cfg.MaxLabelsPerPod }

// Generation changes whenever the labels of some pod change.
func (w *Watcher) Generation() uint64 { return w.gen.Load() }

// Up reports whether the watch is established.
func (w *Watcher) Up() bool { return w.up.Load() }

// Run lists and watches until ctx ends. API errors are counted, logged and
// retried; the last known labels are kept meanwhile.
func (w *Watcher) Run(ctx context.Context) error {
	backoff := w.cfg.MinBackoff
	for ctx.Err() == nil {
		established, err := w.listAndWatch(ctx)
		if ctx.Err() != nil {
			break
		}
		if established {
			backoff = w.cfg.MinBackoff
		}
		wait := w.cfg.MinBackoff
		if errors.Is(err, errGone) {
			// Expected now and then: the watch fell too far behind. Not an
			// outage, so neither counted nor logged as one. Only a watch
			// expires: a LIST that fails, whatever its status, is an outage.
			w.log.WithError(err).Debug("watch expired; listing the node's pods again")
		} else {
			w.apiErrors.Inc()
			w.markDown(err)
			wait = backoff
			backoff = min(2*backoff, w.cfg.MaxBackoff)
		}
		// Jitter spreads the reconnects of a fleet of exporters after an
		// API server restart.
		wait += rand.N(wait/4 + 1)
		t := w.cfg.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C():
		}
	}
	w.up.Store(false)
	return nil
}

// listAndWatch lists the pods, then watches until an error. established
// is set once a watch was accepted.
func (w *Watcher) listAndWatch(ctx context.Context) (established bool, err error) {
	rv, err := w.list(ctx)
	if err != nil {
		return false, err
	}
	for {
		rv, err = w.watch(ctx, rv, func() {
			established = true
			w.markUp()
		})
		if err != nil {
			return established, err
		}
	}
}

// replace installs the pods of a LIST answer.
func (w *Watcher) replace(pods []podObject) {
	next := make(map[podKey][]enrich.Label, min(len(pods), w.cfg.MaxPods))
	dropped := 0
	for _, p := range pods {
		labels := w.selected(p)
		if len(labels) == 0 {
			continue
		}
		if len(next) >= w.cfg.MaxPods {
			dropped++
			continue
		}
		next[podKey{p.Metadata.Namespace, p.Metadata.Name}] = labels
	}
	if dropped > 0 {
		w.logBound()
	}
	w.mu.Lock()
	changed := len(next) != len(w.pods)
	if !changed {
		for k, v := range next {
			if old, ok := w.pods[k]; !ok || !sameLabels(old, v) {
				changed = true
				break
			}
		}
	}
	w.pods = next
	w.mu.Unlock()
	if changed {
		w.gen.Add(1)
	}
}

// apply applies one ADDED, MODIFIED or DELETED event.
func (w *Watcher) apply(deleted bool, p podObject) {
	k := podKey{p.Metadata.Namespace, p.Metadata.Name}
	var labels []enrich.Label
	if !deleted {
		labels = w.selected(p)
	}
	w.mu.Lock()
	old, had := w.pods[k]
	changed := false
	switch {
	case len(labels) == 0:
		if had {
			delete(w.pods, k)
			changed = true
		}
	case !had && len(w.pods) >= w.cfg.MaxPods:
		w.mu.Unlock()
		w.logBound()
		return
	case !sameLabels(old, labels):
		w.pods[k] = labels
		changed = true
	}
	w.mu.Unlock()
	if changed {
		w.gen.Add(1)
	}
}

func (w *Watcher) selected(p podObject) []enrich.Label {
	sel := w.selectLabels(p.Metadata.Labels)
	pod := p.Metadata.Namespace + "/" + p.Metadata.Name
	for name, keys := range sel.collisions {
		w.logOnce("collision/"+name, func() {
			w.log.WithFields(logrus.Fields{"pod": pod, "label": name, "keys": keys, "kept": keys[0]}).
				Warn("pod label keys sanitise to the same label name; keeping the first by sorted key (logged once per name)")
		})
	}
	if sel.truncated {
		w.logOnce("max-labels", func() {
			w.log.WithFields(logrus.Fields{"pod": pod, "max_labels_per_pod": w.cfg.MaxLabelsPerPod}).
				Warn("more pod labels match the allowlist than the bound; keeping the first by sorted key (logged once)")
		})
	}
	w.countDropped(pod, sel)
	return sel.labels
}

func (w *Watcher) logBound() {
	w.logOnce("max-pods", func() {
		w.log.WithField("max_pods", w.cfg.MaxPods).
			Warn("more pods of this node carry selected labels than the bound; the rest get none (logged once)")
	})
}

// logOnce logs the first time key is seen.
func (w *Watcher) logOnce(key string, f func()) { w.logged.Do(key, f) }

func (w *Watcher) markDown(err error) {
	w.up.Store(false)
	w.logMu.Lock()
	first := !w.down
	w.down = true
	w.logMu.Unlock()
	if first {
		w.log.WithError(err).Warn("Kubernetes API server unavailable for pod labels; serving the last known labels until it answers")
	}
}

func (w *Watcher) markUp() {
	w.up.Store(true)
	w.logMu.Lock()
	wasDown := w.down
	w.down = false
	w.logMu.Unlock()
	if wasDown {
		w.log.Info("Kubernetes API server answers again; pod labels are current")
	}
}

// Describe implements prometheus.Collector.
func (w *Watcher) Describe(ch chan<- *prometheus.Desc) {
	ch <- w.upDesc
	ch <- w.podsDesc
	ch <- w.lastListDesc
	w.apiErrors.Describe(ch)
	w.dropped.Describe(ch)
}

// Collect implements prometheus.Collector.
func (w *Watcher) Collect(ch chan<- prometheus.Metric) {
	up := 0.0
	if w.up.Load() {
		up = 1
	}
	w.mu.RLock()
	n := len(w.pods)
	w.mu.RUnlock()
	ch <- prometheus.MustNewConstMetric(w.upDesc, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(w.podsDesc, prometheus.GaugeValue, float64(n))
	if ts := w.lastList.Load(); ts > 0 {
		ch <- prometheus.MustNewConstMetric(w.lastListDesc, prometheus.GaugeValue, float64(ts))
	}
	w.apiErrors.Collect(ch)
	w.dropped.Collect(ch)
}
