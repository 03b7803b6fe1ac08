package podlabels

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

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

// selection is the outcome of filtering one pod's labels.
type selection struct {
	labels []enrich.Label
	// collisions are the keys dropped because an earlier key (in sorted
	// order) has the same sanitised name, keyed by that name.
	collisions map[string][]string
	// truncated is set when more keys matched than the per-pod bound.
	truncated bool
}

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
	for _, k := range keys {
		name := SanitizeName(k)
		if first, dup := byName[name]; dup {
			if sel.collisions == nil {
				sel.collisions = map[string][]string{}
			}
			if len(sel.collisions[name]) == 0 {
				sel.collisions[name] = []string{first}
			}
			sel.collisions[name] = append(sel.collisions[name], k)
			continue
		}
		if len(sel.labels) >= w.cfg.MaxLabelsPerPod {
			sel.truncated = true
			break
		}
		byName[name] = k
		sel.labels = append(sel.labels, enrich.Label{Name: name, Value: labels[k]})
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
