package dcgm

import (
	"fmt"
	"testing"
	"time"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
	// Levels follow DCGM's field table, not ID ranges: the GPU's NVLink
	// bandwidth counters sit among the NvSwitch IDs but are GPU fields.
	for id, want := range map[uint16]level{
		fieldid.GPUTemp:                    levelGPU,
		fieldid.ProfSMActive:               levelGPU,
		fieldid.DriverVersion:              levelGPU,
		fieldid.NVSwitchTemperatureCurrent: levelSwitch,
		fieldid.NVSwitchLinkThroughputTX:   levelLink,
		fieldid.NVSwitchLinkStatus:         levelLink,
		fieldid.NVLinkTXBandwidthTotal:     levelGPU,
		fieldid.NVLinkRXBandwidthL3:        levelGPU,
		fieldid.NVLinkGetState:             levelLink,
		fieldid.ExpGPUHealthStatus:         levelExporter,
	} {
		info, _ := counters.ByID(id)
		assert.Equal(t, want, fieldLevel(id), "field %s", info.Name)
	}
}

func TestKeepAge(t *testing.T) {
	tests := []struct {
		name       string
		window, iv time.Duration
		want       time.Duration
	}{
		{"twice the window", 5 * time.Minute, time.Second, 10 * time.Minute},
		{"at least 30 s", time.Second, 100 * time.Millisecond, 30 * time.Second},
		{"no window given", 0, time.Second, 30 * time.Second},
		{"at least two intervals", 15 * time.Second, time.Minute, 2 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{Window: tt.window}
			assert.Equal(t, tt.want, c.keepAge(tt.iv))
		})
	}
}
