package counters

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/testkit/compattest"
)

func compatDir(t *testing.T) string { return compattest.Dir(t) }

func TestCatalogHasEveryGeneratedName(t *testing.T) {
	// go-dcgm v1.4611.0 pkg/dcgm/const_fields.go: dcgmFields, and the
	// DCGM_FI_ and lower-case names of legacyDCGMFields.
	assert.Len(t, fieldid.Current(), 661, "current DCGM field names")
	assert.Len(t, fieldid.Legacy(), 41, "legacy dcgm-exporter 1.x names")
	assert.Len(t, fieldid.Deprecated(), 362, "deprecated DCGM names")

	// DCGM 4.7's fields (fieldid/dcgm47.go) join them: a ratio under a new
	// ID for DCGM_FI_DEV_GPU_UTIL_RATIO, which ID 203 no longer carries, and
	// four profiling names dcgm-exporter 4.10 writes.
	served, servedDeprecated := fieldid.ServedCurrent(), fieldid.ServedDeprecated()
	assert.Len(t, fieldid.DCGM47(), 30, "DCGM 4.7 fields in new units")
	assert.Len(t, served, 661-1-4+1+30+4, "current names served")
	assert.Len(t, servedDeprecated, 362-1+4, "deprecated names served")

	current, legacy, exporter := 0, 0, 0
	for _, f := range All() {
		switch {
		case f.Exporter():
			exporter++
		case f.Legacy:
			legacy++
		default:
			current++
		}
	}
	// One canonical name per DCGM ID; every other name is legacy.
	ids := map[uint16]bool{}
	for _, e := range served {
		ids[e.ID] = true
	}
	assert.Equal(t, len(ids), current)
	assert.Equal(t, len(served)+41+len(servedDeprecated)-len(ids), legacy, "dcgm-exporter 1.x names and the other DCGM names of an ID")
	assert.Equal(t, 4, exporter)
}

func TestLookup(t *testing.T) {
	tests := []struct {
		name   string
		id     uint16
		legacy bool
		kind   ValueKind
		typ    MetricType
		unit   string
		level  fieldid.Level
	}{
		{"DCGM_FI_DEV_SM_CLOCK", fieldid.SMClock, false, KindInt, Gauge, "MHz", fieldid.LevelGPU},
		{"DCGM_FI_DEV_GPU_TEMP", fieldid.GPUTemp, false, KindInt, Gauge, "C", fieldid.LevelGPU},
		{"DCGM_FI_DEV_POWER_USAGE", fieldid.PowerUsage, false, KindFloat, Gauge, "W", fieldid.LevelGPU},
		{"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", fieldid.TotalEnergyConsumption, false, KindInt, Counter, "mJ", fieldid.LevelGPU},
		{"DCGM_FI_DEV_POWER_MGMT_LIMIT", fieldid.PowerMgmtLimit, false, KindFloat, Gauge, "W", fieldid.LevelGPU},
		{"DCGM_FI_DEV_ENFORCED_POWER_LIMIT", fieldid.EnforcedPowerLimit, false, KindFloat, Gauge, "W", fieldid.LevelGPU},
		{"DCGM_FI_DEV_CLOCKS_EVENT_REASONS", fieldid.ClocksEventReasons, false, KindInt, Gauge, "", fieldid.LevelGPU},
		{"DCGM_FI_DEV_XID_ERRORS", fieldid.XIDErrors, false, KindInt, Gauge, "", fieldid.LevelComputeInstance},
		{"DCGM_FI_DEV_PCIE_TX_THROUGHPUT", fieldid.PCIeTXThroughput, false, KindInt, Gauge, "KB/s", fieldid.LevelGPU},
		{"DCGM_FI_DEV_GPU_UTIL", fieldid.GPUUtil, false, KindInt, Gauge, "%", fieldid.LevelGPU},
		{"DCGM_FI_DEV_POWER_VIOLATION", fieldid.PowerViolation, false, KindInt, Counter, "ns", fieldid.LevelGPU},
		{"DCGM_FI_DEV_FB_TOTAL", fieldid.FBTotal, false, KindInt, Gauge, "MiB", fieldid.LevelComputeInstance},
		{"DCGM_FI_DEV_FB_USED_PERCENT", fieldid.FBUsedPercent, false, KindFloat, Gauge, "ratio", fieldid.LevelComputeInstance},
		{"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", fieldid.ECCDBEVolTotal, false, KindInt, Counter, "count", fieldid.LevelGPU},
		{"DCGM_FI_DEV_ECC_SBE_AGG_L2", fieldid.ECCSBEAggL2, false, KindInt, Counter, "count", fieldid.LevelGPU},
		{"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_L17", fieldid.NVLinkCRCFlitErrorCountL17, false, KindInt, Counter, "count", fieldid.LevelGPU},
		{"DCGM_FI_DEV_NVLINK_ERROR_DL_CRC", fieldid.NVLinkErrorDLCRC, false, KindInt, Counter, "count", fieldid.LevelGPU},
		{"DCGM_FI_DEV_NVSWITCH_TEMPERATURE_CURRENT", fieldid.NVSwitchTemperatureCurrent, false, KindInt, Gauge, "C", fieldid.LevelNvSwitch},
		{"DCGM_FI_PROF_SM_ACTIVE", fieldid.ProfSMActive, false, KindFloat, Gauge, "ratio", fieldid.LevelComputeInstance},
		{"DCGM_FI_PROF_PCIE_RX_BYTES", fieldid.ProfPCIeRXBytes, false, KindInt, Gauge, "bytes/s", fieldid.LevelGPU},
		{"DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE", fieldid.ProfPipeTensorDFMAActive, false, KindFloat, Gauge, "ratio", fieldid.LevelComputeInstance},
		{"DCGM_FI_PROF_NVLINK_L3_RX_BYTES", fieldid.ProfNVLinkL3RXBytes, false, KindInt, Gauge, "bytes/s", fieldid.LevelGPU},
		{"DCGM_FI_DRIVER_VERSION", fieldid.DriverVersion, false, KindString, Label, "", fieldid.LevelNone},
		{"dcgm_sm_clock", fieldid.SMClock, true, KindInt, Gauge, "MHz", fieldid.LevelGPU},
		{"dcgm_fi_prof_pcie_tx_bytes", fieldid.ProfPCIeTXBytes, true, KindInt, Gauge, "bytes/s", fieldid.LevelGPU},
		{"DCGM_EXP_XID_ERRORS_COUNT", fieldid.ExpXIDErrorsCount, false, KindInt, Gauge, "count", fieldid.LevelGPU},
		{"DCGM_EXP_GPU_HEALTH_STATUS", fieldid.ExpGPUHealthStatus, false, KindInt, Gauge, "", fieldid.LevelGPU},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, ok := Lookup(tt.name)
			require.True(t, ok)
			assert.Equal(t, tt.id, f.ID)
			assert.Equal(t, tt.legacy, f.Legacy)
			assert.Equal(t, tt.kind, f.Kind)
			assert.Equal(t, tt.typ, f.Type)
			assert.Equal(t, tt.unit, f.Unit)
			assert.Equal(t, tt.level, f.Level, "entity level, from DCGM's field table")
			assert.NotEmpty(t, f.Help)
		})
	}
}

