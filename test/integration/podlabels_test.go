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

// TestPodLabelsOnTheSeriesOfAnAttributedGPU runs the engine over a simulated
// node whose first GPU the kubelet gives to one pod, with that pod's labels
// watched on a fake API server: its series carry the selected labels, the
// other GPU's do not, and a label change reaches the exposition.
func TestPodLabelsOnTheSeriesOfAnAttributedGPU(t *testing.T) {
	api := apiservertest.Start(t)
	api.Set(apiservertest.Pod{Namespace: "ml", Name: "train-0", Node: "node-1",
		Labels: map[string]string{"team": "vision", "pod-template-hash": "7f9c"}})
	allow, err := podlabels.CompileAllowlist(`team`)
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
	src, err := sim.New(cfg)
	require.NoError(t, err)
	e, err := engine.New(engine.Options{Source: src, Counters: defaultSet(t), DefaultInterval: 100 * time.Millisecond,
		Hostname: "node-1", Enrichers: []enrich.Enricher{pa}, Log: quietLog()})
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
