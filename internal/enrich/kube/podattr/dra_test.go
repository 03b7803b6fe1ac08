package podattr

import (
	"context"
	"testing"

	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/enrich/kube/draslices"
	"github.com/gpuscope/gpuscope/internal/testkit/apiservertest"
	"github.com/gpuscope/gpuscope/internal/testkit/kubelettest"
)

// draPod is a pod whose container holds devices of the NVIDIA DRA driver
// through one ResourceClaim.
func draPod(ns, name, container, claim string, devices ...kubelettest.ClaimDevice) kubelettest.Pod {
	return kubelettest.Pod{Name: name, Namespace: ns, Containers: []kubelettest.Container{{
		Name: container, Claims: []kubelettest.Claim{{Name: claim, Namespace: ns, Devices: devices}},
	}}}
}

func nvidiaDevice(device string) kubelettest.ClaimDevice {
	return kubelettest.ClaimDevice{Driver: draslices.Driver, Pool: "node-1", Device: device, CDI: []string{"k8s.gpu.nvidia.com/device=" + device}}
}

// startSlices serves the NVIDIA DRA driver's ResourceSlice of node-1 on a
// fake API server and lists it once.
func startSlices(t *testing.T) *draslices.Watcher {
	t.Helper()
	api := apiservertest.Start(t)
	api.SetResourceSlice(apiservertest.ResourceSlice{Name: "node-1-gpus", Driver: draslices.Driver, Pool: "node-1", Node: "node-1",
		Devices: []apiservertest.SliceDevice{
			{Name: "gpu-0", Attributes: map[string]string{"type": "gpu", "uuid": uuid0}},
			{Name: "gpu-1-mig-0", Attributes: map[string]string{"type": "mig", "uuid": mig0, "parentUUID": uuid1, "profile": "1g.10gb"}},
		}})
	l, _ := test.NewNullLogger()
	w, err := draslices.New(draslices.Config{Server: api.URL(), TokenFile: api.TokenFile, CAFile: api.CAFile, Node: "node-1", Logger: l})
	require.NoError(t, err)
	require.NoError(t, w.Refresh(context.Background()))
	return w
}

// Expectations from dcgm-exporter's internal/pkg/transformation/kubernetes.go
// (toDeviceToPodsDRA, and Process's DRA pass), dra.go and const.go: a GPU
// held through claims of gpu.nvidia.com gets one copy of its series per
// container, with pod, namespace, container and the dra_* labels; a MIG
// device counts for its parent GPU and adds dra_mig_profile and
// dra_mig_device_uuid; other drivers and unknown devices add nothing; the
// series of a MIG instance itself get no DRA copies (its ID is not a UUID).
func TestDRAGivesOneRowPerClaimHolder(t *testing.T) {
	other := kubelettest.ClaimDevice{Driver: "net.example.com", Pool: "node-1", Device: "gpu-0"}
	pods := []kubelettest.Pod{
		draPod("ml", "train", "main", "gpu-claim", nvidiaDevice("gpu-0")),
		draPod("ml", "eval", "main", "shared-claim", nvidiaDevice("gpu-0"), nvidiaDevice("gpu-0")),
		draPod("ml", "small", "worker", "mig-claim", nvidiaDevice("gpu-1-mig-0")),
		draPod("ml", "nic", "main", "nic-claim", other),
		draPod("ml", "ghost", "main", "ghost-claim", nvidiaDevice("gpu-9")),
		gpuPod("ml", "plugin", "main", "nvidia.com/gpu", uuid2),
	}
	srv := startKubelet(t, pods)
	e, _ := newEnricher(t, Config{Socket: srv.Socket(), DRA: startSlices(t)})
	require.NoError(t, e.Refresh(context.Background()))

	assert.Equal(t, []string{"pod", "namespace", "container", "dra_claim_name", "dra_claim_namespace", "dra_driver_name",
		"dra_pool_name", "dra_device_name", "dra_mig_profile", "dra_mig_device_uuid"}, e.LabelNames())
	assert.ElementsMatch(t, [][]string{
		{"train", "ml", "main", "gpu-claim", "ml", "gpu.nvidia.com", "node-1", "gpu-0", "", ""},
		{"eval", "ml", "main", "shared-claim", "ml", "gpu.nvidia.com", "node-1", "gpu-0", "", ""},
	}, e.ValueRows(gpuEntity(0, uuid0)), "one row per container, once even when its claim names the GPU twice")
	assert.Equal(t, [][]string{
		{"small", "ml", "worker", "mig-claim", "ml", "gpu.nvidia.com", "node-1", "gpu-1-mig-0", "1g.10gb", mig0},
	}, e.ValueRows(gpuEntity(1, uuid1)), "a MIG device's holder is copied onto its parent GPU")
	assert.Nil(t, e.ValueRows(migEntity(1, uuid1, mig0, 1)), "MIG instance series get no DRA copies")
	assert.Nil(t, e.ValueRows(gpuEntity(2, uuid2)), "a device-plugin GPU keeps its one series")
	assert.Equal(t, []string{"plugin", "ml", "main", "", "", "", "", "", "", ""}, e.Values(gpuEntity(2, uuid2)),
		"device-plugin labels as before, the DRA labels empty")
	v, ok := metricValue(t, e, "gpuscope_kubernetes_gpu_pods", nil)
	require.True(t, ok)
	assert.Equal(t, 4.0, v, "train, eval, small and plugin hold a GPU")
}

func TestDRAOffReadsNoClaims(t *testing.T) {
	srv := startKubelet(t, []kubelettest.Pod{draPod("ml", "train", "main", "gpu-claim", nvidiaDevice("gpu-0"))})
	e, _ := newEnricher(t, Config{Socket: srv.Socket()})
	require.NoError(t, e.Refresh(context.Background()))
	assert.Equal(t, []string{"pod", "namespace", "container"}, e.LabelNames())
	assert.Nil(t, e.ValueRows(gpuEntity(0, uuid0)))
	assert.Nil(t, e.Values(gpuEntity(0, uuid0)))
}
