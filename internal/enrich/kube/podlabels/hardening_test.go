package podlabels

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/clock"
	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/internal/testkit/apiservertest"
	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
)

// startOnClock runs a watcher of node-a against srv whose backoff waits on
// clk, with a 1 s to 8 s backoff.
func startOnClock(t *testing.T, srv *apiservertest.Server, clk clock.Clock) harness {
	t.Helper()
	return start(t, srv, Config{Allowlist: allow(`team`), MinBackoff: time.Second, MaxBackoff: 8 * time.Second, Clock: clk})
}

func lists(srv *apiservertest.Server) int {
	n := 0
	for _, r := range srv.Requests() {
		if !r.Watch {
			n++
		}
	}
	return n
}

// TestA410LoopHidesAnOutage: once the watch expires and every LIST that
// follows answers 410 Gone, the LIST failures are an outage like any
// other: gpuscope_kubernetes_pod_labels_up goes to 0, each failure is
// counted, the outage is logged once, and the LISTs back off (1 s, 2 s,
// 4 s, on the watcher's clock) while the last labels stay. Before, up
// stayed 1, nothing was counted or logged, and LISTs repeated every 0.6 s.
func TestA410LoopHidesAnOutage(t *testing.T) {
	srv := apiservertest.Start(t)
	srv.Set(apiservertest.Pod{Namespace: "ml", Name: "train-0", Node: "node-a", Labels: map[string]string{"team": "vision"}})
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	h := startOnClock(t, srv, clk)
	h.waitUp(t, true)
	h.waitWatching(t)

	srv.FailLists(410)
	srv.Expire()
	// The expired watch is re-listed after the shortest wait; the LIST's
	// 410 is the first failure.
	down := testwait.Until(10*time.Second, func() bool {
		if !h.w.Up() && metric(t, h.w, "gpuscope_kubernetes_pod_labels_api_errors_total") >= 1 {
			return true
		}
		if clk.Timers() > 0 {
			clk.Add(1250 * time.Millisecond)
		}
		return false
	})
	require.True(t, down, "a LIST answered 410 marks the labels down and counts an error: up %v, errors %v, %d LISTs",
		h.w.Up(), metric(t, h.w, "gpuscope_kubernetes_pod_labels_api_errors_total"), lists(srv))
	failed := lists(srv)
	assert.Equal(t, 2, failed, "the first LIST, and the one after the 410")

	// Each next LIST waits twice as long as the one before: 1 s (and a
	// quarter of jitter at most), 2 s, 4 s.
	for i, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		require.True(t, clk.WaitForTimers(1, deadline), "failure %d: the retry waits on the clock", i+1)
		clk.Add(wait / 2)
		assert.Equal(t, failed, lists(srv), "failure %d: no LIST before %s", i+1, wait)
		clk.Add(wait * 3 / 4)
		testwait.For(t, "the next LIST", func() bool { return lists(srv) == failed+1 })
		failed++
		testwait.For(t, "its failure counted", func() bool {
			return metric(t, h.w, "gpuscope_kubernetes_pod_labels_api_errors_total") == float64(failed-1)
		})
	}
	assert.Equal(t, 0.0, metric(t, h.w, "gpuscope_kubernetes_pod_labels_up"))
	assert.Equal(t, []enrich.Label{{Name: "team", Value: "vision"}}, h.w.Labels("ml", "train-0"), "the last labels stay")
	assert.Equal(t, 1, h.logged(logrus.WarnLevel, "unavailable"), "the outage is logged once")
	var logged string
	for _, e := range h.hook.AllEntries() {
		if err, ok := e.Data[logrus.ErrorKey].(error); ok && e.Level == logrus.WarnLevel {
			logged = err.Error()
		}
	}
	assert.Contains(t, logged, "listing pods")
	assert.Contains(t, logged, "410")

	// The backoff is at its 8 s cap now.
	srv.FailLists(0)
	require.True(t, clk.WaitForTimers(1, deadline))
	clk.Add(10 * time.Second)
	h.waitUp(t, true)
	assert.Equal(t, 1, h.logged(logrus.InfoLevel, "answers again"))
}

// TestLabelKeysAndValuesHaveNoLengthBound: a label whose key or value is
// longer than Kubernetes allows (a name of 63 characters after a prefix of
// 253, a value of 63) is left out, as is a label past the bytes one pod may
// add to a series; each is counted in
// gpuscope_kubernetes_pod_labels_dropped_total by reason and logged once,
// without the oversized text. Before, three labels of 1 MiB on one pod made
// every series of its GPU 3 MiB longer.
func TestLabelKeysAndValuesHaveNoLengthBound(t *testing.T) {
	long := strings.Repeat("v", 1<<20)
	srv := apiservertest.Start(t)
	srv.Set(apiservertest.Pod{Namespace: "ml", Name: "huge", Node: "node-a", Labels: map[string]string{
		"team":                            "vision",
		"k-value":                         long,
		"k-value-64":                      strings.Repeat("v", 64),
		"k-value-63":                      strings.Repeat("v", 63),
		"k-" + strings.Repeat("n", 62):    "name of 64",
		"k-" + strings.Repeat("n", 61):    "name of 63",
		strings.Repeat("p", 254) + "/k":   "prefix of 254",
		strings.Repeat("p", 253) + "/k":   "prefix of 253",
		"k/" + strings.Repeat("n", 1<<20): "a key of 1 MiB",
	}})
	h := start(t, srv, Config{Allowlist: allow(`team|k.*|p+/k`), MaxLabelBytesPerPod: 400})
	// Sorted by key, the valid labels add 77, 77, 272 and 14 bytes
	// (`,name="value"` each): the prefixed one would pass the pod's 400.
	h.waitLabels(t, "ml", "huge", []enrich.Label{
		{Name: "k_" + strings.Repeat("n", 61), Value: "name of 63"},
		{Name: "k_value_63", Value: strings.Repeat("v", 63)},
		{Name: "team", Value: "vision"},
	})
	dropped := map[string]float64{}
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(h.w))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "gpuscope_kubernetes_pod_labels_dropped_total" {
			for _, m := range mf.Metric {
				dropped[m.Label[0].GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	assert.Equal(t, map[string]float64{"name_too_long": 3, "value_too_long": 2, "pod_bytes": 1, "too_many": 0, "collision": 0}, dropped)
	for _, reason := range []string{"key is longer than Kubernetes allows", "value is longer than Kubernetes allows", "bytes one pod may add"} {
		assert.Equal(t, 1, h.logged(logrus.WarnLevel, reason), reason)
	}
	for _, e := range h.hook.AllEntries() {
		s, err := e.String()
		require.NoError(t, err)
		assert.Less(t, len(s), 2048, "a log line quotes no 1 MiB label")
	}
}
