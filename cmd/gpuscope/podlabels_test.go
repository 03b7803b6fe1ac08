package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/config"
)

func TestPodLabelsFlagIsOffByDefault(t *testing.T) {
	p, err := parseArgs(t, "--kubernetes")
	require.NoError(t, err)
	assert.Nil(t, p.cfg.Kubernetes.PodLabels)
	assert.False(t, p.cfg.Given(config.FlagPodLabels))
}

// The pod-labels allowlist is capped so that no series carries more than 30
// labels once stored; one that cannot fit is refused at startup, naming the
// flag, the counts and the counters file.
func TestPodLabelsThatCannotFitAreAStartupError(t *testing.T) {
	manyLabels := filepath.Join(t.TempDir(), "labels.csv")
	csv := "DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DEV_XID_ERRORS, gauge, x\n"
	for _, f := range []string{"DCGM_FI_DRIVER_VERSION", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_MEMORY_TEMP",
		"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_POWER_MGMT_LIMIT", "DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "DCGM_FI_DEV_GPU_UTIL",
		"DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL", "DCGM_FI_DEV_FB_TOTAL", "DCGM_FI_DEV_FB_FREE"} {
		csv += f + ", label, l\n"
	}
	require.NoError(t, os.WriteFile(manyLabels, []byte(csv), 0o600))
	thirteen := "k1|k2|k3|k4|k5|k6|k7|k8|k9|k10|k11|k12|k13"
	twelve := "k1|k2|k3|k4|k5|k6|k7|k8|k9|k10|k11|k12"
	base := []string{"--source", "sim", "--kubernetes", "--hostname", "node-1"}
	tests := []struct {
		name string
		args []string
		want string
	}{
		// Default counters, on a MIG GPU instance: 8 identity + 1 label
		// field + pod, namespace, container + 2 of a family + 4 added
		// later leave 12.
		{"thirteen named keys", []string{"--kubernetes-pod-labels", thirteen},
			`--kubernetes-pod-labels "` + thirteen + `" matches up to 13 label keys but only 12 fit: a series of a MIG GPU instance already carries 18 of the 30 labels`},
		// vgpu and pod_uid (which the per-pod values of virtual GPUs always
		// carry) and GPU_CI_ID take three more.
		{"vgpu and compute instances take three more", []string{"--kubernetes-pod-labels", twelve, "--kubernetes-virtual-gpus", "--mig-compute-instances"},
			"matches up to 12 label keys but only 9 fit: a series of a MIG compute instance already carries 21 of the 30 labels"},
		{"pod_uid and hpc_job take two more", []string{"--kubernetes-pod-labels", twelve, "--kubernetes-pod-uid-label", "--hpc-job-mapping-dir", t.TempDir()},
			"matches up to 12 label keys but only 10 fit"},
		{"a counters file that leaves no room", []string{"-f", manyLabels, "--kubernetes-pod-labels", "team.*"},
			`--kubernetes-pod-labels "team.*": no room for pod labels: a series of a MIG GPU instance already carries 30 of the 30 labels Mimir and Cortex accept (8 identity: gpu, UUID, pci_bus_id, device, modelName, GPU_I_PROFILE, GPU_I_ID, Hostname; 13 label-type fields of ` + manyLabels},
		{"the advice names the options that add labels", []string{"-f", manyLabels, "--kubernetes-pod-labels", "team.*", "--kubernetes-pod-uid-label"},
			"to fit, drop --kubernetes-pod-uid-label (pod_uid) or list fewer label-type fields in " + manyLabels},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
			_, err := run(t, append(base, tt.args...)...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	// Twelve named keys fit: startup goes on to the API server, which is
	// not there outside a pod.
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	_, err := run(t, append(base, "--kubernetes-pod-labels", twelve)...)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "KUBERNETES_SERVICE_HOST")
}
