package podattr

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	uidDash  = "5f0c7e2a-1b3d-4c5e-8f9a-0b1c2d3e4f50"
	uidUnder = "5f0c7e2a_1b3d_4c5e_8f9a_0b1c2d3e4f50"
	cid      = "0d6b7e9f1a2c3b4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5"
)

func TestParseCgroup(t *testing.T) {
	tests := []struct {
		name, content string
		wantCID       string
	}{
		{"v2 systemd containerd", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidUnder + ".slice/cri-containerd-" + cid + ".scope\n", cid},
		{"v2 systemd CRI-O", "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + uidUnder + ".slice/crio-" + cid + ".scope\n", cid},
		{"v2 systemd docker", "0::/kubepods.slice/kubepods-pod" + uidUnder + ".slice/docker-" + cid + ".scope\n", cid},
		{"v2 seen from another cgroup namespace", "0::/../../kubepods-burstable-pod" + uidUnder + ".slice/cri-containerd-" + cid + ".scope\n", cid},
		{"v1 cgroupfs", "12:pids:/kubepods/burstable/pod" + uidDash + "/" + cid + "\n11:memory:/kubepods/burstable/pod" + uidDash + "/" + cid + "\n", cid},
		{"v1 guaranteed cgroupfs", "4:cpu,cpuacct:/kubepods/pod" + uidDash + "/" + cid + "\n", cid},
		{"v1 systemd, first line not a pod", "13:rdma:/\n12:memory:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidUnder + ".slice/cri-containerd-" + cid + ".scope\n", cid},
		{"pod slice without container", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidUnder + ".slice\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, ok := parseCgroup(strings.NewReader(tt.content))
			require.True(t, ok)
			assert.Equal(t, uidDash, o.PodUID)
			assert.Equal(t, tt.wantCID, o.ContainerID)
		})
	}
}

func TestParseCgroupNotAPod(t *testing.T) {
	for _, c := range []string{
		"0::/system.slice/nv-hostengine.service\n",
		"0::/user.slice/user-1000.slice/session-3.scope\n",
		"garbage without colons\n",
		"",
	} {
		_, ok := parseCgroup(strings.NewReader(c))
		assert.False(t, ok, c)
	}
}

func TestReadLogIndex(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "containers"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "pods", "ml_trainer-0_"+uidDash), 0o755))
	for _, n := range []string{
		"trainer-0_ml_pytorch-" + cid + ".log",
		"not-a-log-file.txt",
		"too_many_parts_here-" + cid + ".log",
		"short_ml_c-abc.log",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(root, "containers", n), nil, 0o644))
	}
	idx, err := readLogIndex(root)
	require.NoError(t, err)
	assert.Equal(t, map[string]podRef{cid: {Namespace: "ml", Pod: "trainer-0", Container: "pytorch"}}, idx.byContainerID)
	assert.Equal(t, map[string]podRef{uidDash: {Namespace: "ml", Pod: "trainer-0"}}, idx.byPodUID)
	assert.Equal(t, uidDash, idx.uidByPod["ml/trainer-0"])

	_, err = readLogIndex(filepath.Join(root, "missing"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "missing")
}
