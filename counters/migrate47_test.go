package counters

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// DCGM 4.7's names in a migration: dcgm-exporter 4.9's counters files
// (test/compat/testdata/dcgm-exporter-4.9) write DCGM_FI_DEV_GPU_UTIL_RATIO,
// a 0-1 ratio, where 4.8 wrote DCGM_FI_DEV_GPU_UTIL, and keep
// DCGM_FI_DEV_FB_USED; 4.10's write DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND,
// the same ID and unit as DCGM_FI_PROF_PCIE_TX_BYTES.
func TestMigrateDCGM47(t *testing.T) {
	tests := []struct {
		name, to, want string
		change         string
	}{
		{"DCGM_FI_DEV_GPU_UTIL", "new", "DCGM_FI_DEV_GPU_UTIL_RATIO",
			"1: DCGM_FI_DEV_GPU_UTIL (%) -> DCGM_FI_DEV_GPU_UTIL_RATIO (ratio): another field, values times 0.01"},
		{"DCGM_FI_DEV_GPU_UTIL_RATIO", "legacy", "DCGM_FI_DEV_GPU_UTIL",
			"1: DCGM_FI_DEV_GPU_UTIL_RATIO (ratio) -> DCGM_FI_DEV_GPU_UTIL (%): another field, values times 100"},
		{"DCGM_FI_PROF_PCIE_TX_BYTES", "new", "DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND", ""},
		{"DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND", "legacy", "DCGM_FI_PROF_PCIE_TX_BYTES", ""},
		{"DCGM_FI_DEV_FB_USED", "new", "DCGM_FI_DEV_FB_USED", ""},
		{"DCGM_FI_DEV_FB_USED_BYTES", "legacy", "DCGM_FI_DEV_FB_USED",
			"1: DCGM_FI_DEV_FB_USED_BYTES (B) -> DCGM_FI_DEV_FB_USED (MiB): another field, values times 9.53674316406e-07"},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/"+tt.to, func(t *testing.T) {
			var out bytes.Buffer
			renames, err := Migrate(strings.NewReader(tt.name+", gauge, x\n"), &out, Vocabulary(tt.to))
			require.NoError(t, err)
			assert.Equal(t, tt.want+", gauge, x\n", out.String())
			var changes []string
			for _, r := range renames {
				if r.UnitChanges() {
					changes = append(changes, r.String())
				}
			}
			if tt.change == "" {
				assert.Empty(t, changes)
			} else {
				assert.Equal(t, []string{tt.change}, changes)
			}
		})
	}
}
