package fieldid

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The hand-kept DCGM 4.7 table (dcgm47.go; NVIDIA's DCGM 4.7.0 "Field
// Identifiers" reference) against what go-dcgm v1.4611.0 generated: each
// new ID is above DCGM 4.6.1's last (DCGM_FI_MAX_FIELDS 1613 there, so
// 1612) and below DCGM 4.7's DCGM_FI_MAX_FIELDS 1651, taken by no other
// field, and each legacy field is the one the generated table names.
func TestDCGM47TableAgreesWithTheGeneratedOne(t *testing.T) {
	names := map[uint16][]string{}
	for _, e := range Current() {
		names[e.ID] = append(names[e.ID], e.Name)
	}
	for _, a := range Deprecated() {
		names[a.ID] = append(names[a.ID], a.Name)
	}
	seen := map[uint16]bool{}
	for _, u := range DCGM47() {
		t.Run(u.Name, func(t *testing.T) {
			assert.Greater(t, u.ID, BaseUnits()[len(BaseUnits())-1].ID, "after DCGM 4.6.1's base-unit fields")
			assert.Less(t, u.ID, uint16(DCGM47MaxFields))
			assert.False(t, seen[u.ID], "ID %d listed twice", u.ID)
			seen[u.ID] = true
			for _, n := range names[u.ID] {
				t.Errorf("ID %d is %s in go-dcgm's table", u.ID, n)
			}
			assert.Contains(t, names[u.Legacy], u.LegacyName, "legacy ID %d", u.Legacy)
			assert.True(t, DerivedOnly(u.ID), "never read under its documented ID")
			assert.False(t, DerivedOnly(u.Legacy))
			assert.Equal(t, u.Unit, Of(u.ID).Unit)
			assert.Equal(t, Of(u.Legacy).Level, Of(u.ID).Level, "served where the legacy field is read")
			got, ok := BaseUnitOf(u.ID)
			require.True(t, ok)
			assert.Equal(t, u, got)
			assert.Contains(t, DerivedFrom(u.Legacy), u)
		})
	}
	for _, u := range BaseUnits() {
		assert.False(t, DerivedOnly(u.ID), "%s: DCGM 4.6.1 reads it", u.Name)
	}
}

// DCGM_FI_DEV_GPU_UTIL_RATIO: go-dcgm v1.4611.0 (DCGM 4.6.1) names ID 203
// so, a percentage; DCGM 4.7's reference gives the name to a new ratio
// field, and dcgm-exporter 4.9's counters files name it for 203's value in
// 0-1. gpuscope serves DCGM 4.7's meaning.
func TestGPUUtilRatioIsDCGM47s(t *testing.T) {
	var ratio, util []uint16
	for _, e := range ServedCurrent() {
		switch e.Name {
		case "DCGM_FI_DEV_GPU_UTIL_RATIO":
			ratio = append(ratio, e.ID)
		case "DCGM_FI_DEV_GPU_UTIL":
			util = append(util, e.ID)
		}
	}
	assert.Equal(t, []uint16{1613}, ratio)
	assert.Equal(t, []uint16{GPUUtil}, util)
	for _, a := range ServedDeprecated() {
		assert.NotEqual(t, "DCGM_FI_DEV_GPU_UTIL", a.Name, "current again")
	}
	u, ok := SupersededBy(GPUUtil)
	require.True(t, ok)
	assert.Equal(t, "DCGM_FI_DEV_GPU_UTIL_RATIO", u.Name)
	assert.InDelta(t, 0.01, u.Scale, 1e-15)
	// Not every DCGM 4.7 field replaces its legacy one in dcgm-exporter
	// 4.9's files: DCGM_FI_DEV_FB_USED stays.
	_, ok = SupersededBy(FBUsed)
	assert.False(t, ok)
	// The generated tables stay go-dcgm's.
	assert.Equal(t, GPUUtilRatio, GPUUtil)
}

func TestDCGMExporter410RenamesAreAliases(t *testing.T) {
	byName := map[string]Alias{}
	for _, a := range ServedDeprecated() {
		byName[a.Name] = a
	}
	for old, cur := range map[string]string{
		"DCGM_FI_PROF_PCIE_TX_BYTES":   "DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND",
		"DCGM_FI_PROF_PCIE_RX_BYTES":   "DCGM_FI_PROF_PCIE_RX_BYTES_PER_SECOND",
		"DCGM_FI_PROF_NVLINK_TX_BYTES": "DCGM_FI_PROF_NVLINK_TX_BYTES_PER_SECOND",
		"DCGM_FI_PROF_NVLINK_RX_BYTES": "DCGM_FI_PROF_NVLINK_RX_BYTES_PER_SECOND",
	} {
		a, ok := byName[old]
		if assert.True(t, ok, old) {
			assert.Equal(t, cur, a.Current)
		}
		var ids []uint16
		for _, e := range ServedCurrent() {
			if e.Name == cur {
				ids = append(ids, e.ID)
			}
		}
		assert.Equal(t, []uint16{a.ID}, ids, "%s is %s's ID", cur, old)
	}
}
