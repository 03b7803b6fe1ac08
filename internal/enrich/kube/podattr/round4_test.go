package podattr

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/kubelettest"
	"github.com/gpuscope/gpuscope/source"
)

// Round 4, item 6: a cgroup path that names another pod's UID and
// container where the process cannot be that pod's.
const (
	victimUID   = "66666666-7777-4888-9999-aaaaaaaaaaaa"
	victimUIDu  = "66666666_7777_4888_9999_aaaaaaaaaaaa"
	victimCID   = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	attackUID   = "11111111-2222-4333-8444-555555555555"
	attackUIDu  = "11111111_2222_4333_8444_555555555555"
	attackCID   = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	victimSlice = "/kubepods-burstable-pod" + victimUIDu + ".slice/cri-containerd-" + victimCID + ".scope"
	attackScope = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + attackUIDu + ".slice/cri-containerd-" + attackCID + ".scope"
)

// TestCgroupRound4ForeignPodInPath: only the kubelet's own layout names a
// pod: the first pod segment under the kubepods root, and the container
// segment right below it. A user's systemd scope or a cgroup nested in a
// container, named after another pod, does not make a process that pod's.
func TestCgroupRound4ForeignPodInPath(t *testing.T) {
	tests := []struct {
		name, content string
		ok            bool
		uid, cid      string
	}{
		{"user systemd scope named after a pod", "0::/user.slice/user-1000.slice/user@1000.service/app.slice/kubepods.slice" + victimSlice + "\n", false, "", ""},
		{"system service named after a pod", "0::/system.slice/evil.service/kubepods.slice" + victimSlice + "\n", false, "", ""},
		{"kubepods only in a name", "0::/user.slice/kubepods-fake/pod" + victimUID + "/" + victimCID + "\n", false, "", ""},
		{"pod UID inside a longer segment", "0::/kubepods.slice/xpod" + victimUIDu + "y.slice/cri-containerd-" + victimCID + ".scope\n", false, "", ""},
		{"nested cgroup of a container named after another pod", "0::" + attackScope + "/kubepods.slice" + victimSlice + "\n", true, attackUID, attackCID},
		{"nested cgroup one level", "0::" + attackScope + "/cri-containerd-" + victimCID + ".scope\n", true, attackUID, attackCID},
		{"v1 nested", "11:memory:/kubepods/burstable/pod" + attackUID + "/" + attackCID + "/pod" + victimUID + "/" + victimCID + "\n", true, attackUID, attackCID},
		{"kind node root", "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod" + attackUIDu + ".slice/cri-containerd-" + attackCID + ".scope\n", true, attackUID, attackCID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, ok := parseCgroup(strings.NewReader(tt.content))
			require.Equal(t, tt.ok, ok, "%+v", o)
			assert.Equal(t, tt.uid, o.PodUID)
			assert.Equal(t, tt.cid, o.ContainerID)
		})
	}
}

// TestSharedGPURound4VictimNotCharged: the attacker's processes in cgroups
// named after the victim pod charge the attacker (nested in its own
// container) or nobody (a user scope), never the victim.
func TestSharedGPURound4VictimNotCharged(t *testing.T) {
	fx := newNodeFixture(t)
	fx.pod(t, "ml", "victim", victimUID)
	fx.pod(t, "ml", "attacker", attackUID)
	fx.container(t, "ml", "victim", "main", victimCID)
	fx.container(t, "ml", "attacker", "main", attackCID)
	fx.process(t, 100, "0::/kubepods.slice/kubepods-burstable.slice"+victimSlice+"\n")
	fx.process(t, 200, "0::"+attackScope+"/kubepods.slice"+victimSlice+"\n")
	fx.process(t, 300, "0::/user.slice/user-1000.slice/user@1000.service/app.slice/kubepods.slice"+victimSlice+"\n")
	srv := startKubelet(t, []kubelettest.Pod{
		gpuPod("ml", "victim", "main", "nvidia.com/gpu", uuid0+"::0"),
		gpuPod("ml", "attacker", "main", "nvidia.com/gpu", uuid0+"::1"),
	})
	procs := []source.Process{
		{PID: 100, UUID: uuid0, GPUInstanceID: -1, UsedMemoryBytes: 1 << 30, SMUtil: 10},
		{PID: 200, UUID: uuid0, GPUInstanceID: -1, UsedMemoryBytes: 40 << 30, SMUtil: 45},
		{PID: 300, UUID: uuid0, GPUInstanceID: -1, UsedMemoryBytes: 30 << 30, SMUtil: 40},
	}
	e, _ := newEnricher(t, Config{
		Socket: srv.Socket(), SharedGPUAttribution: true,
		ProcRoot: fx.proc, LogRoot: fx.logs,
		Processes: func() []source.Process { return procs },
		Entities:  func() []*source.Entity { return []*source.Entity{gpuEntity(0, uuid0)} },
	})
	require.NoError(t, e.Refresh(context.Background()))
	tests := []struct {
		pod     string
		mem, sm float64
	}{
		{"victim", 1 << 30, 0.10},
		{"attacker", 40 << 30, 0.45},
	}
	for _, tt := range tests {
		lbl := map[string]string{"pod": tt.pod, "namespace": "ml", "container": "main"}
		mem, ok := metricValue(t, e, "gpuscope_pod_gpu_memory_used_bytes", lbl)
		require.True(t, ok, tt.pod)
		assert.Equal(t, tt.mem, mem, "%s memory", tt.pod)
		sm, _ := metricValue(t, e, "gpuscope_pod_gpu_sm_utilization", lbl)
		assert.InDelta(t, tt.sm, sm, 1e-9, "%s SM", tt.pod)
	}
	un, _ := metricValue(t, e, "gpuscope_kubernetes_unattributed_processes", nil)
	assert.Equal(t, 1.0, un, "the user scope's process is nobody's")
}
