package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/sampleapi"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

// TestSamplesStopAtMaxSamples: a query bounded to fewer samples than the
// rings hold gets a *sampleapi.TooLargeError, and one within the bound gets
// every sample.
func TestSamplesStopAtMaxSamples(t *testing.T) {
	clk := newClock()
	src := sourcetest.NewGPUs(2, rampValues(clk.Now()))
	e := newTestEngine(t, samplesCSV, src, clk)
	for range 10 {
		clk.Add(100 * time.Millisecond)
		collectAll(t, e)
	}
	tests := []struct {
		name     string
		max      int
		tooLarge bool
	}{
		{"unbounded", 0, false},
		{"exactly what the rings hold", 20, false},
		{"one short", 19, true},
		{"far short", 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := e.Samples(sampleapi.Query{Fields: []string{"DCGM_FI_PROF_SM_ACTIVE"}, MaxSamples: tt.max})
			if tt.tooLarge {
				var tl *sampleapi.TooLargeError
				require.True(t, errors.As(err, &tl), "got %v", err)
				assert.Equal(t, tt.max, tl.MaxSamples)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, 20, res.Len())
		})
	}
}
