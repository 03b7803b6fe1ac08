package labelbudget

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAllowlistKeys(t *testing.T) {
	tests := []struct {
		expr   string
		n      int
		finite bool
	}{
		{"team", 1, true},
		{"team|tier|app", 3, true},
		{"app\\.kubernetes\\.io/(name|instance|version)", 3, true},
		{"team-[abc]", 3, true},
		{"team-[0-9]{2}", 100, true},
		{"k[0-9]?", 11, true},
		{"(?i)ab", 4, true},
		{"team.*", 0, false},
		{"a+", 0, false},
		{"k.", 0, false},
		{"[a-z]{1,10}", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			n, finite, err := AllowlistKeys(tt.expr)
			require.NoError(t, err)
			assert.Equal(t, tt.finite, finite)
			if tt.finite {
				assert.Equal(t, tt.n, n)
			}
		})
	}
	_, _, err := AllowlistKeys("team(")
	assert.ErrorContains(t, err, `allowlist "team("`)
}

func TestCountAddsUpAndSaysWhatToDrop(t *testing.T) {
	gi := []string{"gpu", "UUID", "pci_bus_id", "device", "modelName", "GPU_I_PROFILE", "GPU_I_ID", "Hostname"}
	pods := []string{"pod", "namespace", "container", "vgpu"}
	opts := map[string]string{"vgpu": "--kubernetes-virtual-gpus", ExtraOption: "--kubernetes-pod-labels"}
	tests := []struct {
		name   string
		count  Count
		stored int
		room   int
		drop   string // "" when the count fits
	}{
		// dcgm-exporter's default counters hold one label field (the
		// driver version); Kubernetes adds pod, namespace, container, vgpu.
		{"kubernetes", Count{Identity: gi, LabelFields: []string{"DCGM_FI_DRIVER_VERSION"}, Enricher: pods, Family: 2}, 19, 11, ""},
		{"pod labels filling the room", Count{Identity: gi, LabelFields: []string{"DCGM_FI_DRIVER_VERSION"}, Enricher: pods, Extra: 11, Family: 2}, 30, 11, ""},
		{"one pod label too many", Count{Identity: gi, LabelFields: []string{"DCGM_FI_DRIVER_VERSION"}, File: "c.csv", Enricher: pods, Extra: 12, Family: 2, Options: opts},
			31, 11, "to fit, drop --kubernetes-virtual-gpus (vgpu), let --kubernetes-pod-labels name fewer keys or list fewer label-type fields in c.csv"},
		{"nothing to drop", Count{Identity: make([]string, 27)}, 31, -1, "nothing can be dropped"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.stored, tt.count.Stored())
			assert.Equal(t, tt.room, tt.count.Room())
			err := tt.count.Check()
			if tt.drop == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, "over the limit of 30")
			assert.ErrorContains(t, err, tt.drop)
		})
	}
}
