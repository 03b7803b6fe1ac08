package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const fixture = `package dcgm

type Short uint16

var dcgmFields = map[string]Short{
	"DCGM_FI_DRIVER_VERSION": 1,
	"DCGM_FI_DEV_SM_CLOCK": 0x64,
	"DCGM_FI_DEV_CLOCKS_EVENT_REASONS": 112,
	"DCGM_FI_DEV_XID_ERROR": 230,
	"DCGM_FI_DEV_SM_CLOCK_HERTZ": 1603,
	"DCGM_FI_DEV_NVLINK_BANDWIDTH_L0": 440,
	"DCGM_FI_DEV_NVLINK_BANDWIDTH_L1": 441,
	"DCGM_FI_DEV_NVSWITCH_LINK_CRC_ERRORS": 786,
	"DCGM_FI_PROF_SM_ACTIVE": 1002,
	"DCGM_FI_PROF_NVDEC0_ACTIVE": 1030,
	"DCGM_FI_PROF_NVDEC1_ACTIVE": 1031,
}

var legacyDCGMFields = map[string]Short{
	"dcgm_sm_clock": 100,
	"DCGM_FI_DEV_XID_ERRORS": 230,
}
`

// headerFixture follows the shape of go-dcgm v1.4611.0's dcgm_fields.h: a
// field superseded under a new ID in a base unit, and the DCGM_DEPRECATED
// block of renamed fields.
const headerFixture = `
/**
 * SM clock for the device
 * Deprecated: Use DCGM_FI_DEV_SM_CLOCK_HERTZ instead.
 */
#define DCGM_FI_DEV_SM_CLOCK 100

/**
 * XID errors. The value is the specific XID error
 */
#define DCGM_FI_DEV_XID_ERROR 230

/**
 * SM clock for the device in hertz
 */
#define DCGM_FI_DEV_SM_CLOCK_HERTZ 1603

#if DCGM_DEPRECATED
#define DCGM_FI_DEV_XID_ERRORS DCGM_FI_DEV_XID_ERROR
#endif
`

// cppFixture follows the shape of DCGM's dcgm_fields.cpp: one call per
// field, a loop over a range of IDs, a comment inside an argument list.
const cppFixture = `
static int DcgmFieldsPopulateFieldTableWithFormatting(void)
{
    DcgmFieldsPopulateOneFieldWithFormatting(DCGM_FI_DRIVER_VERSION, DCGM_FT_STRING, 0, "driver_version",
                                             DCGM_FS_GLOBAL, 0, "DRVER", "#", DCGM_FE_NONE, getWidthForEnum(DCGM_FIELD_WIDTH_7));
    DcgmFieldsPopulateOneFieldWithFormatting(DCGM_FI_DEV_SM_CLOCK, DCGM_FT_INT64, 8, "sm_clock", DCGM_FS_DEVICE, 0, "SMCLK",
                                             "MHz", DCGM_FE_GPU, getWidthForEnum(DCGM_FIELD_WIDTH_5));
    DcgmFieldsPopulateOneFieldWithFormatting(
        DCGM_FI_DEV_NVSWITCH_LINK_CRC_ERRORS,
        DCGM_FT_INT64,
        8,
        "nvswitch_link_crc_errors",
        DCGM_FS_ENTITY,
        /* an override, to allow FE_LINK, entity handling */
        0,
        "SWLNKCR",
        (char *)getTextForEnum(DCGM_FIELD_UNIT_TEMP_C),
        DCGM_FE_LINK,
        getWidthForEnum(DCGM_FIELD_WIDTH_20));
    for (unsigned int fieldId = DCGM_FI_PROF_NVDEC0_ACTIVE; fieldId <= DCGM_FI_PROF_NVDEC1_ACTIVE; fieldId++)
    {
        DcgmFieldsPopulateOneFieldWithFormatting(fieldId, DCGM_FT_DOUBLE, 0, tag.c_str(), DCGM_FS_DEVICE, 0,
                                                 shortTag.c_str(), "", DCGM_FE_GPU_CI, getWidthForEnum(DCGM_FIELD_WIDTH_5));
    }
    DcgmFieldsPopulateOneFieldWithFormatting(DCGM_FI_NOT_IN_GO_DCGM, DCGM_FT_INT64, 8, "x", DCGM_FS_DEVICE, 0, "X", "",
                                             DCGM_FE_GPU, getWidthForEnum(DCGM_FIELD_WIDTH_5));
}
`

