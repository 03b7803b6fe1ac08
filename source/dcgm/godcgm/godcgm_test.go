package godcgm

import (
	"errors"
	"testing"
	"time"

	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/auto"
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

// TestGoDCGMWithoutLibrary runs the real adapter. Without libdcgm.so.4 every
// mode fails with an error naming the mode and the missing library, and no
// other go-dcgm call is made (one would kill the test binary).
func TestGoDCGMWithoutLibrary(t *testing.T) {
	c := New()
	if err := c.Connect(dcgm.ConnectParams{Mode: dcgm.ModeEmbedded}); err == nil {
		_ = c.Disconnect()
		t.Skip("libdcgm.so.4 is installed here; this test covers hosts without it")
	}
	tests := []struct {
		cfg  dcgm.Config
		want string
	}{
		{dcgm.Config{Mode: dcgm.ModeEmbedded}, "dcgm embedded mode: libdcgm.so.4 not found"},
		{dcgm.Config{RemoteHostengine: "localhost:5555"}, "dcgm remote mode (host engine at localhost:5555): libdcgm.so.4 not found"},
		{dcgm.Config{Mode: dcgm.ModeStart}, "dcgm start mode: libdcgm.so.4 not found"},
	}
	for _, tt := range tests {
		_, err := dcgm.New(c, tt.cfg)
		require.ErrorIs(t, err, dcgm.ErrLibraryMissing)
		assert.Contains(t, err.Error(), tt.want)
	}

	// Before a successful Init every call fails cleanly instead of
	// reaching C.
	_, err := c.GPUs()
	assert.ErrorIs(t, err, dcgm.ErrConnectionLost)
	_, _, err = c.ValuesSince(1, 1, 0)
	assert.ErrorIs(t, err, dcgm.ErrConnectionLost)
	assert.ErrorIs(t, c.WatchFields(1, 1, time.Second, time.Second, 1), dcgm.ErrConnectionLost)
	assert.ErrorIs(t, c.PauseProfiling(), dcgm.ErrConnectionLost)
	_, err = c.SupportedProfilingFields(0)
	assert.ErrorIs(t, err, dcgm.ErrConnectionLost)
	assert.NoError(t, c.Disconnect())
}

func TestWrapClassifiesDCGMErrors(t *testing.T) {
	tests := []struct {
		err  error
		want error
	}{
		{errors.New("dcgmGetValuesSince_v2 failed with error code -21"), dcgm.ErrConnectionLost},
		{errors.New("Host engine connection invalid/disconnected"), dcgm.ErrConnectionLost},
		{errors.New("dcgmProfPause failed with error code -33"), dcgm.ErrModuleNotLoaded},
		{errors.New("This request is serviced by a module of DCGM that is not currently loaded"), dcgm.ErrModuleNotLoaded},
		{errors.New("dcgmProfResume failed with error code -34"), dcgm.ErrInUse},
		{errors.New("The requested operation could not be completed because the affected resource is in use."), dcgm.ErrInUse},
		{errors.New("Feature not supported"), dcgm.ErrNotSupported},
		{errors.New("error code -36"), dcgm.ErrNotSupported},
	}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			got := wrap("doing it", tt.err)
			assert.ErrorIs(t, got, tt.want)
			assert.Contains(t, got.Error(), "doing it")
		})
	}
	assert.NoError(t, wrap("x", nil))
	plain := wrap("reading", errors.New("Bad parameter passed to function"))
	for _, s := range []error{dcgm.ErrConnectionLost, dcgm.ErrModuleNotLoaded, dcgm.ErrInUse, dcgm.ErrNotSupported} {
		assert.NotErrorIs(t, plain, s)
	}
}

func TestConnectErrorNamesWhatIsMissing(t *testing.T) {
	remote := dcgm.ConnectParams{Mode: dcgm.ModeRemote, Address: "10.0.0.5:5555"}
	tests := []struct {
		p    dcgm.ConnectParams
		err  error
		is   error
		want string
	}{
		{remote, errors.New("libdcgm.so.4 not found"), dcgm.ErrLibraryMissing, "datacenter-gpu-manager"},
		{remote, errors.New("error connecting to nv-hostengine: Host engine connection invalid/disconnected"), dcgm.ErrNotListening, "at 10.0.0.5:5555"},
		{dcgm.ConnectParams{Mode: dcgm.ModeStart}, errors.New("error finding nv-hostengine: exec: not found"), nil, "not in PATH"},
		{remote, errors.New("error connecting to nv-hostengine: API version mismatch"), dcgm.ErrVersionMismatch, "version mismatch"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			got := connectError(tt.p, tt.err)
			if tt.is != nil {
				assert.ErrorIs(t, got, tt.is)
			}
			assert.Contains(t, got.Error(), tt.want)
		})
	}
}

// TestAutoFallsBackWithoutLibrary runs --source=auto over the real adapter:
// without libdcgm.so.4 it serves the NVML side, and when neither side opens
// the error names both causes.
func TestAutoFallsBackWithoutLibrary(t *testing.T) {
	real := func() (source.Source, error) { return dcgm.New(New(), dcgm.Config{}) }
	probe := New()
	if err := probe.Connect(dcgm.ConnectParams{Mode: dcgm.ModeEmbedded}); err == nil {
		_ = probe.Disconnect()
		t.Skip("libdcgm.so.4 is installed here; this test covers hosts without it")
	}
	l, _ := test.NewNullLogger()
	nvmlStandIn := func() (source.Source, error) { return sourcetest.NewGPUs(2, nil), nil }
	a, err := auto.New(real, nvmlStandIn, l, auto.WithProbe(time.Hour, time.Hour))
	require.NoError(t, err)
	assert.Equal(t, auto.NVML, a.Status().Active)
	require.NoError(t, a.Close())

	_, err = auto.New(real, func() (source.Source, error) { return nil, errors.New("nvml: ERROR_LIBRARY_NOT_FOUND") }, l)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "libdcgm.so.4 not found")
	assert.Contains(t, err.Error(), "ERROR_LIBRARY_NOT_FOUND")
}

// dcgm-exporter's --fake-gpus (internal/pkg/deviceinfo/device_info.go,
// initializeGPUInfo) keeps a GPU whose GetDeviceInfo fails, with GPU set to
// its ID and UUID fake<ID>; without it the failure stops the start.
func TestFakeGPUsAreKeptOnlyWhenAccepted(t *testing.T) {
	read := func(id uint) (dcgm.GPUInfo, error) {
		if id == 1 {
			return dcgm.GPUInfo{}, errors.New("DCGM_ST_NOT_SUPPORTED")
		}
		return dcgm.GPUInfo{ID: id, UUID: "GPU-real"}, nil
	}
	got, err := gpuInfos([]uint{0, 1}, read, true)
	require.NoError(t, err)
	assert.Equal(t, []dcgm.GPUInfo{{ID: 0, UUID: "GPU-real"}, {ID: 1, UUID: "fake1"}}, got)
	_, err = gpuInfos([]uint{0, 1}, read, false)
	assert.ErrorContains(t, err, "DCGM_ST_NOT_SUPPORTED")
}
