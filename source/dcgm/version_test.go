package dcgm

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// DCGM 4.6.1 (go-dcgm v1.4611.0's dcgm_fields.h) is the first release with
// the base-unit fields; DCGM 4.6.0's header stops at ID 1533
// (github:NVIDIA/DCGM tag v4.6.0, dcgmlib/dcgm_fields.h).
func TestKnowsBaseUnits(t *testing.T) {
	tests := []struct {
		version string
		want    bool
	}{
		{"4.6.1", true}, {"4.6.2", true}, {"4.7.0", true}, {"5.0.0", true}, {"v4.6.1", true}, {"4.6.1-rc1", true},
		{"4.6.0", false}, {"4.5.3", false}, {"3.3.9", false}, {"4.6", false}, {"", false}, {"unknown", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, KnowsBaseUnits(tt.version), tt.version)
	}
}
