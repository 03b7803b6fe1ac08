package kubewatch

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/kubetest"
	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
)

// podLabelsChart is the chart's configuration that watches pods: its
// ClusterRole is what the exporter gets.
var podLabelsChart = []string{"--set", "kubernetes.podLabels.allowlist=team|app\\.kubernetes\\.io/name"}

// podLabelsArgs are the exporter's arguments the chart renders for it.
var podLabelsArgs = []string{"--kubernetes-pod-labels", "team|app\\.kubernetes\\.io/name"}

// TestPodLabelsThroughARealWatch creates, relabels and deletes pods through
// the API server: each change reaches the series of the GPU the kubelet
// gave the pod, with the service account's token as the chart grants it.
func TestPodLabelsThroughARealWatch(t *testing.T) {
	n := startNode(t, podLabelsChart, podLabelsArgs...)
	n.createPod(t, "train-0", map[string]string{"team": "vision", "app.kubernetes.io/name": "trainer", "tier": "gold"})
	n.giveGPUs(t, n.gpuPod("train-0", "0"), n.gpuPod("infer-0", "1"))

	n.waitSeries(t, "the pod's selected labels", "0", hasLabels(map[string]string{
		"pod": "train-0", "team": "vision", "app_kubernetes_io_name": "trainer", "tier": ""}))
	n.waitMetric(t, "gpuscope_kubernetes_pod_labels_up", "1")
	// A pod created after the list arrives through the watch.
	n.waitSeries(t, "a pod without labels yet", "1", hasLabels(map[string]string{"pod": "infer-0", "team": ""}))
	n.createPod(t, "infer-0", map[string]string{"team": "serving"})
	n.waitSeries(t, "a pod created while watching", "1", hasLabels(map[string]string{"pod": "infer-0", "team": "serving"}))

	n.relabel(t, "train-0", map[string]any{"team": "nlp", "app.kubernetes.io/name": nil})
	n.waitSeries(t, "the relabelled pod", "0", hasLabels(map[string]string{"team": "nlp", "app_kubernetes_io_name": ""}))

	n.deletePod(t, "infer-0")
	n.waitSeries(t, "the deleted pod's labels gone", "1", hasLabels(map[string]string{"pod": "infer-0", "team": ""}))
	n.waitSeries(t, "the other pod's labels kept", "0", hasLabels(map[string]string{"team": "nlp"}))
	got, err := n.metric("gpuscope_kubernetes_pod_labels_api_errors_total")
	require.NoError(t, err)
	assert.Equal(t, "0", got, "no API error in a healthy run")
}

// watchScrapes scrapes the exporter until stop is called, counting the
// scrapes whose GPU 0 series lacks team=want.
type watchScrapes struct {
	total, lost atomic.Int64
	first       atomic.Value
	stop        func()
}

func keepScraping(n *node, want string) *watchScrapes {
	w := &watchScrapes{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			got, _, err := scrape(n.base)
			w.total.Add(1)
			if err != nil || len(got["0"]) != 1 || got["0"][0]["team"] != want {
				if w.lost.Add(1) == 1 {
					w.first.Store(fmt.Sprintf("%v %v", got["0"], err))
				}
			}
		}
	}()
	w.stop = func() { close(done); wg.Wait() }
	return w
}

func (w *watchScrapes) check(t *testing.T) {
	t.Helper()
	w.stop()
	assert.NotZero(t, w.total.Load())
	assert.Zero(t, w.lost.Load(), "of %d scrapes, %d lost the pod labels; the first: %v", w.total.Load(), w.lost.Load(), w.first.Load())
}

// TestAPIServerRestartKeepsLabels stops the API server while the exporter
// watches: every scrape meanwhile keeps the last known labels, the outage
// shows in gpuscope_kubernetes_pod_labels_up, and a change made after the
// restart arrives.
func TestAPIServerRestartKeepsLabels(t *testing.T) {
	n := startNode(t, podLabelsChart, podLabelsArgs...)
	n.createPod(t, "train-0", map[string]string{"team": "vision"})
	n.giveGPUs(t, n.gpuPod("train-0", "0"))
	n.waitSeries(t, "the pod's labels", "0", hasLabels(map[string]string{"team": "vision"}))
	n.waitMetric(t, "gpuscope_kubernetes_pod_labels_up", "1")

	scrapes := keepScraping(n, "vision")
	n.cp.StopAPIServer()
	n.waitMetric(t, "gpuscope_kubernetes_pod_labels_up", "0")
	require.NoError(t, n.cp.StartAPIServer())
	n.waitMetric(t, "gpuscope_kubernetes_pod_labels_up", "1")
	scrapes.check(t)

	n.relabel(t, "train-0", map[string]any{"team": "nlp"})
	n.waitSeries(t, "a change after the restart", "0", hasLabels(map[string]string{"team": "nlp"}))
}

