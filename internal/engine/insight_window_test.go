package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/source/sim"
)

// TestInsightWindowPastRingCapacityIsRefused: an insight window longer
// than the rings of the 100 ms insight fields can hold would never gather
// enough samples, so no insight series would ever appear. It is refused,
// naming the largest window that fits, which is accepted.
func TestInsightWindowPastRingCapacityIsRefused(t *testing.T) {
	tests := []struct {
		name   string
		window time.Duration
		err    string
	}{
		{"a day", 24 * time.Hour, "the largest that fits is 6m49.4s"},
		{"just past", MaxInsightWindow + insightInterval, "the largest that fits is 6m49.4s"},
		{"the largest", MaxInsightWindow, ""},
		{"the default", DefaultInsightWindow, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := sim.DefaultConfig()
			cfg.GPUs = 1
			src, err := sim.New(cfg)
			require.NoError(t, err)
			_, err = New(Options{Source: src, Counters: parseSet(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t\n"), DefaultInterval: time.Second,
				Log: quietLog(), Insight: InsightOptions{Enabled: true, Window: tt.window}})
			if tt.err == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.err)
			assert.Contains(t, err.Error(), "insight window "+tt.window.String())
		})
	}
}
