package source

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
)

type sample struct {
	field uint16
	v     float64
	note  string
}

// recordSink keeps what a source hands it, in order.
type recordSink struct {
	Sink
	got []sample
}

func (r *recordSink) Value(_ *Entity, f uint16, _ int64, v float64) {
	r.got = append(r.got, sample{field: f, v: v})
}
func (r *recordSink) Unsupported(_ *Entity, f uint16, why string) {
	r.got = append(r.got, sample{field: f, note: "unsupported: " + why})
}
func (r *recordSink) Fail(_ *Entity, f uint16, err error) {
	r.got = append(r.got, sample{field: f, note: "failed: " + err.Error()})
}

func field(name string) counters.Field {
	info, _ := counters.Lookup(name)
	return counters.Field{Name: name, ID: info.ID, Type: info.Type}
}

func ids(fs []counters.Field) []uint16 {
	var out []uint16
	for _, f := range fs {
		out = append(out, f.ID)
	}
	return out
}

// The factors are those of go-dcgm v1.4611.0's dcgm_fields.h: clocks in MHz
// become hertz, the energy counter in mJ joules, BAR1 in MiB bytes, the fan
// speed in percent a ratio (fieldid.BaseUnits, checked against the header).
func TestDeriveBaseUnits(t *testing.T) {
	never := func(uint16) bool { return false }
	tests := []struct {
		name     string
		fields   []counters.Field
		native   func(uint16) bool
		reads    []uint16
		legacyIn float64
		legacyID uint16
		want     []sample
	}{
		{"clock in hertz only", []counters.Field{field("DCGM_FI_DEV_SM_CLOCK_HERTZ")}, never,
			[]uint16{fieldid.SMClock}, 1980, fieldid.SMClock,
			[]sample{{field: fieldid.SMClockHertz, v: 1.98e9}}},
		{"both clocks, each in its unit", []counters.Field{field("DCGM_FI_DEV_SM_CLOCK"), field("DCGM_FI_DEV_SM_CLOCK_HERTZ")}, never,
			[]uint16{fieldid.SMClock}, 1410, fieldid.SMClock,
			[]sample{{field: fieldid.SMClock, v: 1410}, {field: fieldid.SMClockHertz, v: 1.41e9}}},
		{"energy in joules", []counters.Field{field("DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL")}, never,
			[]uint16{fieldid.TotalEnergyConsumption}, 123456789, fieldid.TotalEnergyConsumption,
			[]sample{{field: fieldid.GPUEnergyJoulesTotal, v: 123456.789}}},
		{"fan ratio", []counters.Field{field("DCGM_FI_DEV_FAN_SPEED_RATIO")}, never,
			[]uint16{fieldid.FanSpeed}, 37, fieldid.FanSpeed,
			[]sample{{field: fieldid.FanSpeedRatio, v: 0.37}}},
		{"BAR1 in bytes", []counters.Field{field("DCGM_FI_DEV_BAR1_USED_BYTES")}, never,
			[]uint16{fieldid.BAR1Used}, 3, fieldid.BAR1Used,
			[]sample{{field: fieldid.BAR1UsedBytes, v: 3 << 20}}},
		{"read natively", []counters.Field{field("DCGM_FI_DEV_SM_CLOCK_HERTZ")}, func(uint16) bool { return true },
			[]uint16{fieldid.SMClockHertz}, 1.98e9, fieldid.SMClockHertz,
			[]sample{{field: fieldid.SMClockHertz, v: 1.98e9}}},
		{"other fields untouched", []counters.Field{field("DCGM_FI_DEV_GPU_TEMP_CELSIUS")}, never,
			[]uint16{fieldid.GPUTemp}, 41, fieldid.GPUTemp,
			[]sample{{field: fieldid.GPUTemp, v: 41}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			groups, d := DeriveBaseUnits([]Group{{Fields: tt.fields}}, tt.native)
			require.Len(t, groups, 1)
			assert.Equal(t, tt.reads, ids(groups[0].Fields), "what the source reads")
			rec := &recordSink{}
			d.Sink(0, rec).Value(nil, tt.legacyID, 1, tt.legacyIn)
			assert.Equal(t, tt.want, rec.got)
		})
	}
}

func TestDeriveBaseUnitsPassesFailures(t *testing.T) {
	groups, d := DeriveBaseUnits([]Group{
		{Fields: []counters.Field{field("DCGM_FI_DEV_GPU_TEMP_CELSIUS")}},
		{Fields: []counters.Field{field("DCGM_FI_DEV_FAN_SPEED_RATIO")}},
	}, func(uint16) bool { return false })
	assert.Equal(t, []uint16{fieldid.FanSpeed}, ids(groups[1].Fields))
	assert.True(t, d.Derived(fieldid.FanSpeedRatio))
	assert.False(t, d.Derived(fieldid.FanSpeed))

	rec := &recordSink{}
	assert.Same(t, Sink(rec), d.Sink(0, rec), "a group deriving nothing gets the sink itself")
	s := d.Sink(1, rec)
	s.Unsupported(nil, fieldid.FanSpeed, "no fan")
	s.Fail(nil, fieldid.FanSpeed, errors.New("timeout"))
	assert.Equal(t, []sample{
		{field: fieldid.FanSpeedRatio, note: "unsupported: no fan"},
		{field: fieldid.FanSpeedRatio, note: "failed: timeout"},
	}, rec.got, "the legacy field was not asked for: only the derived one hears of it")
}

func TestSupportServesBaseUnitsFromTheLegacyField(t *testing.T) {
	s := counters.SupportTable("t", map[uint16]string{fieldid.SMClock: "", fieldid.FanSpeed: "no fan here"})
	ok, _ := s.Serves(fieldid.SMClockHertz)
	assert.True(t, ok)
	ok, _ = s.Serves(fieldid.FanSpeedRatio)
	assert.False(t, ok)
}