// TestCompactionExpiresTheWatch makes the API server's watch of the pods
// expire as it does in a cluster: etcd's history is compacted past the
// revision the server's own etcd watch resumes from (here by restarting
// etcd after writes and a compaction). With the watch cache (the default)
// the server re-initializes its cache of pods, ends every watch of them,
// and answers the exporter's new watch with 429 "storage is
// (re)initializing" until it is ready, or 410 Gone when the exporter's
// resourceVersion is older than the new cache; without it
// (--watch-cache=false) the exporter's watch is etcd's, and the server sends
// 410 Gone in the stream. Either way the exporter lists again, every scrape
// meanwhile keeps the labels, and a change after it arrives.
func TestCompactionExpiresTheWatch(t *testing.T) {
	t.Run("watch cache", func(t *testing.T) {
		n := startNode(t, podLabelsChart, podLabelsArgs...)
		expireTheWatch(t, n)
		t.Logf("the exporter saw: %s", strings.Join(append(n.logged("watch expired"), n.logged("429 Too Many Requests")...), "\n"))
	})
	t.Run("no watch cache", func(t *testing.T) {
		cp, err := kubetest.Start(kubetest.Options{ExtraAPIServerArgs: []string{"--watch-cache=false"}})
		require.NoError(t, err)
		t.Cleanup(cp.Stop)
		n := startNodeOn(t, cp, podLabelsChart, podLabelsArgs...)
		expireTheWatch(t, n)
		assert.NotEmpty(t, n.logged("watch expired; listing the node's pods again"), "the 410 in the stream")
		got, err := n.metric("gpuscope_kubernetes_pod_labels_api_errors_total")
		require.NoError(t, err)
		assert.Equal(t, "0", got, "a 410 is not an API error")
	})
}

// expireTheWatch compacts etcd under the exporter's watch and restarts
// etcd, checking that no scrape loses the pod's labels, that the exporter
// lists the pods again, and that a change afterwards arrives.
func expireTheWatch(t *testing.T, n *node) {
	t.Helper()
	n.createPod(t, "train-0", map[string]string{"team": "vision"})
	n.giveGPUs(t, n.gpuPod("train-0", "0"))
	n.waitSeries(t, "the pod's labels", "0", hasLabels(map[string]string{"team": "vision"}))
	n.waitMetric(t, "gpuscope_kubernetes_pod_labels_up", "1")
	listed, err := n.metric("gpuscope_kubernetes_pod_labels_last_list_timestamp_seconds")
	require.NoError(t, err)

	scrapes := keepScraping(n, "vision")
	// Writes to other objects move etcd's revision past the pods' last
	// change; the compaction drops the history in between.
	n.churn(t, 20)
	_, err = n.cp.Compact()
	require.NoError(t, err)
	n.cp.StopEtcd()
	require.NoError(t, n.cp.StartEtcd())
	testwait.Every(2*time.Minute, 100*time.Millisecond, func() bool {
		now, err := n.metric("gpuscope_kubernetes_pod_labels_last_list_timestamp_seconds")
		return err == nil && now != listed
	})
	now, err := n.metric("gpuscope_kubernetes_pod_labels_last_list_timestamp_seconds")
	require.NoError(t, err)
	require.NotEqual(t, listed, now, "the exporter did not list the pods again after its watch expired")
	n.waitMetric(t, "gpuscope_kubernetes_pod_labels_up", "1")
	scrapes.check(t)

	n.relabel(t, "train-0", map[string]any{"team": "nlp"})
	n.waitSeries(t, "a change after the watch expired", "0", hasLabels(map[string]string{"team": "nlp"}))
}

// logged returns the exporter's log lines that contain s.
func (n *node) logged(s string) []string {
	var out []string
	for _, l := range strings.Split(n.proc.Output(), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// churn writes count ConfigMaps in the node's workload namespace: writes
// that move etcd's revision without touching a pod.
func (n *node) churn(t *testing.T, count int) {
	t.Helper()
	for i := range count {
		_, err := n.admin.Create(context.Background(), "/api/v1/namespaces/"+n.podNS+"/configmaps", kubetest.Object{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": kubetest.Object{"name": fmt.Sprintf("churn-%d-%d", time.Now().UnixNano(), i)}})
		require.NoError(t, err)
	}
}
