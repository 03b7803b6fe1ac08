package draslices

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus/hooks/test"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/apiservertest"
)

func newWatcher(t *testing.T, api *apiservertest.Server, node string) *Watcher {
	t.Helper()
	l, _ := test.NewNullLogger()
	w, err := New(Config{Server: api.URL(), TokenFile: api.TokenFile, CAFile: api.CAFile, Node: node, Logger: l})
	require.NoError(t, err)
	return w
}

// gpuSlice is what the NVIDIA DRA driver publishes for node-1: a whole GPU
// and a MIG device of another GPU.
func gpuSlice() apiservertest.ResourceSlice {
	return apiservertest.ResourceSlice{Name: "node-1-gpu.nvidia.com-abc", Driver: Driver, Pool: "node-1", Node: "node-1",
		Devices: []apiservertest.SliceDevice{
			{Name: "gpu-0", Attributes: map[string]string{"type": "gpu", "uuid": "GPU-0000"}},
			{Name: "gpu-1-mig-1g10gb-0", Attributes: map[string]string{"type": "mig", "uuid": "MIG-1111", "parentUUID": "GPU-1111", "profile": "1g.10gb"}},
			{Name: "gpu-2-mig-orphan", Attributes: map[string]string{"type": "mig", "uuid": "MIG-2222"}},
			{Name: "gpu-3", Attributes: map[string]string{"type": "vgpu", "uuid": "GPU-3333"}},
		}}
}

// Expectations from dcgm-exporter's internal/pkg/transformation/dra.go
// (onAddOrUpdate, GetDeviceInfo): "gpu" devices map to their uuid, "mig"
// devices to their parentUUID with MIG UUID and profile, a MIG device
// without parent and other types to nothing; only gpu.nvidia.com's slices.
func TestLookup(t *testing.T) {
	api := apiservertest.Start(t)
	api.SetResourceSlice(gpuSlice())
	api.SetResourceSlice(apiservertest.ResourceSlice{Name: "other", Driver: "net.example.com", Pool: "node-1", Node: "node-1",
		Devices: []apiservertest.SliceDevice{{Name: "nic-0", Attributes: map[string]string{"type": "gpu", "uuid": "GPU-NIC"}}}})
	for _, version := range []string{"v1beta1", "v1"} {
		t.Run(version, func(t *testing.T) {
			api.ServeSliceVersions(version)
			w := newWatcher(t, api, "node-1")
			require.NoError(t, w.Refresh(context.Background()))
			assert.True(t, w.Up())
			tests := []struct {
				pool, device string
				want         Device
				ok           bool
			}{
				{"node-1", "gpu-0", Device{UUID: "GPU-0000"}, true},
				{"node-1", "gpu-1-mig-1g10gb-0", Device{UUID: "GPU-1111", MIGUUID: "MIG-1111", Profile: "1g.10gb"}, true},
				{"node-1", "gpu-2-mig-orphan", Device{}, false},
				{"node-1", "gpu-3", Device{}, false},
				{"node-1", "nic-0", Device{}, false},
				{"node-2", "gpu-0", Device{}, false},
			}
			for _, tt := range tests {
				got, ok := w.Lookup(tt.pool, tt.device)
				assert.Equal(t, tt.ok, ok, "%s/%s", tt.pool, tt.device)
				assert.Equal(t, tt.want, got, "%s/%s", tt.pool, tt.device)
			}
		})
	}
	api.ServeSliceVersions()
	w := newWatcher(t, api, "node-1")
	err := w.Refresh(context.Background())
	require.Error(t, err, "no version served")
	assert.Contains(t, err.Error(), "resourceslices")
	assert.False(t, w.Up())
}

func TestSliceChangesAndNodeScope(t *testing.T) {
	api := apiservertest.Start(t)
	api.SetResourceSlice(gpuSlice())
	w := newWatcher(t, api, "node-2")
	require.NoError(t, w.Refresh(context.Background()))
	_, ok := w.Lookup("node-1", "gpu-0")
	assert.False(t, ok, "another node's slices are not listed")
	var last apiservertest.Request
	for _, r := range api.Requests() {
		last = r
	}
	assert.Equal(t, "/apis/resource.k8s.io/v1beta1/resourceslices", last.Path, "dcgm-exporter's version first")
	assert.Equal(t, "spec.driver=gpu.nvidia.com,spec.nodeName=node-2", last.Query.Get("fieldSelector"))

	w = newWatcher(t, api, "node-1")
	require.NoError(t, w.Refresh(context.Background()))
	_, ok = w.Lookup("node-1", "gpu-0")
	require.True(t, ok)
	api.DeleteResourceSlice(gpuSlice().Name)
	require.NoError(t, w.Refresh(context.Background()))
	_, ok = w.Lookup("node-1", "gpu-0")
	assert.False(t, ok, "a deleted slice's devices are forgotten")

	api.SetResourceSlice(gpuSlice())
	bad := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(bad, []byte("not-the-token"), 0o600))
	w.api.TokenFile = bad
	err := w.Refresh(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "needs list on resourceslices")
}

func TestNewOutsideAPod(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	_, err := New(Config{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "KUBERNETES_SERVICE_HOST")
}

func TestMaxDevices(t *testing.T) {
	api := apiservertest.Start(t)
	api.SetResourceSlice(gpuSlice())
	l, _ := test.NewNullLogger()
	w, err := New(Config{Server: api.URL(), TokenFile: api.TokenFile, CAFile: api.CAFile, MaxDevices: 1, Logger: l})
	require.NoError(t, err)
	require.NoError(t, w.Refresh(context.Background()))
	assert.Len(t, *w.devices.Load(), 1)
}
