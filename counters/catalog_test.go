package counters

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/compattest"
)

func compatDir(t *testing.T) string { return compattest.Dir(t) }

func TestCatalogHasEveryGeneratedName(t *testing.T) {
	assert.Len(t, dcgmFieldIDs, 624, "current DCGM field names")
	assert.Len(t, legacyFieldIDs, 41, "legacy dcgm-exporter 1.x names")

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
	assert.Equal(t, 624, current)
	assert.Equal(t, 41, legacy)
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
		entity EntityLevel
	}{
		{"DCGM_FI_DEV_SM_CLOCK", 100, false, KindInt, Gauge, "MHz", EntityGPU},
		{"DCGM_FI_DEV_GPU_TEMP", 150, false, KindInt, Gauge, "C", EntityGPU},
		{"DCGM_FI_DEV_POWER_USAGE", 155, false, KindFloat, Gauge, "W", EntityGPU},
		{"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 156, false, KindInt, Counter, "mJ", EntityGPU},
		{"DCGM_FI_DEV_POWER_MGMT_LIMIT", 160, false, KindFloat, Gauge, "W", EntityGPU},
		{"DCGM_FI_DEV_ENFORCED_POWER_LIMIT", 164, false, KindFloat, Gauge, "W", EntityGPU},
		{"DCGM_FI_DEV_CLOCKS_EVENT_REASONS", FieldClockEventReasons, false, KindInt, Gauge, "", EntityGPU},
		{"DCGM_FI_DEV_XID_ERRORS", FieldXIDErrors, false, KindInt, Gauge, "", EntityGPU},
		{"DCGM_FI_DEV_PCIE_TX_THROUGHPUT", 200, false, KindInt, Gauge, "KB/s", EntityGPU},
		{"DCGM_FI_DEV_GPU_UTIL", 203, false, KindInt, Gauge, "%", EntityGPU},
		{"DCGM_FI_DEV_POWER_VIOLATION", 240, false, KindInt, Counter, "ns", EntityGPU},
		{"DCGM_FI_DEV_FB_TOTAL", 250, false, KindInt, Gauge, "MiB", EntityGPU},
		{"DCGM_FI_DEV_FB_USED_PERCENT", 254, false, KindFloat, Gauge, "ratio", EntityGPU},
		{"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 311, false, KindInt, Counter, "count", EntityGPU},
		{"DCGM_FI_DEV_ECC_SBE_AGG_L2", 326, false, KindInt, Counter, "count", EntityGPU},
		{"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_L17", 483, false, KindInt, Counter, "count", EntityGPU},
		{"DCGM_FI_DEV_NVLINK_ERROR_DL_CRC", 497, false, KindInt, Counter, "count", EntityNVLink},
		{"DCGM_FI_DEV_NVSWITCH_TEMPERATURE_CURRENT", 858, false, KindInt, Gauge, "C", EntityNvSwitch},
		{"DCGM_FI_PROF_SM_ACTIVE", 1002, false, KindFloat, Gauge, "ratio", EntityGPU},
		{"DCGM_FI_PROF_PCIE_RX_BYTES", 1010, false, KindInt, Gauge, "bytes/s", EntityGPU},
		{"DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE", 1015, false, KindFloat, Gauge, "ratio", EntityGPU},
		{"DCGM_FI_PROF_NVLINK_L3_RX_BYTES", 1047, false, KindInt, Gauge, "bytes/s", EntityGPU},
		{"DCGM_FI_DRIVER_VERSION", 1, false, KindString, Label, "", EntityHost},
		{"dcgm_sm_clock", 100, true, KindInt, Gauge, "MHz", EntityGPU},
		{"dcgm_fi_prof_pcie_tx_bytes", 1009, true, KindInt, Gauge, "bytes/s", EntityGPU},
		{"DCGM_EXP_XID_ERRORS_COUNT", FieldExpXIDErrorsCount, false, KindInt, Gauge, "count", EntityGPU},
		{"DCGM_EXP_GPU_HEALTH_STATUS", FieldExpGPUHealthStatus, false, KindInt, Gauge, "", EntityGPU},
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
			assert.Equal(t, tt.entity, f.Entity)
			assert.NotEmpty(t, f.Help)
			assert.True(t, f.Sources.Has(SourceDCGM), "DCGM serves every field")
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
	assert.Equal(t, uint16(510), f.ID)
	assert.False(t, f.Described())
}

func TestByIDPrefersCanonicalName(t *testing.T) {
	tests := []struct {
		id   uint16
		name string
	}{
		{100, "DCGM_FI_DEV_SM_CLOCK"},         // not the legacy dcgm_sm_clock
		{520, "DCGM_FI_DEV_VGPU_VM_ID"},       // not DCGM_FI_FIRST_VGPU_FIELD_ID
		{1300, "DCGM_FI_DEV_CONNECTX_HEALTH"}, // not DCGM_FI_DEV_FIRST_CONNECTX_FIELD_ID
		{FieldExpClockEventsCount, "DCGM_EXP_CLOCK_EVENTS_COUNT"},
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
	for id := uint16(1001); id <= 1015; id++ {
		f, ok := ByID(id)
		require.True(t, ok, "ID %d", id)
		assert.True(t, f.Described(), f.Name)
		assert.Contains(t, []string{"ratio", "bytes/s"}, f.Unit, f.Name)
	}
}

func TestSourceSetString(t *testing.T) {
	tests := []struct {
		s    SourceSet
		want string
	}{
		{0, "-"},
		{SourceDCGM, "dcgm"},
		{SourceDCGM | SourceSim, "dcgm,sim"},
		{SourceDCGM | SourceNVML | SourceSim, "dcgm,nvml,sim"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.s.String())
	}
}

func TestSourcesFollowSupportTables(t *testing.T) {
	served := func(id uint16) (nvml, sim bool) {
		reason, mapped := nvmlSupport[id]
		return mapped && reason == "", simSupport[id]
	}
	for _, f := range All() {
		nvml, sim := served(f.ID)
		// A derived exporter field is served wherever its base field is.
		if base, ok := exporterBase[f.ID]; ok {
			bn, bs := served(base)
			nvml, sim = nvml || bn, sim || bs
		}
		assert.Equal(t, nvml, f.Sources.Has(SourceNVML), f.Name)
		assert.Equal(t, sim, f.Sources.Has(SourceSim), f.Name)
		if note := nvmlSupport[f.ID]; note != "" {
			assert.Equal(t, note, f.NVMLNote, f.Name)
		}
	}
}
