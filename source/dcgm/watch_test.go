package dcgm_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/dcgm/dcgmfake"
)

func TestOneFieldGroupPerInterval(t *testing.T) {
	tests := []struct {
		name   string
		groups []source.Group
		want   map[time.Duration][]uint16
	}{
		{"one interval", []source.Group{group(20*time.Millisecond, fieldid.GPUTemp, fieldid.PowerUsage)},
			map[time.Duration][]uint16{20 * time.Millisecond: {fieldid.GPUTemp, fieldid.PowerUsage}}},
		{"two intervals", []source.Group{group(20*time.Millisecond, fieldid.PowerUsage, fieldid.GPUTemp), group(50*time.Millisecond, fieldid.GPUUtil, fieldid.MemCopyUtil)},
			map[time.Duration][]uint16{20 * time.Millisecond: {fieldid.GPUTemp, fieldid.PowerUsage}, 50 * time.Millisecond: {fieldid.GPUUtil, fieldid.MemCopyUtil}}},
		{"same interval twice shares a field group", []source.Group{group(20*time.Millisecond, fieldid.GPUTemp), group(40*time.Millisecond, fieldid.PowerUsage), group(20*time.Millisecond, fieldid.GPUUtil)},
			map[time.Duration][]uint16{20 * time.Millisecond: {fieldid.GPUTemp, fieldid.GPUUtil}, 40 * time.Millisecond: {fieldid.PowerUsage}}},
		{"xid and clock events fields imply their DCGM fields", []source.Group{group(30*time.Millisecond, fieldid.ExpXIDErrorsCount, fieldid.ExpClockEventsCount)},
			map[time.Duration][]uint16{30 * time.Millisecond: {fieldid.ClocksEventReasons, fieldid.XIDErrors}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := newFake()
			newSource(t, f, tt.groups...)
			assert.Equal(t, len(tt.want), f.FieldGroupsCreated(), "field groups created")
			got := map[time.Duration][]uint16{}
			for _, w := range f.WatchCalls() {
				got[w.UpdateFreq] = w.Fields
				assert.GreaterOrEqual(t, w.MaxKeepAge, time.Second, "keep age follows the configured window")
				assert.GreaterOrEqual(t, w.MaxKeepSamples, int(w.MaxKeepAge/w.UpdateFreq), "keep samples cover keep age")
				assert.Len(t, w.Entities, 2, "watched on both GPUs")
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestRewatchReplacesFieldGroups(t *testing.T) {
	f, _ := newFake()
	s := newSource(t, f, group(20*time.Millisecond, fieldid.GPUTemp), group(50*time.Millisecond, fieldid.PowerUsage))
	require.NoError(t, s.Watch([]source.Group{group(30*time.Millisecond, fieldid.GPUUtil)}))
	assert.Equal(t, [][]uint16{{fieldid.GPUUtil}}, f.LiveFieldGroups(), "old field groups are destroyed")
	require.NoError(t, s.Close())
	assert.Empty(t, f.LiveFieldGroups(), "Close destroys field groups")
	assert.Zero(t, f.LiveGroups(), "Close destroys entity groups")
}

// DCGM refuses a field group of more than 128 fields
// (DCGM_MAX_FIELD_IDS_PER_FIELD_GROUP); a counters file with more fields at
// one interval is watched through several field groups, and every field is
// read.
func TestMoreFieldsThanOneFieldGroupHolds(t *testing.T) {
	var ids []uint16
	for _, e := range fieldid.Current() {
		if len(ids) == dcgm.MaxFieldsPerGroup+5 {
			break
		}
		if f := fieldid.Of(e.ID); f.Level == fieldid.LevelGPU && !f.Profiling && !slices.Contains(ids, e.ID) {
			ids = append(ids, e.ID)
		}
	}
	require.Len(t, ids, dcgm.MaxFieldsPerGroup+5)
	f, clk := newFake(dcgmfake.WithGen(func(_ dcgm.EntityRef, _ uint16, seq int64) (dcgm.Value, bool) {
		return dcgm.Value{Kind: dcgm.KindInt64, Int: seq}, true
	}))
	s := newSource(t, f, group(10*time.Millisecond, ids...))
	rec := &dcgmfake.Recorder{}
	collectUntil(t, clk, s, 0, rec, func() bool {
		for _, id := range ids {
			if len(rec.Values(id)) == 0 {
				return false
			}
		}
		return true
	})
}