func TestLookupUnknownAndUndescribed(t *testing.T) {
	_, ok := Lookup("DCGM_FI_DEV_NOT_A_FIELD")
	assert.False(t, ok)
	_, ok = Lookup("dcgm_fi_dev_gpu_temp")
	assert.False(t, ok, "names are case-sensitive, as in dcgm-exporter")

	f, ok := Lookup("DCGM_FI_DEV_VGPU_TYPE_INFO")
	require.True(t, ok)
	assert.Equal(t, fieldid.VGPUTypeInfo, f.ID)
	assert.False(t, f.Described())
}

func TestByIDPrefersCanonicalName(t *testing.T) {
	tests := []struct {
		id   uint16
		name string
	}{
		{fieldid.SMClock, "DCGM_FI_DEV_SM_CLOCK"},               // not the legacy dcgm_sm_clock
		{fieldid.VGPUVMID, "DCGM_FI_DEV_VGPU_VM_ID"},            // not DCGM_FI_FIRST_VGPU_FIELD_ID
		{fieldid.ConnectXHealth, "DCGM_FI_DEV_CONNECTX_HEALTH"}, // not DCGM_FI_DEV_FIRST_CONNECTX_FIELD_ID
		{fieldid.ExpClockEventsCount, "DCGM_EXP_CLOCK_EVENTS_COUNT"},
	}
	for _, tt := range tests {
		f, ok := ByID(tt.id)
		require.True(t, ok, "ID %d", tt.id)
		assert.Equal(t, tt.name, f.Name)
	}
	_, ok := ByID(9999)
	assert.False(t, ok)
}

func TestCompatFieldsAreDescribed(t *testing.T) {
	dir := compatDir(t)
	for _, name := range []string{"default-counters.csv", "dcp-metrics-included.csv", "1.x-compatibility-metrics.csv"} {
		for _, field := range namesInFile(t, filepath.Join(dir, name)) {
			f, ok := Lookup(field)
			if assert.True(t, ok, "%s: %s", name, field) {
				assert.True(t, f.Described(), "%s: %s has no kind, unit and help", name, field)
			}
		}
	}
}