func generate(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "const_fields.go")
	cpp := filepath.Join(dir, "dcgm_fields.cpp")
	meta := filepath.Join(dir, metaFile)
	out := filepath.Join(dir, "fieldid_gen.go")
	require.NoError(t, os.WriteFile(src, []byte(fixture), 0o644))
	require.NoError(t, os.WriteFile(cpp, []byte(cppFixture), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dcgm_fields.h"), []byte(headerFixture), 0o644))
	require.NoError(t, run(src, meta, cpp, "4.5.2", out))
	code, err := os.ReadFile(out)
	require.NoError(t, err)
	tsv, err := os.ReadFile(meta)
	require.NoError(t, err)
	return string(code), string(tsv)
}

func TestRunWritesConstantsAndTables(t *testing.T) {
	code, _ := generate(t)
	for _, want := range []string{
		"\t// SMClock is DCGM_FI_DEV_SM_CLOCK.\n\tSMClock uint16 = 100\n",
		"\t// ProfSMActive is DCGM_FI_PROF_SM_ACTIVE.\n\tProfSMActive uint16 = 1002\n",
		"\tFirstExporter uint16 = 0xf000\n",
		"\t// ExpXIDErrorsCount is DCGM_EXP_XID_ERRORS_COUNT.\n\tExpXIDErrorsCount uint16 = 0xf001\n",
		"\t// ExpP2PStatus is DCGM_EXP_P2P_STATUS.\n\tExpP2PStatus uint16 = 0xf004\n",
		"var current = []Entry{\n\t{\"DCGM_FI_DEV_CLOCKS_EVENT_REASONS\", ClocksEventReasons},\n",
		"var legacy = []Entry{\n\t{\"dcgm_sm_clock\", SMClock},\n}\n",
		"\t{\"DCGM_EXP_CLOCK_EVENTS_COUNT\", ExpClockEventsCount},\n",
		"NVLinkBandwidthByLink = [...]uint16{NVLinkBandwidthL0, NVLinkBandwidthL1}\n",
		"\t// XIDErrors is DCGM_FI_DEV_XID_ERRORS, DCGM's deprecated name of DCGM_FI_DEV_XID_ERROR.\n\tXIDErrors = XIDError\n",
		"var deprecated = []Alias{\n\t{\"DCGM_FI_DEV_XID_ERRORS\", XIDErrors, \"DCGM_FI_DEV_XID_ERROR\"},\n}\n",
		`{ID: SMClockHertz, Name: "DCGM_FI_DEV_SM_CLOCK_HERTZ", Unit: "Hz", Legacy: SMClock, LegacyName: "DCGM_FI_DEV_SM_CLOCK", LegacyUnit: "MHz", Scale: 1e6}`,
	} {
		assert.Contains(t, code, want)
	}
	assert.NotContains(t, code, "NVDECActiveByLink", "NVDEC0 is an engine number, not a link")
}

func TestRunWritesFacts(t *testing.T) {
	code, tsv := generate(t)
	for _, want := range []string{
		"DriverVersion: {Level: LevelNone},",
		`SMClock: {Level: LevelGPU, Unit: "MHz"},`,
		`NVSwitchLinkCRCErrors: {Level: LevelLink, Unit: "C"},`,
		"ProfNVDEC0Active: {Level: LevelComputeInstance, Profiling: true},",
		"ProfNVDEC1Active: {Level: LevelComputeInstance, Profiling: true},",
		"ProfSMActive: {Profiling: true},",
		"ExpXIDErrorsCount: {Level: LevelGPU, Base: XIDError},",
		`SMClockHertz: {Level: LevelGPU, Unit: "Hz"},`,
		"ExpClockEventsCount: {Level: LevelGPU, Base: ClocksEventReasons},",
		"ExpGPUHealthStatus: {Level: LevelGPU},",
	} {
		assert.Contains(t, squeeze(code), want)
	}
	assert.Contains(t, tsv, "DCGM_FI_DRIVER_VERSION\tNONE\t\n", `"#" is no unit`)
	assert.Contains(t, tsv, "DCGM_FI_PROF_NVDEC1_ACTIVE\tGPU_CI\t\n", "loops cover their whole range")
	assert.NotContains(t, tsv, "DCGM_FI_NOT_IN_GO_DCGM")
	assert.Contains(t, tsv, "dcgm_fields.cpp of DCGM 4.5.2")
}

// squeeze drops gofmt's alignment, so that tests need not know it.
func squeeze(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' && i > 0 && (s[i-1] == ' ' || s[i-1] == ':') && i+1 < len(s) && s[i+1] == ' ' {
			continue
		}
		out = append(out, s[i])
	}
	return string(out)
}

