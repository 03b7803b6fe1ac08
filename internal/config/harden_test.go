package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/serve/server"
)

// TestSamplesAPIBoundsNameTheirFlags: the read API's bounds default to the
// server's and a bad value names its flag.
func TestSamplesAPIBoundsNameTheirFlags(t *testing.T) {
	cfg, err := Build(input(nil))
	require.NoError(t, err)
	assert.Equal(t, server.DefaultMaxRequests, cfg.Web.MaxRequests)
	assert.Equal(t, server.DefaultMaxResponseBytes, cfg.Web.MaxResponseBytes)
	tests := []struct {
		name string
		edit func(*Input)
		want string
	}{
		{"requests", func(in *Input) { in.Web.MaxRequests = 0 }, "--api-max-requests 0: allow at least 1 request"},
		{"bytes", func(in *Input) { in.Web.MaxResponseBytes = 100 }, "--api-max-bytes 100: at least 65536"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(input(tt.edit))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestInsightWindowPastRingCapacityNamesTheFlag: an insight window its
// rings cannot hold is refused naming the flag and the largest that fits.
func TestInsightWindowPastRingCapacityNamesTheFlag(t *testing.T) {
	_, err := Build(input(func(in *Input) { in.Engine.Insight.Enabled, in.Engine.Insight.Window = true, 24*time.Hour }))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--insight-window 24h0m0s: longer than the rings hold; the largest that fits is 6m49.4s")
	_, err = Build(input(func(in *Input) { in.Engine.Insight.Window = 24 * time.Hour }))
	require.NoError(t, err, "without --insight the window is not used")
}
