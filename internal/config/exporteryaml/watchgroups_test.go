package exporteryaml

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
)

const groupsCSV = `DCGM_FI_DEV_GPU_TEMP, gauge, t
DCGM_FI_DEV_POWER_USAGE, gauge, p
DCGM_FI_DEV_SM_CLOCK, gauge, c, 2s
DCGM_FI_DEV_MEM_CLOCK, gauge, m
DCGM_EXP_XID_ERRORS_TOTAL, counter, x
`

// dcgm-exporter's README ("Use collection.watchGroups ..."): glob-style
// matching, unmatched fields at collection.interval, a field in two groups
// or a group matching no field refused at start; its exporter-derived
// fields are partitioned like the others.
func TestWatchGroupsSetTheIntervalsOfTheLinesTheyMatch(t *testing.T) {
	tests := []struct {
		name    string
		groups  WatchGroups
		want    map[string]time.Duration
		wantErr string
	}{
		{"names and globs", WatchGroups{
			{Name: "fast", Interval: 500 * time.Millisecond, Patterns: []string{"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_*"}, Where: "c.yaml:5: g0"},
			{Name: "events", Interval: 5 * time.Second, Patterns: []string{"DCGM_EXP_*"}, Where: "c.yaml:9: g1"},
		}, map[string]time.Duration{"DCGM_FI_DEV_GPU_TEMP": 500 * time.Millisecond, "DCGM_FI_DEV_POWER_USAGE": 500 * time.Millisecond,
			"DCGM_FI_DEV_SM_CLOCK": 2 * time.Second, "DCGM_FI_DEV_MEM_CLOCK": 0, "DCGM_EXP_XID_ERRORS_TOTAL": 5 * time.Second}, ""},
		{"a line's own interval wins", WatchGroups{{Name: "clocks", Interval: time.Minute, Patterns: []string{"DCGM_FI_DEV_*_CLOCK"}, Where: "c.yaml:5: g0"}},
			map[string]time.Duration{"DCGM_FI_DEV_SM_CLOCK": 2 * time.Second, "DCGM_FI_DEV_MEM_CLOCK": time.Minute}, ""},
		{"a field in two groups", WatchGroups{
			{Name: "a", Interval: time.Second, Patterns: []string{"DCGM_FI_DEV_GPU_*"}, Where: "c.yaml:5: g0"},
			{Name: "b", Interval: time.Second, Patterns: []string{"*_TEMP"}, Where: "c.yaml:9: g1"},
		}, nil, `c.yaml:9: g1: DCGM_FI_DEV_GPU_TEMP (line 1 of c.csv) is also in watch group "a"`},
		{"a group that matches nothing", WatchGroups{{Name: "nvlink", Interval: time.Minute, Patterns: []string{"DCGM_FI_DEV_NVLINK_*"}, Where: "c.yaml:5: g0"}},
			nil, `c.yaml:5: g0: watch group "nvlink" matches no field of c.csv (DCGM_FI_DEV_NVLINK_*)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := counters.Parse("c.csv", strings.NewReader(groupsCSV))
			require.NoError(t, err)
			err = tt.groups.Apply(set)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			for _, f := range set.Fields {
				if want, ok := tt.want[f.Name]; ok {
					assert.Equal(t, want, f.Interval, f.Name)
				}
			}
		})
	}
}
