package podlabels

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/internal/enrich"
)

// SanitizeName turns a Kubernetes label key into a Prometheus label name the
// way dcgm-exporter does (internal/pkg/utils/utils.go, SanitizeLabelName, used
// by internal/pkg/transformation/kubernetes.go): the key itself, with every
// character outside [a-zA-Z0-9_] replaced by '_'. A key starting with a digit,
// which would not be a valid label name, gets a leading '_'.
func SanitizeName(key string) string {
	var b strings.Builder
	b.Grow(len(key) + 1)
	if key != "" && key[0] >= '0' && key[0] <= '9' {
		b.WriteByte('_')
	}
	for _, r := range key {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// CompileAllowlist compiles an allowlist of label keys. It is anchored at
// both ends, as Prometheus relabelling regexes are, so `team` selects the
// key team and not myteam.
func CompileAllowlist(expr string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(`^(?:` + expr + `)$`)
	if err != nil {
		return nil, fmt.Errorf("allowlist %q is not a valid regular expression: %w", expr, err)
	}
	return re, nil
}

// Kubernetes' bounds on a label (a key is an optional DNS-subdomain prefix
// and '/', then a name): the API server refuses longer ones, so a longer
// one comes from a broken or hostile server.
const (
	maxKeyPrefix = 253
	maxKeyName   = 63
	maxValue     = 63
)

// Reasons a selected label is left out, as gpuscope_kubernetes_pod_labels_
// dropped_total counts them.
const (
	dropNameTooLong  = "name_too_long"
	dropValueTooLong = "value_too_long"
	dropPodBytes     = "pod_bytes"
	dropTooMany      = "too_many"
	dropCollision    = "collision"
)

var dropReasons = []string{dropNameTooLong, dropValueTooLong, dropPodBytes, dropTooMany, dropCollision}

// selection is the outcome of filtering one pod's labels.
type selection struct {
	labels []enrich.Label
	// collisions are the keys dropped because an earlier key (in sorted
	// order) has the same sanitised name, keyed by that name.
	collisions map[string][]string
	// truncated is set when more keys matched than the per-pod bound.
	truncated bool
	// dropped counts the labels left out, by reason; example is the first
	// key of each.
	dropped map[string]int
	example map[string]string
}

func (s *selection) drop(reason, key string, n int) {
	if s.dropped == nil {
		s.dropped, s.example = map[string]int{}, map[string]string{}
	}
	if s.dropped[reason] == 0 {
		s.example[reason] = key
	}
	s.dropped[reason] += n
}

// validKey says whether key is as long as Kubernetes allows a label key.
func validKey(key string) bool {
	prefix, name, found := strings.Cut(key, "/")
	if !found {
		prefix, name = "", key
	}
	return len(prefix) <= maxKeyPrefix && len(name) <= maxKeyName
}

// labelBytes is what a label adds to a series: `,name="value"`.
func labelBytes(l enrich.Label) int { return len(l.Name) + len(l.Value) + 4 }

// selectLabels keeps the labels whose key the allowlist matches, sorted by
// key so that the winner of a name collision and the labels kept under the
// bound do not depend on map order.
func (w *Watcher) selectLabels(labels map[string]string) selection {
	var sel selection
	if len(labels) == 0 {
		return sel
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		if w.cfg.Allowlist.MatchString(k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	byName := map[string]string{}
	size := 0
	for i, k := range keys {
		v := labels[k]
		switch {
		case !validKey(k):
			sel.drop(dropNameTooLong, k, 1)
			continue
		case len(v) > maxValue:
			sel.drop(dropValueTooLong, k, 1)
			continue
		}
		name := SanitizeName(k)
		if first, dup := byName[name]; dup {
			if sel.collisions == nil {
				sel.collisions = map[string][]string{}
			}
			if len(sel.collisions[name]) == 0 {
				sel.collisions[name] = []string{first}
			}
			sel.collisions[name] = append(sel.collisions[name], k)
			sel.drop(dropCollision, k, 1)
			continue
		}
		if len(sel.labels) >= w.cfg.MaxLabelsPerPod {
			sel.truncated = true
			sel.drop(dropTooMany, k, len(keys)-i)
			break
		}
		l := enrich.Label{Name: name, Value: v}
		if size+labelBytes(l) > w.cfg.MaxLabelBytesPerPod {
			sel.drop(dropPodBytes, k, 1)
			continue
		}
		size += labelBytes(l)
		byName[name] = k
		sel.labels = append(sel.labels, l)
	}
	return sel
}

func sameLabels(a, b []enrich.Label) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func newDroppedCounter() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gpuscope_kubernetes_pod_labels_dropped_total",
		Help: "Pod labels the allowlist selected but left out, by reason: name_too_long or value_too_long (past Kubernetes' " +
			"bounds), pod_bytes (past the bytes one pod may add to a series), too_many (past the labels per pod), collision " +
			"(named like an earlier key); counted each time the pod is read.",
	}, []string{"reason"})
	for _, r := range dropReasons {
		c.WithLabelValues(r)
	}
	return c
}

// countDropped counts the labels of pod the selection left out and logs
// each reason past Kubernetes' bounds once, quoting only the start of the
// key: the rest of it, and the value, may be megabytes.
func (w *Watcher) countDropped(pod string, sel selection) {
	for reason, n := range sel.dropped {
		w.dropped.WithLabelValues(reason).Add(float64(n))
	}
	logs := []struct{ reason, msg string }{
		{dropNameTooLong, "a pod label key is longer than Kubernetes allows (a name of 63 characters after a prefix of 253); left out (logged once)"},
		{dropValueTooLong, "a pod label value is longer than Kubernetes allows (63 characters); left out (logged once)"},
		{dropPodBytes, "a pod's selected labels pass the bytes one pod may add to a series; the rest by sorted key are left out (logged once)"},
	}
	for _, l := range logs {
		if sel.dropped[l.reason] == 0 {
			continue
		}
		key := sel.example[l.reason]
		w.logOnce("dropped/"+l.reason, func() {
			w.log.WithFields(logrus.Fields{"pod": clip(pod), "key": clip(key), "key_bytes": len(key),
				"max_label_bytes_per_pod": w.cfg.MaxLabelBytesPerPod}).Warn(l.msg)
		})
	}
}

// clip bounds a name from the API server that a log line quotes.
func clip(s string) string {
	const quoted = 80
	if len(s) <= quoted {
		return s
	}
	return s[:quoted] + "..."
}