func TestProfilingFieldsAreDescribed(t *testing.T) {
	for _, id := range []uint16{fieldid.ProfGREngineActive, fieldid.ProfSMActive, fieldid.ProfSMOccupancy,
		fieldid.ProfPipeTensorActive, fieldid.ProfDRAMActive, fieldid.ProfPipeFP64Active, fieldid.ProfPipeFP32Active,
		fieldid.ProfPipeFP16Active, fieldid.ProfPCIeTXBytes, fieldid.ProfPCIeRXBytes, fieldid.ProfNVLinkTXBytes,
		fieldid.ProfNVLinkRXBytes, fieldid.ProfPipeTensorIMMAActive, fieldid.ProfPipeTensorHMMAActive,
		fieldid.ProfPipeTensorDFMAActive} {
		f, ok := ByID(id)
		require.True(t, ok, "ID %d", id)
		assert.True(t, fieldid.IsProfiling(id), f.Name)
		assert.True(t, f.Described(), f.Name)
		assert.Contains(t, []string{"ratio", "bytes/s"}, f.Unit, f.Name)
	}
}

// The units the catalog shows agree with the ones DCGM's field table gives,
// where it gives one, except where that table is known to be wrong.
func TestUnitsAgreeWithDCGM(t *testing.T) {
	// DCGM's table gives the NVLink bandwidth counters the MB/s of its
	// display, but they are cumulative byte counts, as dcgm-exporter's help
	// says ("The number of bytes of active NVLink rx or tx data"); and it
	// gives the P2P status bitmap the unit of a temperature.
	dcgmWrong := regexp.MustCompile(`^DCGM_FI_DEV_(NVLINK_(TX_|RX_)?BANDWIDTH_(L\d+|TOTAL)|P2P_NVLINK_STATUS)$`)
	checked := 0
	for _, f := range All() {
		if f.Legacy || !f.Described() || dcgmWrong.MatchString(f.Name) {
			continue
		}
		if dcgmUnit := fieldid.Of(f.ID).Unit; dcgmUnit != "" {
			checked++
			assert.Equal(t, dcgmUnit, f.Unit, f.Name)
		}
	}
	assert.Greater(t, checked, 10)
}

