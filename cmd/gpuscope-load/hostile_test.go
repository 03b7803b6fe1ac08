package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/sampleapi"
)

// TestHostileModesAreWhatTheySay: each answer of -hostile is broken the
// way its mode says, as gpuscope's client reads it.
func TestHostileModesAreWhatTheySay(t *testing.T) {
	tests := []struct {
		mode  string
		check func(t *testing.T, r *sampleapi.Result, err error)
	}{
		{"mismatched", func(t *testing.T, _ *sampleapi.Result, err error) {
			assert.ErrorContains(t, err, "3 timestamps and 2 values")
		}},
		{"extreme", func(t *testing.T, r *sampleapi.Result, err error) {
			require.NoError(t, err)
			assert.Equal(t, []float64{1.7e308, -1.7e308}, []float64(r.Entities[0].Series[0].V))
		}},
		{"negative", func(t *testing.T, r *sampleapi.Result, err error) {
			require.NoError(t, err)
			assert.Equal(t, []int64{-1000000, -1}, r.Entities[0].Series[0].T)
		}},
		{"escapes", func(t *testing.T, r *sampleapi.Result, err error) {
			require.NoError(t, err, "the client strips what it decodes")
			assert.Equal(t, "node]0;owned[?1049l", r.Hostname)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			r, err := sampleapi.Decode([]byte(hostileBody(tt.mode)))
			tt.check(t, r, err)
		})
	}
}

func TestHostileServesOnlyLoopback(t *testing.T) {
	_, err := runHostile(context.Background(), "http://192.0.2.1:9400/", "silent")
	require.Error(t, err)
	_, err = runHostile(context.Background(), "http://127.0.0.1:9400/", "nope")
	assert.ErrorContains(t, err, "unknown mode")
}
