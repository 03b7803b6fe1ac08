package counters

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/compattest"
)

// Names and units from go-dcgm v1.4611.0's pkg/dcgm/dcgm_fields.h: the
// DCGM_DEPRECATED block (same IDs, same units) and the base-unit fields
// under new IDs ("Deprecated: Use ... instead.").
func TestMigrate(t *testing.T) {
	legacy := "# a comment naming DCGM_FI_DEV_GPU_TEMP stays\n" +
		"DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n" +
		"DCGM_FI_DEV_SM_CLOCK,gauge, SM clock frequency (in MHz)., 100ms, max avg\n" +
		"# DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, counter, Total energy consumption since boot (in mJ).\n" +
		"DCGM_FI_PROF_SM_ACTIVE, gauge, Ratio of cycles an SM has at least 1 warp assigned.\r\n" +
		"dcgm_sm_clock, gauge, 1.x names stay\n" +
		"DCGM_FI_DEV_FB_USED, gauge, no new name in DCGM 4.6.1\n" +
		"DCGM_EXP_XID_ERRORS_COUNT, gauge, exporter-side\n" +
		"DCGM_FI_DRIVER_VERSION, label, Driver Version"
	wantNew := "# a comment naming DCGM_FI_DEV_GPU_TEMP stays\n" +
		"DCGM_FI_DEV_GPU_TEMP_CELSIUS, gauge, GPU temperature (in C).\n" +
		"DCGM_FI_DEV_SM_CLOCK_HERTZ,gauge, SM clock frequency (in MHz)., 100ms, max avg\n" +
		"# DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL, counter, Total energy consumption since boot (in mJ).\n" +
		"DCGM_FI_PROF_SM_UTIL_RATIO, gauge, Ratio of cycles an SM has at least 1 warp assigned.\r\n" +
		"dcgm_sm_clock, gauge, 1.x names stay\n" +
		"DCGM_FI_DEV_FB_USED, gauge, no new name in DCGM 4.6.1\n" +
		"DCGM_EXP_XID_ERRORS_COUNT, gauge, exporter-side\n" +
		"DCGM_FI_SYSTEM_DRIVER_VERSION, label, Driver Version"
	var out bytes.Buffer
	renames, err := Migrate(strings.NewReader(legacy), &out, VocabularyNew)
	require.NoError(t, err)
	assert.Equal(t, wantNew, out.String())
	var changed []string
	for _, r := range renames {
		if r.UnitChanges() {
			changed = append(changed, r.String())
		}
	}
	assert.Equal(t, []string{
		"3: DCGM_FI_DEV_SM_CLOCK (MHz) -> DCGM_FI_DEV_SM_CLOCK_HERTZ (Hz): another field, values times 1e+06",
		"4: DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (mJ) -> DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL (J): another field, values times 0.001",
	}, changed)
	assert.Len(t, renames, 5)

	var back bytes.Buffer
	renames, err = Migrate(strings.NewReader(wantNew), &back, VocabularyLegacy)
	require.NoError(t, err)
	assert.Equal(t, legacy, back.String(), "new then legacy gives the file back")
	assert.Equal(t, "3: DCGM_FI_DEV_SM_CLOCK_HERTZ (Hz) -> DCGM_FI_DEV_SM_CLOCK (MHz): another field, values times 1e-06", renames[1].String())

	out.Reset()
	renames, err = Migrate(strings.NewReader(legacy), &out, VocabularyLegacy)
	require.NoError(t, err)
	assert.Empty(t, renames, "a legacy file is legacy already")
	assert.Equal(t, legacy, out.String())
}

// The shipped files and dcgm-exporter's own round-trip, and their new
// form is a valid counters file with the same number of fields.
func TestMigrateRoundTripsShippedFiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "etc", "*.csv"))
	require.NoError(t, err)
	more, err := filepath.Glob(filepath.Join("..", "etc", "dcgm-exporter", "*.csv"))
	require.NoError(t, err)
	files = append(files, more...)
	if dir := compattest.DirOrEmpty(t); dir != "" {
		more, err := filepath.Glob(filepath.Join(dir, "*.csv"))
		require.NoError(t, err)
		files = append(files, more...)
	}
	require.NotEmpty(t, files)
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			orig, err := os.ReadFile(file)
			require.NoError(t, err)
			var fresh, back bytes.Buffer
			_, err = Migrate(bytes.NewReader(orig), &fresh, VocabularyNew)
			require.NoError(t, err)
			_, err = Migrate(bytes.NewReader(fresh.Bytes()), &back, VocabularyLegacy)
			require.NoError(t, err)
			assert.Equal(t, string(orig), back.String())
			before, err := Parse(file, bytes.NewReader(orig))
			require.NoError(t, err)
			after, err := Parse(file+" (new)", bytes.NewReader(fresh.Bytes()))
			require.NoError(t, err)
			assert.Equal(t, len(before.Fields), len(after.Fields))
		})
	}
}

func TestParseVocabulary(t *testing.T) {
	v, err := ParseVocabulary("new")
	require.NoError(t, err)
	assert.Equal(t, VocabularyNew, v)
	_, err = ParseVocabulary("4.9")
	assert.EqualError(t, err, `unknown vocabulary "4.9" (want new or legacy)`)
}
