package kubewatch

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/enrich/kube/podlabels"
	"github.com/gpuscope/gpuscope/internal/testkit/kubetest"
	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
)

// event is one watch event as the server sends it.
type event struct {
	Type   string `json:"type"`
	Object struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name            string            `json:"name"`
			ResourceVersion string            `json:"resourceVersion"`
			Annotations     map[string]string `json:"annotations"`
		} `json:"metadata"`
	} `json:"object"`
}

// rawWatch sends the watch query q for the node's pods with the admin token,
// calls during once the server accepted it, and returns every event until
// the server ends the stream, and how long the stream lasted.
func rawWatch(t *testing.T, cp *kubetest.ControlPlane, q url.Values, during func()) ([]event, time.Duration) {
	t.Helper()
	pem, err := os.ReadFile(cp.CAFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pem))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, err := http.NewRequest(http.MethodGet, cp.URL+"/api/v1/pods?"+q.Encode(), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+cp.AdminToken)
	start := time.Now()
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	if during != nil {
		during()
	}
	var events []event
	dec := json.NewDecoder(bufio.NewReader(resp.Body))
	for {
		var ev event
		if err := dec.Decode(&ev); err != nil {
			break
		}
		events = append(events, ev)
	}
	return events, time.Since(start)
}

// TestRealServerWatchProtocol records what kube-apiserver 1.37 does with
// the watch the exporter sends (LIST, then WATCH from the list's
// resourceVersion with allowWatchBookmarks and timeoutSeconds) and with
// the watch-list stream client-go's informers use (sendInitialEvents), so
// that a change of either shows here first. The watch cache sends a
// bookmark only when its resourceVersion moved past the watch's: here when
// a pod of another node changes, which the node's watch never sees itself;
// a bookmark is a Pod with only a resourceVersion; the server ends the
// stream cleanly at timeoutSeconds. A watch-list stream's initial events
// are the list's pods, closed by a bookmark annotated
// k8s.io/initial-events-end.
func TestRealServerWatchProtocol(t *testing.T) {
	cp := shared.Get(t)
	n := &node{cp: cp, name: "protocol-node", podNS: "protocol-ml"}
	var err error
	n.admin, err = cp.Admin()
	require.NoError(t, err)
	require.NoError(t, cp.CreateNamespace(context.Background(), n.podNS))
	n.createPod(t, "a", map[string]string{"team": "x"})
	n.createPod(t, "b", nil)
	sel := "spec.nodeName=" + n.name

	var list struct {
		Metadata struct{ ResourceVersion string } `json:"metadata"`
	}
	require.NoError(t, n.admin.Get(context.Background(), "/api/v1/pods?fieldSelector="+url.QueryEscape(sel), &list))
	other := &node{cp: cp, name: "another-node", podNS: n.podNS, admin: n.admin}
	var otherRV string
	events, took := rawWatch(t, cp, url.Values{"watch": {"1"}, "allowWatchBookmarks": {"true"}, "timeoutSeconds": {"4"},
		"resourceVersion": {list.Metadata.ResourceVersion}, "fieldSelector": {sel}}, func() {
		p, err := other.admin.Create(context.Background(), kubetest.PodPath(other.podNS, ""), podOf(other.name, "elsewhere"))
		require.NoError(t, err)
		otherRV = p["metadata"].(kubetest.Object)["resourceVersion"].(string)
	})
	var bookmarks []string
	for _, ev := range events {
		require.Equal(t, "BOOKMARK", ev.Type, "no pod of the node changed: only bookmarks")
		assert.Equal(t, "Pod", ev.Object.Kind)
		assert.Empty(t, ev.Object.Metadata.Name)
		bookmarks = append(bookmarks, ev.Object.Metadata.ResourceVersion)
	}
	require.NotEmpty(t, bookmarks, "the server sends a bookmark before it ends a watch once its resourceVersion moved")
	assert.GreaterOrEqual(t, atoi(t, bookmarks[len(bookmarks)-1]), atoi(t, otherRV), "the bookmark carries the other node's change")
	assert.InDelta(t, 4, took.Seconds(), 2, "the server ends the watch at timeoutSeconds, cleanly")

	// Without a change anywhere, the watch ends with no bookmark at all.
	events, _ = rawWatch(t, cp, url.Values{"watch": {"1"}, "allowWatchBookmarks": {"true"}, "timeoutSeconds": {"3"},
		"resourceVersion": {bookmarks[len(bookmarks)-1]}, "fieldSelector": {sel}}, nil)
	assert.Empty(t, events)

	events, _ = rawWatch(t, cp, url.Values{"watch": {"1"}, "allowWatchBookmarks": {"true"}, "timeoutSeconds": {"3"},
		"sendInitialEvents": {"true"}, "resourceVersionMatch": {"NotOlderThan"}, "fieldSelector": {sel}}, nil)
	var added []string
	endMarked := false
	for _, ev := range events {
		switch ev.Type {
		case "ADDED":
			assert.False(t, endMarked, "an initial event after the end marker")
			added = append(added, ev.Object.Metadata.Name)
		case "BOOKMARK":
			if ev.Object.Metadata.Annotations["k8s.io/initial-events-end"] == "true" {
				endMarked = true
			}
		}
	}
	assert.ElementsMatch(t, []string{"a", "b"}, added)
	assert.True(t, endMarked, "the initial events end with an annotated bookmark")
}

// TestWatcherFollowsTheRealServer runs the exporter's own pod-label watcher
// against the real server with watches of a few seconds: it renews each
// watch from the bookmark the server sent before ending it, without a new
// LIST and without an error, and a change made after several renewals
// arrives.
func TestWatcherFollowsTheRealServer(t *testing.T) {
	cp := shared.Get(t)
	n := &node{cp: cp, name: "watcher-node", podNS: "watcher-ml"}
	var err error
	n.admin, err = cp.Admin()
	require.NoError(t, err)
	require.NoError(t, cp.CreateNamespace(context.Background(), n.podNS))
	n.createPod(t, "train-0", map[string]string{"team": "vision"})

	token := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(token, []byte(cp.AdminToken), 0o600))
	allow, err := podlabels.CompileAllowlist("team")
	require.NoError(t, err)
	log := logrus.New()
	log.SetOutput(testWriter{t})
	w, err := podlabels.New(podlabels.Config{Allowlist: allow, NodeName: n.name, Server: cp.URL, TokenFile: token,
		CAFile: cp.CAFile, WatchTimeout: time.Second, MinBackoff: 10 * time.Millisecond, Logger: log})
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	reg.MustRegister(w)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	testwait.For(t, "the pod's labels", func() bool { return len(w.Labels(n.podNS, "train-0")) == 1 && w.Up() })
	listed := gauge(t, reg, "gpuscope_kubernetes_pod_labels_last_list_timestamp_seconds")
	// Each watch lasts one to two seconds: wait through several.
	renewals := time.Now().Add(7 * time.Second)
	testwait.For(t, "several watch renewals", func() bool { return time.Now().After(renewals) })
	assert.Equal(t, listed, gauge(t, reg, "gpuscope_kubernetes_pod_labels_last_list_timestamp_seconds"), "a renewal listed again")
	assert.Zero(t, gauge(t, reg, "gpuscope_kubernetes_pod_labels_api_errors_total"))
	n.relabel(t, "train-0", map[string]any{"team": "nlp"})
	testwait.For(t, "the relabel", func() bool {
		l := w.Labels(n.podNS, "train-0")
		return len(l) == 1 && l[0].Value == "nlp"
	})
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s", name)
	return 0
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err, "resourceVersion %q", s)
	return v
}