// dcgm-exporter accepts DCGM_FI_DEV_CLOCK_THROTTLE_REASONS, which go-dcgm
// keeps as an alias of DCGM_FI_DEV_CLOCKS_EVENT_REASONS (pkg/dcgm/
// const_fields.go); the field is read by its ID and keeps the file's name.
func TestDeprecatedDCGMNamesAreAccepted(t *testing.T) {
	set, err := Parse("old.csv", strings.NewReader("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS, gauge, Throttle reasons.\n"))
	require.NoError(t, err)
	require.Len(t, set.Fields, 1)
	assert.Equal(t, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", set.Fields[0].Name)
	assert.Equal(t, fieldid.ClocksEventReasons, set.Fields[0].ID)
	cur, ok := ByID(fieldid.ClocksEventReasons)
	require.True(t, ok)
	assert.Equal(t, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", cur.Name, "the current name stays canonical")
}

// Both vocabularies of go-dcgm v1.4611.0's dcgm_fields.h resolve: DCGM 4.6's
// names, the deprecated names of the same IDs, and the base-unit fields
// under new IDs with their own units.
func TestBothVocabularies(t *testing.T) {
	tests := []struct {
		name       string
		id         uint16
		unit       string
		typ        MetricType
		deprecated bool   // a renamed name: the same ID has a newer one
		current    string // for a renamed name, the newer one
		superseded string // the base-unit field DCGM says to use instead
	}{
		{"DCGM_FI_DEV_GPU_TEMP_CELSIUS", fieldid.GPUTemp, "C", Gauge, false, "", ""},
		{"DCGM_FI_DEV_GPU_TEMP", fieldid.GPUTemp, "C", Gauge, true, "DCGM_FI_DEV_GPU_TEMP_CELSIUS", ""},
		{"DCGM_FI_DEV_BOARD_POWER_WATTS", fieldid.PowerUsage, "W", Gauge, false, "", ""},
		{"DCGM_FI_PROF_SM_UTIL_RATIO", fieldid.ProfSMActive, "ratio", Gauge, false, "", ""},
		{"DCGM_FI_DEV_XID_ERROR", fieldid.XIDErrors, "", Gauge, false, "", ""},
		{"DCGM_FI_SYSTEM_DRIVER_VERSION", fieldid.DriverVersion, "", Label, false, "", ""},
		{"DCGM_FI_DRIVER_VERSION", fieldid.DriverVersion, "", Label, true, "DCGM_FI_SYSTEM_DRIVER_VERSION", ""},
		{"DCGM_FI_DEV_SM_CLOCK", fieldid.SMClock, "MHz", Gauge, false, "", "DCGM_FI_DEV_SM_CLOCK_HERTZ"},
		{"DCGM_FI_DEV_SM_CLOCK_HERTZ", 1603, "Hz", Gauge, false, "", ""},
		{"DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL", 1611, "J", Counter, false, "", ""},
		{"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", fieldid.TotalEnergyConsumption, "mJ", Counter, false, "", "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL"},
		{"DCGM_FI_DEV_BAR1_USED_BYTES", 1601, "B", Gauge, false, "", ""},
		{"DCGM_FI_DEV_FAN_SPEED_RATIO", 1612, "ratio", Gauge, false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, ok := Lookup(tt.name)
			require.True(t, ok)
			assert.Equal(t, tt.id, f.ID)
			assert.Equal(t, tt.unit, f.Unit)
			assert.Equal(t, tt.typ, f.Type)
			assert.Equal(t, tt.deprecated, f.Deprecated)
			assert.Equal(t, tt.current, f.Current)
			assert.Equal(t, tt.superseded, f.SupersededBy)
			assert.Equal(t, tt.deprecated || tt.superseded != "", f.IsDeprecated())
			assert.True(t, f.Described(), "described, under either name")
		})
	}
	cur, ok := Lookup("DCGM_FI_DEV_GPU_TEMP_CELSIUS")
	require.True(t, ok)
	assert.Equal(t, []string{"DCGM_FI_DEV_GPU_TEMP"}, cur.Replaces)
	// The canonical name stays the one gpuscope's own metrics and shipped
	// files use.
	canon, _ := ByID(fieldid.GPUTemp)
	assert.Equal(t, "DCGM_FI_DEV_GPU_TEMP", canon.Name)
	hz, _ := ByID(fieldid.SMClockHertz)
	assert.Equal(t, "DCGM_FI_DEV_SM_CLOCK_HERTZ", hz.Name)
}

func TestSuggestFromBothVocabularies(t *testing.T) {
	tests := []struct{ typo, want string }{
		{"DCGM_FI_DEV_GPU_TEMP_CELSIU", "DCGM_FI_DEV_GPU_TEMP_CELSIUS"},
		{"DCGM_FI_DEV_SM_CLOCK_HERZ", "DCGM_FI_DEV_SM_CLOCK_HERTZ"},
		{"DCGM_FI_DEV_GPU_TEMPP", "DCGM_FI_DEV_GPU_TEMP"},
		{"DCGM_FI_DEV_XID_ERRROR", "DCGM_FI_DEV_XID_ERROR"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Suggest(tt.typo), tt.typo)
	}
}

// The alternatives of a name come from the catalog (go-dcgm v1.4611.0's
// dcgm_fields.h), each with the factor into the first name's unit.
func TestOtherNames(t *testing.T) {
	tests := []struct {
		name string
		want []Alternative
	}{
		{"DCGM_FI_PROF_SM_ACTIVE", []Alternative{{"DCGM_FI_PROF_SM_UTIL_RATIO", 1}}},
		{"DCGM_FI_PROF_SM_UTIL_RATIO", []Alternative{{"DCGM_FI_PROF_SM_ACTIVE", 1}}},
		{"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", []Alternative{{"DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL", 1000}}},
		{"DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL", []Alternative{{"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 1e-3}}},
		{"DCGM_FI_DEV_SM_CLOCK", []Alternative{{"DCGM_FI_DEV_SM_CLOCK_HERTZ", 1e-6}}},
		// DCGM 4.7 (fieldid/dcgm47.go): a ratio under a new ID, and bytes.
		{"DCGM_FI_DEV_GPU_UTIL", []Alternative{{"DCGM_FI_DEV_GPU_UTIL_RATIO", 100}}},
		{"DCGM_FI_DEV_GPU_UTIL_RATIO", []Alternative{{"DCGM_FI_DEV_GPU_UTIL", 0.01}}},
		{"DCGM_FI_DEV_FB_USED", []Alternative{{"DCGM_FI_DEV_FB_USED_BYTES", 1.0 / (1 << 20)}}},
		{"DCGM_FI_DEV_FB_USED_BYTES", []Alternative{{"DCGM_FI_DEV_FB_USED", 1 << 20}}},
		{"DCGM_FI_DEV_NVLINK_THROUGHPUT_BYTES_PER_SECOND", []Alternative{{"DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL", 1024000}}},
		// dcgm-exporter 4.10's name of the same ID, in the same unit.
		{"DCGM_FI_PROF_PCIE_TX_BYTES", []Alternative{{"DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND", 1}}},
		{"DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND", []Alternative{{"DCGM_FI_PROF_PCIE_TX_BYTES", 1}}},
		{"DCGM_FI_NOT_A_FIELD", nil},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, OtherNames(tt.name), tt.name)
	}
}
