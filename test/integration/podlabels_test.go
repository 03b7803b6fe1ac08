package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// startLabelledPodNode runs the engine over a simulated node of two GPUs
// whose first GPU the kubelet gives to the pod ml/train-0, with that pod's
// labels (set by the caller on api) watched on a fake API server through the
// allowlist. opts holds what the test chooses (counters, insight); the node,
// the source and the pod enricher are filled in here.
func startLabelledPodNode(t *testing.T, api *apiservertest.Server, allowlist string, opts engine.Options, workloads ...sim.Workload) *engine.Engine {
	t.Helper()
	allow, err := podlabels.CompileAllowlist(allowlist)
	require.NoError(t, err)
	watcher, err := podlabels.New(podlabels.Config{Allowlist: allow, NodeName: "node-1", Server: api.URL(),
		CAFile: api.CAFile, TokenFile: api.TokenFile, MinBackoff: 10 * time.Millisecond, Logger: quietLog().Logger})
	require.NoError(t, err)

	// Unix socket paths are limited to about 100 bytes: a short directory.
	dir, err := os.MkdirTemp("", "kubelet")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	socket := filepath.Join(dir, "kubelet.sock")
	pa, err := podattr.New(podattr.Config{Socket: socket, RefreshInterval: 100 * time.Millisecond,
		PodLabels: watcher, Logger: quietLog()})
	require.NoError(t, err)

	cfg := sim.DefaultConfig()
	cfg.GPUs, cfg.Hostname = 2, "node-1"
	if len(workloads) > 0 {
		cfg.Workloads = workloads
	}
	src, err := sim.New(cfg)
	require.NoError(t, err)
	opts.Source, opts.DefaultInterval, opts.Hostname = src, 100*time.Millisecond, "node-1"
	opts.Enrichers, opts.Log = []enrich.Enricher{pa}, quietLog()
	e, err := engine.New(opts)
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
	require.NotEmpty(t, gpu0)
	kubelet, err := kubelettest.Start(socket, []kubelettest.Pod{{Name: "train-0", Namespace: "ml",
		Containers: []kubelettest.Container{{Name: "trainer", Devices: []kubelettest.Device{{Resource: "nvidia.com/gpu", IDs: []string{gpu0}}}}}}})
	require.NoError(t, err)
	t.Cleanup(kubelet.Stop)
	go func() { _ = pa.Run(ctx) }()
	go func() { _ = watcher.Run(ctx) }()
	return e
}

// TestPodLabelsOnTheSeriesOfAnAttributedGPU runs the engine over a simulated
// node whose first GPU the kubelet gives to one pod, with that pod's labels
// watched on a fake API server: its series carry the selected labels, the
// other GPU's do not, and a label change reaches the exposition.
func TestPodLabelsOnTheSeriesOfAnAttributedGPU(t *testing.T) {
	api := apiservertest.Start(t)
	api.Set(apiservertest.Pod{Namespace: "ml", Name: "train-0", Node: "node-1",
		Labels: map[string]string{"team": "vision", "pod-template-hash": "7f9c"}})
	e := startLabelledPodNode(t, api, `team`, engine.Options{Counters: defaultSet(t)})

	// teamOf returns the the team label of each GPU's DCGM_FI_DEV_GPU_TEMP series.
	teamOf := func() map[string]string {
		out := map[string]string{}
		mf := parse(t, e.Render(nil))["DCGM_FI_DEV_GPU_TEMP"]
		if mf == nil {
			return out
		}
		for _, m := range mf.Metric {
			out[labelOf(m, "gpu")] = labelOf(m, "team")
			assert.Empty(t, labelOf(m, "pod_template_hash"), "a key outside the allowlist")
		}
		return out
	}
	require.Eventually(t, func() bool {
		got := teamOf()
		return got["0"] == "vision" && len(got) == 2
	}, 20*time.Second, 50*time.Millisecond, "GPU 0 series carry the team label of its pod")
	assert.Equal(t, "", teamOf()["1"], "GPU 1 belongs to no pod")
	assert.Contains(t, string(e.Render(nil)), `pod="train-0"`)

	api.Set(apiservertest.Pod{Namespace: "ml", Name: "train-0", Node: "node-1", Labels: map[string]string{"team": "speech"}})
	require.Eventually(t, func() bool { return teamOf()["0"] == "speech" }, 20*time.Second, 50*time.Millisecond,
		"a label change reaches the exposition")
	assert.False(t, strings.Contains(string(e.Render(nil)), `team="vision"`))
}
