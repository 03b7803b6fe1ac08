package integration

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/internal/enrich/kube/podattr"
	"github.com/gpuscope/gpuscope/internal/enrich/kube/podlabels"
	"github.com/gpuscope/gpuscope/internal/testkit/apiservertest"
	"github.com/gpuscope/gpuscope/internal/testkit/kubelettest"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/sim"
)

// TestPodLabelNamedLikeAGpuscopeLabel: a pod owner labels the pod bound=yes,
// stat=x, clock_event=y and peer_gpu=z, the labels gpuscope's insight,
// window, clock-event and P2P families write, and the allowlist copies them. With insight
// on, the exposition must still parse (a label written twice makes
// Prometheus drop the whole target) and keep gpuscope's values.
func TestPodLabelNamedLikeAGpuscopeLabel(t *testing.T) {
	api := apiservertest.Start(t)
	api.Set(apiservertest.Pod{Namespace: "ml", Name: "train-0", Node: "node-1",
		Labels: map[string]string{"team": "vision", "bound": "yes", "stat": "x", "clock_event": "y", "peer_gpu": "z"}})
	allow, err := podlabels.CompileAllowlist(`team|bound|stat|clock_event|peer_gpu`)
	require.NoError(t, err)
	watcher, err := podlabels.New(podlabels.Config{Allowlist: allow, NodeName: "node-1", Server: api.URL(),
		CAFile: api.CAFile, TokenFile: api.TokenFile, MinBackoff: 10 * time.Millisecond, Logger: quietLog().Logger})
	require.NoError(t, err)
	dir, err := os.MkdirTemp("", "kubelet")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	socket := filepath.Join(dir, "kubelet.sock")
	pa, err := podattr.New(podattr.Config{Socket: socket, RefreshInterval: 100 * time.Millisecond, PodLabels: watcher, Logger: quietLog()})
	require.NoError(t, err)

	cfg := sim.DefaultConfig()
	cfg.GPUs, cfg.Hostname = 2, "node-1"
	cfg.Workloads = []sim.Workload{sim.ComputeBound, sim.ComputeBound}
	src, err := sim.New(cfg)
	require.NoError(t, err)
	set := parseCSV(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t, 100ms, min max\nDCGM_FI_DEV_CLOCKS_EVENT_REASONS, gauge, c, 100ms\n"+
		"DCGM_EXP_P2P_STATUS, gauge, p\n")
	e, err := engine.New(engine.Options{Source: src, Counters: set, DefaultInterval: 100 * time.Millisecond,
		Hostname: "node-1", Enrichers: []enrich.Enricher{pa}, Log: quietLog(), Insight: true, InsightWindow: 2 * time.Second})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.NoError(t, e.Start(ctx))
	t.Cleanup(e.Stop)
	var gpu0 string
	for _, ent := range e.Entities() {
		if ent.Kind == source.GPU && ent.GPU == 0 {
			gpu0 = ent.UUID
		}
	}
	kubelet, err := kubelettest.Start(socket, []kubelettest.Pod{{Name: "train-0", Namespace: "ml",
		Containers: []kubelettest.Container{{Name: "trainer", Devices: []kubelettest.Device{{Resource: "nvidia.com/gpu", IDs: []string{gpu0}}}}}}})
	require.NoError(t, err)
	t.Cleanup(kubelet.Stop)
	go func() { _ = pa.Run(ctx) }()
	go func() { _ = watcher.Run(ctx) }()

	var lastErr error
	ok := assert.Eventually(t, func() bool {
		out := e.Render(nil)
		p := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := p.TextToMetricFamilies(bytes.NewReader(out))
		if lastErr = err; err != nil {
			return false
		}
		bound := mfs["gpuscope_gpu_bound_ratio"]
		if bound == nil || len(bound.Metric) == 0 || labelOf(bound.Metric[0], "team") != "vision" {
			return false
		}
		for _, m := range bound.Metric {
			assert.NotEqual(t, "yes", labelOf(m, "bound"))
		}
		for _, m := range mfs["DCGM_FI_DEV_GPU_TEMP_window"].GetMetric() {
			assert.NotEqual(t, "x", labelOf(m, "stat"))
		}
		p2p := mfs["DCGM_EXP_P2P_STATUS"].GetMetric()
		if len(p2p) == 0 {
			return false
		}
		for _, m := range p2p {
			assert.NotEqual(t, "z", labelOf(m, "peer_gpu"))
		}
		return true
	}, 60*time.Second, 100*time.Millisecond, "insight series with the pod's labels, and an exposition that parses")
	if !ok && lastErr != nil {
		t.Logf("last parse error: %v", lastErr)
	}
}
