package kubewatch

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
	"github.com/gpuscope/gpuscope/internal/testkit/kubelettest"
	"github.com/gpuscope/gpuscope/internal/testkit/kubetest"
)

// createSlice publishes the node's GPUs as the NVIDIA DRA driver does: one
// ResourceSlice of driver gpu.nvidia.com, pool named after the node, a
// "gpu" device per GPU with its UUID (resource.k8s.io/v1, the version the
// server stores).
func (n *node) createSlice(t *testing.T) {
	t.Helper()
	var devices []any
	for _, gpu := range []string{"0", "1"} {
		devices = append(devices, kubetest.Object{"name": "gpu-" + gpu, "attributes": kubetest.Object{
			"type": kubetest.Object{"string": "gpu"}, "uuid": kubetest.Object{"string": n.uuids[gpu]},
		}})
	}
	slice := kubetest.Object{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
		"metadata": kubetest.Object{"name": n.name + "-gpu.nvidia.com"},
		"spec": kubetest.Object{"driver": "gpu.nvidia.com", "nodeName": n.name,
			"pool":    kubetest.Object{"name": n.name, "generation": 1, "resourceSliceCount": 1},
			"devices": devices}}
	_, err := n.admin.Create(context.Background(), "/apis/resource.k8s.io/v1/resourceslices", slice)
	require.NoError(t, err)
}

// TestDRAClaimsThroughARealAPIServer lists the DRA driver's ResourceSlices
// from the real server with the chart's DRA role: the GPU a claim holds
// carries its pod and claim. As in dcgm-exporter, whose DRA rows copy the
// pod, namespace, container and dra_* attributes and not the pod's labels
// (internal/pkg/transformation/kubernetes.go, PodMapper.Process), the
// selected pod labels stay off a DRA row.
func TestDRAClaimsThroughARealAPIServer(t *testing.T) {
	chart := append([]string{"--set", "kubernetesDRA.enabled=true"}, podLabelsChart...)
	n := startNode(t, chart, append([]string{"--kubernetes-enable-dra"}, podLabelsArgs...)...)
	n.createSlice(t)
	// The slices are listed at start and every 30 s: a restart reads the
	// new slice at once.
	n.restartExporter(t)
	n.createPod(t, "train-0", map[string]string{"team": "vision"})
	n.giveGPUs(t, kubelettest.Pod{Name: "train-0", Namespace: n.podNS, Containers: []kubelettest.Container{{Name: "main",
		Claims: []kubelettest.Claim{{Name: "gpu-claim", Namespace: n.podNS, Devices: []kubelettest.ClaimDevice{
			{Driver: "gpu.nvidia.com", Pool: n.name, Device: "gpu-1"}}}}}}})
	n.waitSeries(t, "the claim's labels", "1", hasLabels(map[string]string{
		"pod": "train-0", "namespace": n.podNS, "container": "main", "team": "",
		"dra_claim_name": "gpu-claim", "dra_claim_namespace": n.podNS, "dra_driver_name": "gpu.nvidia.com",
		"dra_pool_name": n.name, "dra_device_name": "gpu-1"}))
	n.waitSeries(t, "no claim on the other GPU", "0", hasLabels(map[string]string{"pod": "", "dra_claim_name": ""}))
	assert.NotContains(t, n.proc.Output(), "cannot list the DRA ResourceSlices")
}

// TestMissingPermissionIsNamed runs the exporter with configurations that
// read the API server on a chart installed without its RBAC objects
// (kubernetes.rbac.create=false): each logs the resource and verbs the
// service account lacks, and the configuration that cannot start without
// them (counters from a ConfigMap, -m) exits with an error naming them.
func TestMissingPermissionIsNamed(t *testing.T) {
	noRBAC := []string{"--set", "kubernetes.rbac.create=false", "--set", "kubernetesDRA.enabled=true"}
	noRBAC = append(noRBAC, podLabelsChart...)
	n := startNode(t, noRBAC, append([]string{"--kubernetes-enable-dra"}, podLabelsArgs...)...)

	pods := n.waitLog(t, `.*listing pods.*403 Forbidden.*`)
	assert.Contains(t, pods, "get, list and watch on pods", "the pod-label warning names what the service account needs")
	n.waitMetric(t, "gpuscope_kubernetes_pod_labels_up", "0")
	slices := n.waitLog(t, `.*needs list on resourceslices.*`)
	assert.Contains(t, slices, "resource.k8s.io")
	t.Logf("the exporter logged:\n%s\n%s", pods, slices)

	// dcgm-exporter's -m reads the counters from a ConfigMap through the API
	// server, which the chart never grants: the start fails, naming it.
	_, err := n.admin.Create(context.Background(), "/api/v1/namespaces/"+n.chartNS+"/configmaps", kubetest.Object{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": kubetest.Object{"name": "counters"},
		"data": kubetest.Object{"metrics": "DCGM_FI_DEV_GPU_TEMP, gauge, temperature\n"}})
	require.NoError(t, err)
	name, argv := n.view.Command(t, e2etest.Binary(t), "--address", e2etest.FreePort(t), "--source", "sim",
		"-m", n.chartNS+":counters")
	cmd := exec.Command(name, argv...)
	done := make(chan struct{})
	var out []byte
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("gpuscope -m did not exit on a ConfigMap it may not read:\n%s", out)
	}
	require.Error(t, err, "gpuscope started without the counters it was told to read:\n%s", out)
	msg := string(out)
	t.Logf("gpuscope -m said: %s", msg)
	assert.Contains(t, msg, "403 Forbidden")
	assert.Contains(t, msg, "get on configmaps in "+n.chartNS, "the error names the permission: %s", msg)
	assert.NotEqual(t, 127, cmd.ProcessState.ExitCode())
	assert.True(t, strings.Contains(msg, "configmap-data") || strings.Contains(msg, "-m"), "the error names the flag: %s", msg)
}
