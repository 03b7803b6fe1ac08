package counters

import (
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/etc"
)

// The fabric fields are DCGM 4.6's IDs 170-175 (go-dcgm v1.4611.0,
// pkg/dcgm/dcgm_fields.h), described with the values DCGM gives them
// (DCGM v4.6.0, dcgmlib/dcgm_structs.h dcgmFabricManagerStatus_t and
// dcgmlib/src/DcgmCacheManager.cpp ReadFabricManagerStatusField), under
// their names and DCGM 4.6's deprecated alias of 171.
func TestFabricFieldsAreDescribed(t *testing.T) {
	tests := []struct {
		name     string
		id       uint16
		typ      MetricType
		kind     ValueKind
		helpHas  string
		current  string
		deprName bool
	}{
		{"DCGM_FI_DEV_FABRIC_MANAGER_STATUS", 170, Gauge, KindInt, "4 failure", "DCGM_FI_DEV_FABRIC_MANAGER_STATUS", false},
		{"DCGM_FI_DEV_FABRIC_MANAGER_ERROR", 171, Gauge, KindInt, "DCGM_ST_", "DCGM_FI_DEV_FABRIC_MANAGER_ERROR", false},
		{"DCGM_FI_DEV_FABRIC_MANAGER_ERROR_CODE", 171, Gauge, KindInt, "DCGM_ST_", "DCGM_FI_DEV_FABRIC_MANAGER_ERROR", true},
		{"DCGM_FI_DEV_FABRIC_CLUSTER_UUID", 172, Label, KindString, "cluster", "DCGM_FI_DEV_FABRIC_CLUSTER_UUID", false},
		{"DCGM_FI_DEV_FABRIC_CLIQUE_ID", 173, Gauge, KindInt, "clique", "DCGM_FI_DEV_FABRIC_CLIQUE_ID", false},
		{"DCGM_FI_DEV_FABRIC_HEALTH_MASK", 174, Gauge, KindInt, "NVML_GPU_FABRIC_HEALTH_MASK_", "DCGM_FI_DEV_FABRIC_HEALTH_MASK", false},
		{"DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY", 175, Gauge, KindInt, "3 limited capacity", "DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, ok := Lookup(tt.name)
			require.True(t, ok, "known field")
			assert.Equal(t, tt.id, f.ID)
			assert.Equal(t, tt.typ, f.Type)
			assert.Equal(t, tt.kind, f.Kind)
			assert.Contains(t, f.Help, tt.helpHas)
			assert.False(t, f.Default, "opt-in, as in dcgm-exporter")
			g, ok := ByID(tt.id)
			require.True(t, ok)
			assert.Equal(t, tt.current, g.Name, "current name of the ID")
		})
	}
}

// DCGM numbers compute modes without NVML's exclusive-thread mode (DCGM
// v4.6.0, dcgmlib/src/DcgmCacheManager.cpp, case
// DCGM_FI_DEV_GPU_COMPUTE_MODE), and the help says DCGM's numbers.
func TestComputeModeHelpInDCGMsNumbering(t *testing.T) {
	for _, name := range []string{"DCGM_FI_DEV_COMPUTE_MODE", "DCGM_FI_DEV_GPU_COMPUTE_MODE"} {
		f, ok := Lookup(name)
		require.True(t, ok, name)
		assert.Equal(t, fieldid.ComputeMode, f.ID)
		assert.Contains(t, f.Help, "0 default, 1 prohibited, 2 exclusive process", name)
		assert.NotContains(t, f.Help, "exclusive thread", name)
	}
}

// The shipped default file leaves the fabric fields out (dcgm-exporter
// makes them opt-in) but carries them as commented lines that load once
// uncommented, all six of them.
func TestDefaultFileOffersFabricFieldsOptIn(t *testing.T) {
	b, err := io.ReadAll(etc.DefaultCounters())
	require.NoError(t, err)
	set, err := Parse("etc/default-counters.csv", strings.NewReader(string(b)))
	require.NoError(t, err)
	for _, f := range set.Fields {
		assert.False(t, f.ID >= fieldid.FabricManagerStatus && f.ID <= fieldid.FabricHealthSummary, "%s collected by default", f.Name)
	}
	optIn := regexp.MustCompile(`(?m)^# (DCGM_FI_DEV_FABRIC_\w+,.*)$`)
	var lines []string
	for _, m := range optIn.FindAllStringSubmatch(string(b), -1) {
		lines = append(lines, m[1])
	}
	set, err = Parse("uncommented", strings.NewReader(strings.Join(lines, "\n")))
	require.NoError(t, err)
	ids := map[uint16]bool{}
	for _, f := range set.Fields {
		ids[f.ID] = true
	}
	for id := fieldid.FabricManagerStatus; id <= fieldid.FabricHealthSummary; id++ {
		assert.True(t, ids[id], "field %d offered", id)
	}
}
