package podattr

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/kubelettest"
	"github.com/gpuscope/gpuscope/source"
)

// nodeFixture is a fake node: a /proc tree with GPU processes in pod cgroups
// and the kubelet's container log directories.
type nodeFixture struct {
	proc, logs string
}

func newNodeFixture(t *testing.T) nodeFixture {
	root := t.TempDir()
	f := nodeFixture{proc: filepath.Join(root, "proc"), logs: filepath.Join(root, "log")}
	require.NoError(t, os.MkdirAll(filepath.Join(f.logs, "containers"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(f.logs, "pods"), 0o755))
	return f
}

func (f nodeFixture) process(t *testing.T, pid int, cgroup string) {
	dir := filepath.Join(f.proc, strconv.Itoa(pid))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cgroup), 0o644))
}

func (f nodeFixture) pod(t *testing.T, ns, name, uid string) {
	require.NoError(t, os.MkdirAll(filepath.Join(f.logs, "pods", ns+"_"+name+"_"+uid), 0o755))
}

func (f nodeFixture) container(t *testing.T, ns, pod, container, id string) {
	require.NoError(t, os.WriteFile(filepath.Join(f.logs, "containers", pod+"_"+ns+"_"+container+"-"+id+".log"), nil, 0o644))
}

func TestSharedGPUPerPodUsage(t *testing.T) {
	const (
		uidA = "11111111-2222-4333-8444-555555555555"
		uidB = "66666666-7777-4888-9999-aaaaaaaaaaaa"
		cidA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		cidB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	)
	fx := newNodeFixture(t)
	fx.pod(t, "ml", "trainer-a", uidA)
	fx.pod(t, "ml", "trainer-b", uidB)
	fx.container(t, "ml", "trainer-a", "pytorch", cidA)
	// Pod b's container log is not there yet: it is found through its pod
	// UID and its only GPU container in the kubelet's answer.
	fx.process(t, 100, "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod11111111_2222_4333_8444_555555555555.slice/cri-containerd-"+cidA+".scope\n")
	fx.process(t, 200, "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod66666666_7777_4888_9999_aaaaaaaaaaaa.slice/crio-"+cidB+".scope\n")
	fx.process(t, 300, "11:memory:/kubepods/burstable/pod"+uidA+"/"+cidA+"\n")
	fx.process(t, 400, "0::/system.slice/nv-hostengine.service\n")

	srv := startKubelet(t, []kubelettest.Pod{
		gpuPod("ml", "trainer-a", "pytorch", "nvidia.com/gpu", uuid0+"::0"),
		{Name: "trainer-b", Namespace: "ml", Containers: []kubelettest.Container{
			{Name: "sidecar"},
			{Name: "jax", Devices: []kubelettest.Device{{Resource: "nvidia.com/gpu", IDs: []string{uuid0 + "::1"}}}},
		}},
	})
	procs := []source.Process{
		{PID: 100, UUID: uuid0, GPUInstanceID: -1, UsedMemoryBytes: 4 << 30, SMUtil: 30},
		{PID: 300, UUID: uuid0, GPUInstanceID: -1, UsedMemoryBytes: 1 << 30, SMUtil: 10},
		{PID: 200, UUID: uuid0, GPUInstanceID: -1, UsedMemoryBytes: 2 << 30, SMUtil: 25},
		{PID: 400, UUID: uuid0, GPUInstanceID: -1, UsedMemoryBytes: 1 << 20, SMUtil: 1},
		{PID: 500, UUID: uuid0, GPUInstanceID: -1, UsedMemoryBytes: 1 << 20, SMUtil: -1},
	}
	e, _ := newEnricher(t, Config{
		Socket: srv.Socket(), SharedGPUAttribution: true, PodUIDLabel: true,
		ProcRoot: fx.proc, LogRoot: fx.logs,
		Processes: func() []source.Process { return procs },
		Entities:  func() []*source.Entity { return []*source.Entity{gpuEntity(3, uuid0)} },
	})
	require.NoError(t, e.Refresh(context.Background()))

	assert.Nil(t, e.Values(gpuEntity(3, uuid0)), "the shared GPU's own series carry no pod labels")
	assert.Equal(t, []string{"pod", "namespace", "container", "pod_uid"}, e.LabelNames())

	tests := []struct {
		pod, container string
		mem, sm        float64
	}{
		{"trainer-a", "pytorch", 5 << 30, 0.40},
		{"trainer-b", "jax", 2 << 30, 0.25},
	}
	for _, tt := range tests {
		t.Run(tt.pod, func(t *testing.T) {
			lbl := map[string]string{"pod": tt.pod, "namespace": "ml", "container": tt.container, "gpu": "3", "UUID": uuid0}
			mem, ok := metricValue(t, e, "gpuscope_pod_gpu_memory_used_bytes", lbl)
			require.True(t, ok, "memory series of %s", tt.pod)
			assert.Equal(t, tt.mem, mem)
			sm, ok := metricValue(t, e, "gpuscope_pod_gpu_sm_utilization", lbl)
			require.True(t, ok, "SM series of %s", tt.pod)
			assert.InDelta(t, tt.sm, sm, 1e-9)
		})
	}
	un, _ := metricValue(t, e, "gpuscope_kubernetes_unattributed_processes", nil)
	assert.Equal(t, 2.0, un, "the host engine process and a vanished PID are not given to a pod")

	// The per-process series ask for each process's pod and container.
	owners := []struct {
		pid                       uint32
		pod, namespace, container string
		known                     bool
	}{
		{100, "trainer-a", "ml", "pytorch", true},
		{300, "trainer-a", "ml", "pytorch", true},
		{200, "trainer-b", "ml", "jax", true},
		{400, "", "", "", false},
		{500, "", "", "", false},
	}
	for _, o := range owners {
		pod, ns, ctr, ok := e.ProcessPod(gpuEntity(3, uuid0), o.pid)
		assert.Equal(t, o.known, ok, "PID %d known", o.pid)
		assert.Equal(t, []string{o.pod, o.namespace, o.container}, []string{pod, ns, ctr}, "PID %d", o.pid)
	}
}

func TestPodUIDLabelOnExclusiveGPU(t *testing.T) {
	fx := newNodeFixture(t)
	fx.pod(t, "ml", "p", uidDash)
	srv := startKubelet(t, []kubelettest.Pod{gpuPod("ml", "p", "c", "nvidia.com/gpu", uuid0)})
	e, _ := newEnricher(t, Config{Socket: srv.Socket(), PodUIDLabel: true, LogRoot: fx.logs})
	require.NoError(t, e.Refresh(context.Background()))
	assert.Equal(t, []string{"p", "ml", "c", uidDash}, e.Values(gpuEntity(0, uuid0)))
}
