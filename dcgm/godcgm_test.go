package dcgm

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGoDCGMWithoutLibrary runs the real adapter. Without libdcgm.so.4 every
// mode fails with an error naming the mode and the missing library, and no
// other go-dcgm call is made (one would kill the test binary).
func TestGoDCGMWithoutLibrary(t *testing.T) {
	c := NewGoDCGM()
	if err := c.Connect(ConnectParams{Mode: ModeEmbedded}); err == nil {
		_ = c.Disconnect()
		t.Skip("libdcgm.so.4 is installed here; this test covers hosts without it")
	}
	for _, cfg := range []Config{
		{Mode: ModeEmbedded},
		{RemoteHostengine: "localhost:5555"},
		{Mode: ModeStart},
	} {
		_, err := New(c, cfg)
		require.ErrorIs(t, err, ErrLibraryMissing)
		d := cfg.withDefaults()
		p, _ := d.connectParams()
		assert.Contains(t, err.Error(), "dcgm "+p.describe()+": libdcgm.so.4 not found")
	}

	// Before a successful Init every call fails cleanly instead of
	// reaching C.
	_, err := c.GPUs()
	assert.ErrorIs(t, err, ErrConnectionLost)
	_, _, err = c.ValuesSince(1, 1, 0)
	assert.ErrorIs(t, err, ErrConnectionLost)
	assert.ErrorIs(t, c.WatchFields(1, 1, time.Second, time.Second, 1), ErrConnectionLost)
	assert.ErrorIs(t, c.PauseProfiling(), ErrConnectionLost)
	_, err = c.SupportedProfilingFields(0)
	assert.ErrorIs(t, err, ErrConnectionLost)
	assert.NoError(t, c.Disconnect())
}

func TestWrapClassifiesDCGMErrors(t *testing.T) {
	tests := []struct {
		err  error
		want error
	}{
		{errors.New("dcgmGetValuesSince_v2 failed with error code -21"), ErrConnectionLost},
		{errors.New("Host engine connection invalid/disconnected"), ErrConnectionLost},
		{errors.New("dcgmProfPause failed with error code -33"), ErrModuleNotLoaded},
		{errors.New("This request is serviced by a module of DCGM that is not currently loaded"), ErrModuleNotLoaded},
		{errors.New("dcgmProfResume failed with error code -34"), ErrInUse},
		{errors.New("The requested operation could not be completed because the affected resource is in use."), ErrInUse},
		{errors.New("Feature not supported"), ErrNotSupported},
		{errors.New("error code -36"), ErrNotSupported},
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
	for _, s := range []error{ErrConnectionLost, ErrModuleNotLoaded, ErrInUse, ErrNotSupported} {
		assert.NotErrorIs(t, plain, s)
	}
}

func TestConnectErrorNamesWhatIsMissing(t *testing.T) {
	remote := ConnectParams{Mode: ModeRemote, Address: "10.0.0.5:5555"}
	tests := []struct {
		p    ConnectParams
		err  error
		is   error
		want string
	}{
		{remote, errors.New("libdcgm.so.4 not found"), ErrLibraryMissing, "datacenter-gpu-manager"},
		{remote, errors.New("error connecting to nv-hostengine: Host engine connection invalid/disconnected"), ErrNotListening, "at 10.0.0.5:5555"},
		{ConnectParams{Mode: ModeStart}, errors.New("error finding nv-hostengine: exec: not found"), nil, "not in PATH"},
		{remote, errors.New("error connecting to nv-hostengine: API version mismatch"), ErrVersionMismatch, "version mismatch"},
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

func TestConnectParams(t *testing.T) {
	tests := []struct {
		cfg  Config
		want ConnectParams
	}{
		{Config{}, ConnectParams{Mode: ModeEmbedded}},
		{Config{Mode: ModeStart}, ConnectParams{Mode: ModeStart}},
		{Config{RemoteHostengine: "node:5556"}, ConnectParams{Mode: ModeRemote, Address: "node:5556"}},
		{Config{RemoteHostengine: "node"}, ConnectParams{Mode: ModeRemote, Address: "node:5555"}},
		{Config{RemoteHostengine: ":5555"}, ConnectParams{Mode: ModeRemote, Address: "localhost:5555"}},
		{Config{RemoteHostengine: "[::1]:5555"}, ConnectParams{Mode: ModeRemote, Address: "[::1]:5555"}},
		{Config{RemoteHostengine: "/run/he.sock"}, ConnectParams{Mode: ModeRemote, Address: "/run/he.sock", UnixSocket: true}},
		{Config{RemoteHostengine: "unix:///run/he.sock"}, ConnectParams{Mode: ModeRemote, Address: "/run/he.sock", UnixSocket: true}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.cfg.Mode, tt.cfg.RemoteHostengine), func(t *testing.T) {
			c := tt.cfg.withDefaults()
			got, err := c.connectParams()
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestClassifyBlanks(t *testing.T) {
	tests := []struct {
		name string
		v    Value
		want blankKind
	}{
		{"int", Value{Kind: KindInt64, Int: 42}, valueOK},
		{"int32 blank", Value{Kind: KindInt64, Int: int32Blank}, valueBlank},
		{"int32 not supported", Value{Kind: KindInt64, Int: int32Blank + 2}, valueUnsupported},
		{"int32 not permissioned", Value{Kind: KindInt64, Int: int32Blank + 3}, valueBlank},
		{"large int64 counter", Value{Kind: KindInt64, Int: int32Blank + 100}, valueOK},
		{"int64 blank", Value{Kind: KindInt64, Int: int64Blank}, valueBlank},
		{"int64 not supported", Value{Kind: KindInt64, Int: int64Blank + 2}, valueUnsupported},
		{"float", Value{Kind: KindFloat64, Float: 0.5}, valueOK},
		{"fp64 blank", Value{Kind: KindFloat64, Float: fp64Blank}, valueBlank},
		{"fp64 not supported", Value{Kind: KindFloat64, Float: fp64Blank + 2}, valueUnsupported},
		{"string", Value{Kind: KindString, Str: "550.54.15"}, valueOK},
		{"string blank", Value{Kind: KindString, Str: "<<<NULL>>>"}, valueBlank},
		{"string not supported", Value{Kind: KindString, Str: "<<<NOT_SUPPORTED>>>"}, valueUnsupported},
		{"bad status", Value{Kind: KindInt64, Int: 1, Status: -14}, valueBlank},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, classify(&tt.v))
		})
	}
}

func TestFieldLevels(t *testing.T) {
	for id, want := range map[uint16]level{150: levelGPU, 1002: levelGPU, 700: levelSwitch, 858: levelSwitch, 780: levelLink, 870: levelLink, 0xF003: levelExporter} {
		assert.Equal(t, want, fieldLevel(id), "field %d", id)
	}
}
