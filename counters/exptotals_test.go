package counters

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dcgm-exporter 4.8.3's lines for its cumulative counters, as its README
// gives them, read in a file of its layout.
func TestExporterTotalsAreReadAsDCGMExporterWritesThem(t *testing.T) {
	set, err := Parse("c.csv", strings.NewReader("DCGM_FI_DEV_GPU_TEMP, gauge, t\n"+
		"DCGM_EXP_XID_ERRORS_TOTAL, counter, cumulative XID errors observed since exporter start\n"+
		"DCGM_EXP_CLOCK_EVENTS_TOTAL, counter, , 2s\n"))
	require.NoError(t, err)
	assert.Equal(t, LayoutDCGMExporter, set.Layout, "the file keeps dcgm-exporter's labels")
	require.Len(t, set.Fields, 3)
	assert.Equal(t, RoleExpXIDTotal, set.Fields[1].Export.Role)
	assert.Equal(t, "cumulative XID errors observed since exporter start", set.Fields[1].Help)
	assert.Equal(t, RoleExpClockEventsTotal, set.Fields[2].Export.Role)
	assert.Equal(t, "cumulative clock events observed since exporter start (edge-counted)", set.Fields[2].Help, "an empty help takes dcgm-exporter's")
	assert.Equal(t, "2s", set.Fields[2].Interval.String())
}

func TestExporterTotalsAreCounters(t *testing.T) {
	tests := []struct{ line, want string }{
		{"DCGM_EXP_XID_ERRORS_TOTAL, gauge, x", "c.csv:1: DCGM_EXP_XID_ERRORS_TOTAL is a counter in dcgm-exporter; write counter, not gauge"},
		{"DCGM_EXP_CLOCK_EVENTS_TOTAL, label, x", "c.csv:1: DCGM_EXP_CLOCK_EVENTS_TOTAL is a counter in dcgm-exporter; write counter, not label"},
		{"DCGM_EXP_XID_ERRORS_TOTAL, counter, x, , max", "c.csv:1: DCGM_EXP_XID_ERRORS_TOTAL is a counter: window statistics apply to gauges only"},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			_, err := Parse("c.csv", strings.NewReader(tt.line+"\n"))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
