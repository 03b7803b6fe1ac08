package sim

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
)

func TestUnplugAndReplug(t *testing.T) {
	tests := []struct {
		name string
		poll time.Duration
		// listed is how many GPUs the entities hold after the unplug.
		listed int
		lost   bool
	}{
		{"with the bind/unbind watch the GPU leaves the entities", time.Second, 3, false},
		{"without it the GPU stays listed and is reported lost", 0, 4, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.GPUs, cfg.EventRate, cfg.BindUnbindPoll = 4, 0, tt.poll
			s, c := newSim(t, cfg, fieldid.GPUTemp)
			gone := gpuEntities(s)[1]
			require.NoError(t, s.Unplug(1))
			c.Add(time.Second)
			rec := newRec()
			err := s.Collect(context.Background(), 0, rec)
			if tt.poll > 0 {
				require.ErrorIs(t, err, source.ErrEntitiesChanged)
			} else {
				require.NoError(t, err)
			}
			assert.Len(t, gpuEntities(s), tt.listed)
			assert.Empty(t, rec.values[key{gone.Key(), fieldid.GPUTemp}], "an unplugged GPU gives no samples")
			assert.Len(t, rec.values, 3, "the other GPUs are sampled")
			if tt.lost {
				assert.Equal(t, []string{gone.Key()}, s.Status().Lost)
			} else {
				assert.Empty(t, s.Status().Lost)
			}

			require.NoError(t, s.Replug(1))
			c.Add(time.Second)
			err = s.Collect(context.Background(), 0, rec)
			if tt.poll > 0 {
				require.ErrorIs(t, err, source.ErrEntitiesChanged)
			} else {
				require.NoError(t, err)
			}
			assert.Len(t, gpuEntities(s), 4)
			assert.Equal(t, gone.UUID, gpuEntities(s)[1].UUID, "the replugged GPU keeps its identity")
			assert.Len(t, rec.values[key{gone.Key(), fieldid.GPUTemp}], 1, "and is sampled again")
			require.NoError(t, s.Collect(context.Background(), 0, rec), "a change is reported once")
		})
	}
}

func TestUnplugRefusesAnUnknownGPU(t *testing.T) {
	s, _ := newSim(t, Config{GPUs: 2}, fieldid.GPUTemp)
	for _, gpu := range []int{-1, 2} {
		err := s.Unplug(gpu)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "GPUs 0..1")
	}
}
