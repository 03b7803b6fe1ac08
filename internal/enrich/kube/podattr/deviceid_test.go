package podattr

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDeviceKey(t *testing.T) {
	tests := []struct {
		name, id, want string
	}{
		{"GPU UUID", "GPU-3f9a1c2e-7b4d-4e8a-9c1f-2a6b8d0e4f17", "uuid/GPU-3f9a1c2e-7b4d-4e8a-9c1f-2a6b8d0e4f17"},
		{"GPU UUID upper-case hex", "GPU-3F9A1C2E-7B4D-4E8A-9C1F-2A6B8D0E4F17", "uuid/GPU-3f9a1c2e-7b4d-4e8a-9c1f-2a6b8d0e4f17"},
		{"time-sliced ::N", "GPU-3f9a1c2e-7b4d-4e8a-9c1f-2a6b8d0e4f17::3", "uuid/GPU-3f9a1c2e-7b4d-4e8a-9c1f-2a6b8d0e4f17"},
		{"time-sliced -N", "GPU-3f9a1c2e-7b4d-4e8a-9c1f-2a6b8d0e4f17-12", "uuid/GPU-3f9a1c2e-7b4d-4e8a-9c1f-2a6b8d0e4f17"},
		{"MIG UUID", "MIG-a1b2c3d4-e5f6-5789-9abc-def012345678", "mig/MIG-a1b2c3d4-e5f6-5789-9abc-def012345678"},
		{"MIG time-sliced", "MIG-a1b2c3d4-e5f6-5789-9abc-def012345678::1", "mig/MIG-a1b2c3d4-e5f6-5789-9abc-def012345678"},
		{"MIG before R470", "MIG-GPU-3f9a1c2e-7b4d-4e8a-9c1f-2a6b8d0e4f17/3/0", "gi/GPU-3f9a1c2e-7b4d-4e8a-9c1f-2a6b8d0e4f17/3"},
		{"GKE GPU", "nvidia0", "idx/0"},
		{"GKE GPU two digits", "nvidia12", "idx/12"},
		{"GKE MIG", "nvidia0/gi3", "idxgi/0/3"},
		{"GKE MIG time-shared", "nvidia0/gi3/vgpu0", "idxgi/0/3"},
		{"GKE time-shared", "nvidia1/vgpu4", "idx/1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := deviceKey(tt.id)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestDeviceKeyRejects(t *testing.T) {
	for _, id := range []string{
		"", "GPU-", "GPU-3f9a1c2e", "3f9a1c2e-7b4d-4e8a-9c1f-2a6b8d0e4f17", "nvidia", "nvidiaX",
		"nvidia0/gi", "nvidia0/ci1", "GPU-3f9a1c2e-7b4d-4e8a-9c1f-2a6b8d0e4f17:3", "amd.com/gpu-0",
	} {
		t.Run(id, func(t *testing.T) {
			_, err := deviceKey(id)
			require.Error(t, err)
			assert.True(t, strings.Contains(err.Error(), "device ID") || strings.Contains(err.Error(), "empty"), err.Error())
		})
	}
}