func TestGoName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"DCGM_FI_DEV_GPU_TEMP", "GPUTemp"},
		{"DCGM_FI_DRIVER_VERSION", "DriverVersion"},
		{"DCGM_FI_DEV_PCI_BUSID", "PCIBusID"},
		{"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_L17", "NVLinkCRCFlitErrorCountL17"},
		{"DCGM_FI_PROF_PCIE_TX_BYTES", "ProfPCIeTXBytes"},
		{"DCGM_FI_DEV_NVSWITCH_LINK_CRC_ERRORS_LANE3", "NVSwitchLinkCRCErrorsLane3"},
		{"DCGM_EXP_P2P_STATUS", "ExpP2PStatus"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, goName(tt.in), tt.in)
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	tests := []struct {
		name, consts, meta, want string
	}{
		{"name clash", "package dcgm\nvar dcgmFields = map[string]int{\"DCGM_FI_DEV_A_B\": 1, \"DCGM_FI_A_B\": 2}\nvar legacyDCGMFields = map[string]int{\"a\": 1}\n", "", "both become the Go name AB"},
		{"bad level", fixture, "DCGM_FI_DEV_SM_CLOCK\tGALAXY\t\n", `unknown entity level "GALAXY"`},
		{"bad row", fixture, "DCGM_FI_DEV_SM_CLOCK GPU\n", "want NAME, ENTITY LEVEL and UNIT separated by tabs"},
		{"map and header disagree", strings.Replace(fixture, `"DCGM_FI_DEV_XID_ERRORS": 230`, `"DCGM_FI_DEV_XID_ERRORS": 231`, 1), "", "go-dcgm's map says ID 231, dcgm_fields.h says 230"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			src, meta := filepath.Join(dir, "c.go"), filepath.Join(dir, metaFile)
			require.NoError(t, os.WriteFile(src, []byte(tt.consts), 0o644))
			require.NoError(t, os.WriteFile(meta, []byte(tt.meta), 0o644))
			hdr := headerFixture
			if !strings.Contains(tt.consts, "DCGM_FI_DEV_SM_CLOCK_HERTZ") {
				hdr = "#define DCGM_FI_A_B 2\n"
			}
			require.NoError(t, os.WriteFile(filepath.Join(dir, "dcgm_fields.h"), []byte(hdr), 0o644))
			err := run(src, meta, "", "", filepath.Join(dir, "out.go"))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestParseMapsErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"missing map", "package dcgm\nvar dcgmFields = map[string]int{\"A\": 1}\n", "map legacyDCGMFields not found or empty"},
		{"not an integer", "package dcgm\nvar dcgmFields = map[string]int{\"A\": x}\nvar legacyDCGMFields = map[string]int{\"a\": 1}\n", "value is not an integer literal"},
		{"out of range", "package dcgm\nvar dcgmFields = map[string]int{\"A\": 70000}\nvar legacyDCGMFields = map[string]int{\"a\": 1}\n", "field ID 70000"},
		{"exporter range", "package dcgm\nvar dcgmFields = map[string]int{\"A\": 61441}\nvar legacyDCGMFields = map[string]int{\"a\": 1}\n", "exporter-side range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := filepath.Join(t.TempDir(), "c.go")
			require.NoError(t, os.WriteFile(src, []byte(tt.src), 0o644))
			_, err := parseMaps(src, "dcgmFields", "legacyDCGMFields")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// The committed fieldid_gen.go is what the generator makes from go.mod's
// go-dcgm and the committed metadata table: run go generate after changing
// either.
func TestGeneratedFileIsCurrent(t *testing.T) {
	dir, err := moduleDir()
	if err != nil {
		t.Skipf("go-dcgm module source not available: %v", err)
	}
	out := filepath.Join(t.TempDir(), "fieldid_gen.go")
	require.NoError(t, run(filepath.Join(dir, constFile), metaFile, "", "", out))
	want, err := os.ReadFile(out)
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join("..", "..", "fieldid_gen.go"))
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "counters/fieldid/fieldid_gen.go is stale: run go generate ./counters/fieldid")
}
