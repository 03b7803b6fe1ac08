package podlabels

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/internal/testkit/apiservertest"
)

// deadline is generous: the machine running the tests may be loaded.
const deadline = 15 * time.Second

// The names are dcgm-exporter's: the key with [^a-zA-Z0-9_] replaced by '_'
// (internal/pkg/utils/utils.go, SanitizeLabelName), no prefix.
func TestSanitizeName(t *testing.T) {
	tests := []struct{ key, want string }{
		{"2fa", "_2fa"},
		{"team", "team"},
		{"app.kubernetes.io/name", "app_kubernetes_io_name"},
		{"example.com/cost-center", "example_com_cost_center"},
		{"Tier_2", "Tier_2"},
		{"ünïcode", "_n_code"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			assert.Equal(t, tt.want, SanitizeName(tt.key))
		})
	}
}

func TestSelectLabels(t *testing.T) {
	tests := []struct {
		name       string
		allow      string
		max        int
		labels     map[string]string
		want       []enrich.Label
		collisions map[string][]string
		truncated  bool
	}{
		{
			name:   "only keys the allowlist matches, sorted",
			allow:  `team|app\.kubernetes\.io/.*`,
			labels: map[string]string{"team": "vision", "app.kubernetes.io/name": "trainer", "pod-template-hash": "abc", "teams": "x"},
			want:   []enrich.Label{{Name: "app_kubernetes_io_name", Value: "trainer"}, {Name: "team", Value: "vision"}},
		},
		{
			name:   "the allowlist matches the whole key",
			allow:  `team`,
			labels: map[string]string{"myteam": "a", "team-lead": "b"},
		},
		{
			name:       "keys that sanitise alike keep the first by sorted key",
			allow:      `.*`,
			labels:     map[string]string{"a.b": "dot", "a-b": "dash", "a_b": "underscore"},
			want:       []enrich.Label{{Name: "a_b", Value: "dash"}},
			collisions: map[string][]string{"a_b": {"a-b", "a.b", "a_b"}},
		},
		{
			name:      "at most max labels per pod",
			allow:     `k.`,
			max:       2,
			labels:    map[string]string{"k3": "3", "k1": "1", "k2": "2"},
			want:      []enrich.Label{{Name: "k1", Value: "1"}, {Name: "k2", Value: "2"}},
			truncated: true,
		},
		{
			name:  "no labels",
			allow: `.*`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &Watcher{cfg: Config{Allowlist: allow(tt.allow), MaxLabelsPerPod: tt.max, MaxLabelBytesPerPod: DefaultMaxLabelBytesPerPod}}
			if tt.max == 0 {
				w.cfg.MaxLabelsPerPod = DefaultMaxLabelsPerPod
			}
			sel := w.selectLabels(tt.labels)
			assert.Equal(t, tt.want, sel.labels)
			assert.Equal(t, tt.collisions, sel.collisions)
			assert.Equal(t, tt.truncated, sel.truncated)
		})
	}
}

func allow(expr string) *regexp.Regexp {
	re, err := CompileAllowlist(expr)
	if err != nil {
		panic(err)
	}
	return re
}

