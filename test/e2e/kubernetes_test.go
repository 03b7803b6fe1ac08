package e2e

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
	"github.com/gpuscope/gpuscope/internal/testkit/kubelettest"
)

// uuids reads the GPU UUIDs from gpuscope's own exposition.
func uuids(t *testing.T, base string) map[string]string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	out := map[string]string{}
	re := regexp.MustCompile(`DCGM_FI_DEV_GPU_TEMP\{gpu="(\d+)",UUID="([^"]+)"`)
	for _, m := range re.FindAllStringSubmatch(string(body), -1) {
		out[m[1]] = m[2]
	}
	return out
}

// TestPodLabelsThroughPrometheus runs the real binary with --kubernetes
// against a kubelet PodResources server on a unix socket, scraped by a real
// Prometheus. The kubelet starts after gpuscope (series are served without
// pod labels meanwhile), restarts mid-run, and serves an exclusive GPU, a
// time-sliced GPU shared by two pods and a GKE-style device ID.
func TestPodLabelsThroughPrometheus(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "kubelet.sock")
	base, _ := e2etest.GPUScope(t, "--source", "sim", "--sim-gpus", "4", "--kubernetes",
		"--kubernetes-pod-resources-socket", socket, "--kubernetes-refresh-interval", "200ms")
	prom := e2etest.Prometheus(t, []string{strings.TrimPrefix(base, "http://")})

	// No kubelet yet: the GPUs are served, without pod labels, and the
	// attribution says it is down.
	e2etest.Eventually(t, prom, `count(DCGM_FI_DEV_GPU_TEMP)`, 60*time.Second, wantValue(4))
	e2etest.Eventually(t, prom, `gpuscope_kubernetes_up`, 30*time.Second, wantValue(0))

	ids := uuids(t, base)
	require.Len(t, ids, 4)
	pods := []kubelettest.Pod{
		{Name: "trainer-0", Namespace: "ml", Containers: []kubelettest.Container{{Name: "main", Devices: []kubelettest.Device{{Resource: "nvidia.com/gpu", IDs: []string{ids["0"]}}}}}},
		{Name: "infer-a", Namespace: "serving", Containers: []kubelettest.Container{{Name: "server", Devices: []kubelettest.Device{{Resource: "nvidia.com/gpu", IDs: []string{ids["1"] + "::0"}}}}}},
		{Name: "infer-b", Namespace: "serving", Containers: []kubelettest.Container{{Name: "server", Devices: []kubelettest.Device{{Resource: "nvidia.com/gpu", IDs: []string{ids["1"] + "::1"}}}}}},
		{Name: "gke-job", Namespace: "batch", Containers: []kubelettest.Container{{Name: "worker", Devices: []kubelettest.Device{{Resource: "nvidia.com/gpu", IDs: []string{"nvidia2"}}}}}},
	}
	kubelet, err := kubelettest.Start(socket, pods)
	require.NoError(t, err)
	defer kubelet.Stop()

	check := func() {
		t.Helper()
		e2etest.Eventually(t, prom, `DCGM_FI_DEV_GPU_TEMP{gpu="0"}`, 30*time.Second, wantLabels(map[string]string{"pod": "trainer-0", "namespace": "ml", "container": "main"}))
		e2etest.Eventually(t, prom, `DCGM_FI_DEV_GPU_TEMP{gpu="2"}`, 30*time.Second, wantLabels(map[string]string{"pod": "gke-job", "namespace": "batch", "container": "worker"}))
		// The time-sliced GPU is not given to the last pod listed.
		e2etest.Eventually(t, prom, `DCGM_FI_DEV_GPU_TEMP{gpu="1"}`, 30*time.Second, wantLabels(map[string]string{"pod": "", "namespace": ""}))
		e2etest.Eventually(t, prom, `DCGM_FI_DEV_GPU_TEMP{gpu="3"}`, 30*time.Second, wantLabels(map[string]string{"pod": ""}))
		e2etest.Eventually(t, prom, `gpuscope_kubernetes_up`, 30*time.Second, wantValue(1))
	}
	check()

	// The kubelet restarts: gpuscope keeps serving, says so, and the labels
	// come back.
	kubelet.Stop()
	e2etest.Eventually(t, prom, `gpuscope_kubernetes_up`, 30*time.Second, wantValue(0))
	e2etest.Eventually(t, prom, `count(DCGM_FI_DEV_GPU_TEMP)`, 30*time.Second, wantValue(4))
	require.NoError(t, kubelet.Restart())
	check()
}

func wantValue(v float64) func([]e2etest.Sample) error {
	return func(res []e2etest.Sample) error {
		if len(res) != 1 || res[0].Value != v {
			return fmt.Errorf("want one sample of %v, got %+v", v, res)
		}
		return nil
	}
}

func wantLabels(want map[string]string) func([]e2etest.Sample) error {
	return func(res []e2etest.Sample) error {
		if len(res) != 1 {
			return fmt.Errorf("want one series, got %d: %+v", len(res), res)
		}
		for k, v := range want {
			if res[0].Metric[k] != v {
				return fmt.Errorf("label %s=%q, want %q (series %v)", k, res[0].Metric[k], v, res[0].Metric)
			}
		}
		return nil
	}
}
