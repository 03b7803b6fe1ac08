package fieldid

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFacts(t *testing.T) {
	tests := []struct {
		name      string
		id        uint16
		level     Level
		profiling bool
		exporter  bool
		base      uint16
	}{
		{"GPU temperature", GPUTemp, LevelGPU, false, false, 0},
		{"driver version, one per host", DriverVersion, LevelNone, false, false, 0},
		{"SM activity, per compute instance", ProfSMActive, LevelComputeInstance, true, false, 0},
		{"NvSwitch temperature", NVSwitchTemperatureCurrent, LevelNvSwitch, false, false, 0},
		{"NvSwitch port throughput", NVSwitchLinkThroughputTX, LevelLink, false, false, 0},
		{"XID count, from the XID errors", ExpXIDErrorsCount, LevelGPU, false, true, XIDErrors},
		{"clock events count, from the reasons", ExpClockEventsCount, LevelGPU, false, true, ClocksEventReasons},
		{"health, from DCGM's checks", ExpGPUHealthStatus, LevelGPU, false, true, 0},
		{"an unknown ID", 0xEFFF, LevelUnknown, false, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.level, Of(tt.id).Level)
			assert.Equal(t, tt.profiling, IsProfiling(tt.id))
			assert.Equal(t, tt.exporter, IsExporter(tt.id))
			base, derived := BaseOf(tt.id)
			assert.Equal(t, tt.base, base)
			assert.Equal(t, tt.base != 0, derived)
		})
	}
}

func TestLinkFamiliesAreIndexedByLink(t *testing.T) {
	// DCGM added links in batches: link 6 of the CRC flit counters is not
	// the field after link 5's.
	assert.Len(t, NVLinkCRCFlitErrorCountByLink, 18)
	assert.Equal(t, NVLinkCRCFlitErrorCountL6, NVLinkCRCFlitErrorCountByLink[6])
	assert.NotEqual(t, NVLinkCRCFlitErrorCountL5+1, NVLinkCRCFlitErrorCountByLink[6])
	assert.Equal(t, ProfNVLinkL17RXBytes, ProfNVLinkRXBytesByLink[17])
}

func TestTablesAreCopies(t *testing.T) {
	c := Current()
	c[0].ID = 0xEEEE
	assert.NotEqual(t, uint16(0xEEEE), Current()[0].ID)
}
