package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// counters check names the release that deprecates a name: DCGM 4.7 (its
// field reference; counters/fieldid/dcgm47.go) for dcgm-exporter 4.10's
// profiling renames and for DCGM_FI_DEV_GPU_UTIL, DCGM 4.6 and 4.6.1
// (go-dcgm v1.4611.0's dcgm_fields.h) for the rest.
func TestDeprecationNoteNamesTheRelease(t *testing.T) {
	tests := []struct{ name, want string }{
		{"DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_TX_BYTES is deprecated since DCGM 4.7, which names the field DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND; still valid, exported as DCGM_FI_PROF_PCIE_TX_BYTES"},
		{"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_UTIL is deprecated since DCGM 4.7 in favour of DCGM_FI_DEV_GPU_UTIL_RATIO (a new field in ratio); still valid, in %"},
		{"DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_SM_CLOCK is deprecated since DCGM 4.6.1 in favour of DCGM_FI_DEV_SM_CLOCK_HERTZ (a new field in Hz); still valid, in MHz"},
		{"DCGM_FI_DEV_FB_USED", ""},
		{"DCGM_FI_DEV_GPU_UTIL_RATIO", ""},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, deprecationNote(tt.name), tt.name)
	}
}