func TestCompileAllowlist(t *testing.T) {
	_, err := CompileAllowlist(`team(`)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"team("`)

	re := allow(`team|app`)
	assert.True(t, re.MatchString("team"))
	assert.True(t, re.MatchString("app"))
	assert.False(t, re.MatchString("myteam"))
	assert.False(t, re.MatchString("apps"))
}

type harness struct {
	srv  *apiservertest.Server
	w    *Watcher
	hook *logtest.Hook
}

// start runs a watcher of node-a against a fake API server, backing off
// from 10 ms to 200 ms unless cfg says otherwise.
func start(t *testing.T, srv *apiservertest.Server, cfg Config) harness {
	t.Helper()
	logger, hook := logtest.NewNullLogger()
	logger.SetLevel(logrus.DebugLevel)
	if cfg.Allowlist == nil {
		cfg.Allowlist = allow(`team|app\.kubernetes\.io/.*`)
	}
	cfg.NodeName = "node-a"
	cfg.Server = srv.URL()
	cfg.CAFile, cfg.TokenFile = srv.CAFile, srv.TokenFile
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff, cfg.MaxBackoff = 10*time.Millisecond, 200*time.Millisecond
	}
	cfg.Logger = logger
	w, err := New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		assert.NoError(t, w.Run(ctx))
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(deadline):
			t.Error("Run did not return after its context ended")
		}
	})
	return harness{srv: srv, w: w, hook: hook}
}

func (h harness) waitLabels(t *testing.T, ns, pod string, want []enrich.Label) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, want, h.w.Labels(ns, pod))
	}, deadline, 10*time.Millisecond)
}

func (h harness) waitUp(t *testing.T, up bool) {
	t.Helper()
	require.Eventually(t, func() bool { return h.w.Up() == up }, deadline, 10*time.Millisecond, "up should become %v", up)
}

// waitWatching waits until the watcher's last request is a WATCH that the
// server holds open: the re-list before it races with whatever the test
// checks next.
func (h harness) waitWatching(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		reqs := h.srv.Requests()
		return len(reqs) > 0 && reqs[len(reqs)-1].Watch && h.srv.Watchers() == 1
	}, deadline, time.Millisecond, "a WATCH should follow the LIST")
}

func (h harness) logged(level logrus.Level, substr string) int {
	n := 0
	for _, e := range h.hook.AllEntries() {
		if e.Level == level && strings.Contains(e.Message, substr) {
			n++
		}
	}
	return n
}

func metric(t *testing.T, w *Watcher, name string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(w))
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
	t.Fatalf("no metric %s", name)
	return 0
}

func TestWatchFollowsThePodsOfTheNode(t *testing.T) {
	srv := apiservertest.Start(t)
	srv.Set(apiservertest.Pod{Namespace: "ml", Name: "train-0", Node: "node-a",
		Labels: map[string]string{"team": "vision", "app.kubernetes.io/name": "trainer", "pod-template-hash": "7f9c"}})
	srv.Set(apiservertest.Pod{Namespace: "ml", Name: "elsewhere", Node: "node-b", Labels: map[string]string{"team": "nlp"}})
	srv.Set(apiservertest.Pod{Namespace: "kube-system", Name: "plain", Node: "node-a", Labels: map[string]string{"k8s-app": "dns"}})
	h := start(t, srv, Config{})

	h.waitLabels(t, "ml", "train-0", []enrich.Label{{Name: "app_kubernetes_io_name", Value: "trainer"}, {Name: "team", Value: "vision"}})
	h.waitUp(t, true)
	// The labels show as soon as the LIST is read; the WATCH follows it.
	h.waitWatching(t)
	assert.Nil(t, h.w.Labels("ml", "elsewhere"), "a pod of another node")
	assert.Nil(t, h.w.Labels("kube-system", "plain"), "no key matches the allowlist")
	assert.Equal(t, 1.0, metric(t, h.w, "gpuscope_kubernetes_pod_labels_up"))
	assert.Equal(t, 1.0, metric(t, h.w, "gpuscope_kubernetes_pod_labels_pods"))
	reqs := srv.Requests()
	require.NotEmpty(t, reqs)
	assert.False(t, reqs[0].Watch, "LIST first")
	for _, r := range reqs {
		assert.Equal(t, "spec.nodeName=node-a", r.Query.Get("fieldSelector"))
		assert.Equal(t, "token-1", r.Token)
	}

	gen := h.w.Generation()
	srv.Set(apiservertest.Pod{Namespace: "ml", Name: "train-0", Node: "node-a",
		Labels: map[string]string{"team": "speech", "app.kubernetes.io/name": "trainer"}})
	h.waitLabels(t, "ml", "train-0", []enrich.Label{{Name: "app_kubernetes_io_name", Value: "trainer"}, {Name: "team", Value: "speech"}})
	assert.Greater(t, h.w.Generation(), gen, "MODIFIED changes the generation")
	assert.Empty(t, srv.Requests()[len(reqs):], "an event needs no new request")

	srv.Set(apiservertest.Pod{Namespace: "ml", Name: "eval-1", Node: "node-a", Labels: map[string]string{"team": "eval"}})
	h.waitLabels(t, "ml", "eval-1", []enrich.Label{{Name: "team", Value: "eval"}})

	gen = h.w.Generation()
	srv.Bookmark()
	srv.Delete("ml", "eval-1")
	h.waitLabels(t, "ml", "eval-1", nil)
	assert.Greater(t, h.w.Generation(), gen, "DELETED changes the generation")

	// A change the watch never reports shows after the re-list that a 410
	// forces.
	srv.SetQuietly(apiservertest.Pod{Namespace: "ml", Name: "train-0", Node: "node-a", Labels: map[string]string{"team": "missed"}})
	srv.Expire()
	h.waitLabels(t, "ml", "train-0", []enrich.Label{{Name: "team", Value: "missed"}})
	h.waitUp(t, true)
	h.waitWatching(t)
	lists := 0
	for _, r := range srv.Requests() {
		if !r.Watch {
			lists++
		}
	}
	assert.Equal(t, 2, lists, "one LIST at the start, one after the 410")
	assert.Equal(t, 0.0, metric(t, h.w, "gpuscope_kubernetes_pod_labels_api_errors_total"), "a 410 is not an API error")

	// Watches resume from the last resourceVersion seen.
	last := srv.Requests()
	assert.NotEmpty(t, last[len(last)-1].Query.Get("resourceVersion"))
	assert.Equal(t, "true", last[len(last)-1].Query.Get("allowWatchBookmarks"))
}

func TestWatchEndedByTheServerResumesWithoutAList(t *testing.T) {
	srv := apiservertest.Start(t)
	srv.Set(apiservertest.Pod{Namespace: "ml", Name: "train-0", Node: "node-a", Labels: map[string]string{"team": "vision"}})
	h := start(t, srv, Config{WatchTimeout: time.Second})
	h.waitUp(t, true)
	srv.Set(apiservertest.Pod{Namespace: "ml", Name: "train-0", Node: "node-a", Labels: map[string]string{"team": "speech"}})
	h.waitLabels(t, "ml", "train-0", []enrich.Label{{Name: "team", Value: "speech"}})

	var watches []apiservertest.Request
	require.Eventually(t, func() bool {
		watches = watches[:0]
		for _, r := range srv.Requests() {
			if r.Watch {
				watches = append(watches, r)
			}
		}
		return len(watches) >= 2
	}, deadline, 10*time.Millisecond, "a new watch after the server ended the first")
	assert.Len(t, srv.Requests(), len(watches)+1, "a single LIST")
	first, err := strconv.Atoi(watches[0].Query.Get("resourceVersion"))
	require.NoError(t, err)
	second, err := strconv.Atoi(watches[1].Query.Get("resourceVersion"))
	require.NoError(t, err)
	assert.Greater(t, second, first, "the second watch resumes from the last event seen")
	assert.Equal(t, 0.0, metric(t, h.w, "gpuscope_kubernetes_pod_labels_api_errors_total"))
}

func TestTokenIsReadOnEveryConnection(t *testing.T) {
	srv := apiservertest.Start(t)
	srv.Set(apiservertest.Pod{Namespace: "ml", Name: "train-0", Node: "node-a", Labels: map[string]string{"team": "vision"}})
	h := start(t, srv, Config{})
	h.waitUp(t, true)

	// The kubelet rotates the token; the open watch goes on until it ends.
	srv.SetToken("token-2")
	srv.Expire()
	srv.Set(apiservertest.Pod{Namespace: "ml", Name: "train-0", Node: "node-a", Labels: map[string]string{"team": "rotated"}})
	h.waitLabels(t, "ml", "train-0", []enrich.Label{{Name: "team", Value: "rotated"}})
	reqs := srv.Requests()
	assert.Equal(t, "token-2", reqs[len(reqs)-1].Token)
	assert.Equal(t, 0.0, metric(t, h.w, "gpuscope_kubernetes_pod_labels_api_errors_total"), "the new token was read before the first request that needed it")
}

func TestUnauthorizedIsAnErrorUntilTheTokenIsGood(t *testing.T) {
	srv := apiservertest.Start(t)
	srv.Set(apiservertest.Pod{Namespace: "ml", Name: "train-0", Node: "node-a", Labels: map[string]string{"team": "vision"}})
	srv.SetToken("token-1")
	// The server accepts only token-1; the file holds something else.
	require.NoError(t, os.WriteFile(srv.TokenFile, []byte("stale"), 0o600))
	h := start(t, srv, Config{})
	require.Eventually(t, func() bool {
		return metric(t, h.w, "gpuscope_kubernetes_pod_labels_api_errors_total") >= 2
	}, deadline, 10*time.Millisecond)
	assert.False(t, h.w.Up())
	assert.Equal(t, 1, h.logged(logrus.WarnLevel, "unavailable"), "one warning per outage")
	var msg string
	for _, e := range h.hook.AllEntries() {
		if err, ok := e.Data[logrus.ErrorKey].(error); ok {
			msg = err.Error()
		}
	}
	assert.Contains(t, msg, "401")
	assert.Contains(t, msg, "get, list and watch on pods")

	srv.SetToken("token-1")
	h.waitLabels(t, "ml", "train-0", []enrich.Label{{Name: "team", Value: "vision"}})
	h.waitUp(t, true)
}

func TestServerGoingAwayKeepsTheLastLabels(t *testing.T) {
	srv := apiservertest.Start(t)
	srv.Set(apiservertest.Pod{Namespace: "ml", Name: "train-0", Node: "node-a", Labels: map[string]string{"team": "vision"}})
	h := start(t, srv, Config{})
	h.waitLabels(t, "ml", "train-0", []enrich.Label{{Name: "team", Value: "vision"}})
	h.waitUp(t, true)

	srv.Stop()
	h.waitUp(t, false)
	require.Eventually(t, func() bool {
		return metric(t, h.w, "gpuscope_kubernetes_pod_labels_api_errors_total") >= 2
	}, deadline, 10*time.Millisecond, "reconnects are retried")
	assert.Equal(t, []enrich.Label{{Name: "team", Value: "vision"}}, h.w.Labels("ml", "train-0"), "the last known labels stay")
	assert.Equal(t, 0.0, metric(t, h.w, "gpuscope_kubernetes_pod_labels_up"))
	assert.Equal(t, 1, h.logged(logrus.WarnLevel, "serving the last known labels"))

	srv.SetQuietly(apiservertest.Pod{Namespace: "ml", Name: "train-0", Node: "node-a", Labels: map[string]string{"team": "after"}})
	require.NoError(t, srv.Restart())
	h.waitLabels(t, "ml", "train-0", []enrich.Label{{Name: "team", Value: "after"}})
	h.waitUp(t, true)
	assert.Equal(t, 1, h.logged(logrus.InfoLevel, "answers again"))
}

func TestBoundsArePerNodeAndPerPod(t *testing.T) {
	srv := apiservertest.Start(t)
	for _, name := range []string{"a", "b", "c"} {
		srv.Set(apiservertest.Pod{Namespace: "ml", Name: name, Node: "node-a", Labels: map[string]string{"team": name}})
	}
	h := start(t, srv, Config{MaxPods: 2})
	h.waitUp(t, true)
	require.Eventually(t, func() bool { return metric(t, h.w, "gpuscope_kubernetes_pod_labels_pods") == 2 }, deadline, 10*time.Millisecond)

	// A fourth pod stays out while the bound is reached, and comes in once a
	// pod leaves and it changes.
	srv.Set(apiservertest.Pod{Namespace: "ml", Name: "d", Node: "node-a", Labels: map[string]string{"team": "d"}})
	var kept []string
	for _, name := range []string{"a", "b", "c"} {
		if h.w.Labels("ml", name) != nil {
			kept = append(kept, name)
		}
	}
	require.Len(t, kept, 2)
	srv.Delete("ml", kept[0])
	srv.Set(apiservertest.Pod{Namespace: "ml", Name: "d", Node: "node-a", Labels: map[string]string{"team": "d2"}})
	h.waitLabels(t, "ml", "d", []enrich.Label{{Name: "team", Value: "d2"}})
	assert.Equal(t, 2.0, metric(t, h.w, "gpuscope_kubernetes_pod_labels_pods"))
	assert.Equal(t, 1, h.logged(logrus.WarnLevel, "than the bound"), "logged once")
}

func TestCollisionsAndLabelBoundAreLoggedOnce(t *testing.T) {
	srv := apiservertest.Start(t)
	for _, name := range []string{"a", "b"} {
		srv.Set(apiservertest.Pod{Namespace: "ml", Name: name, Node: "node-a",
			Labels: map[string]string{"team.x": "dot", "team-x": "dash", "k1": "1", "k2": "2", "z1": "over"}})
	}
	h := start(t, srv, Config{Allowlist: allow(`team.x|k.|z.`), MaxLabelsPerPod: 3})
	want := []enrich.Label{{Name: "k1", Value: "1"}, {Name: "k2", Value: "2"}, {Name: "team_x", Value: "dash"}}
	h.waitLabels(t, "ml", "a", want)
	h.waitLabels(t, "ml", "b", want)
	assert.Equal(t, 1, h.logged(logrus.WarnLevel, "sanitise to the same label name"))
	assert.Equal(t, 1, h.logged(logrus.WarnLevel, "more pod labels match the allowlist than the bound"))
}

func TestNewErrors(t *testing.T) {
	re := regexp.MustCompile(`team`)
	tests := []struct {
		name string
		cfg  Config
		env  map[string]string
		want string
	}{
		{"no allowlist", Config{NodeName: "n", Server: "https://x"}, nil, "no allowlist"},
		{"no node", Config{Allowlist: re, Server: "https://x"}, nil, "no node name"},
		{"not in a pod", Config{Allowlist: re, NodeName: "n"},
			map[string]string{"KUBERNETES_SERVICE_HOST": "", "KUBERNETES_SERVICE_PORT": ""}, "KUBERNETES_SERVICE_HOST"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, err := New(tt.cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "443")
	w, err := New(Config{Allowlist: re, NodeName: "n"})
	require.NoError(t, err)
	assert.Equal(t, "https://[fd00::1]:443", w.cfg.Server)
	assert.Equal(t, DefaultTokenFile, w.cfg.TokenFile)
}

func TestCollectorIsValid(t *testing.T) {
	w, err := New(Config{Allowlist: regexp.MustCompile(`x`), NodeName: "n", Server: "https://127.0.0.1:1"})
	require.NoError(t, err)
	problems, err := testutil.CollectAndLint(w)
	require.NoError(t, err)
	assert.Empty(t, problems)
}
