package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	return path
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good.csv", "DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DEV_SM_CLOCK, gauge, c\n")
	repeat := writeFile(t, dir, "repeat.csv", "DCGM_FI_DEV_GPU_TEMP_CELSIUS, gauge, t\nDCGM_FI_DEV_GPU_TEMP_CELSIUS, gauge, t\n")
	bad := writeFile(t, dir, "bad.csv", "DCGM_FI_DEV_GPU_TEMPP, gauge, t\nDCGM_FI_DEV_SM_CLOCK, gauge, c, 1ms\n")
	missing := filepath.Join(dir, "missing.csv")
	fresh := writeFile(t, dir, "new.csv", "DCGM_FI_DEV_GPU_TEMP_CELSIUS, gauge, temp\nDCGM_FI_DEV_SM_CLOCK_HERTZ, gauge, clk\n")

	tests := []struct {
		name    string
		files   []string
		want    []string
		wantErr string
	}{
		{"good", []string{good}, []string{
			// go-dcgm v1.4611.0 dcgm_fields.h: the DCGM_DEPRECATED block
			// and the comment above DCGM_FI_DEV_SM_CLOCK.
			"warning: " + good + ":1: DCGM_FI_DEV_GPU_TEMP is deprecated since DCGM 4.6, which names the field DCGM_FI_DEV_GPU_TEMP_CELSIUS; still valid, exported as DCGM_FI_DEV_GPU_TEMP",
			"warning: " + good + ":2: DCGM_FI_DEV_SM_CLOCK is deprecated since DCGM 4.6.1 in favour of DCGM_FI_DEV_SM_CLOCK_HERTZ (a new field in Hz); still valid, in MHz",
			good + ": ok (2 fields)",
		}, ""},
		{"new vocabulary", []string{fresh}, []string{fresh + ": ok (2 fields)"}, ""},
		{"warning", []string{repeat}, []string{
			"warning: " + repeat + ":2: DCGM_FI_DEV_GPU_TEMP_CELSIUS repeats line 1 with the same type; this line is ignored",
			repeat + ": ok (1 fields)",
		}, ""},
		{"bad and good", []string{bad, fresh}, []string{
			bad + `:1: unknown field "DCGM_FI_DEV_GPU_TEMPP"; did you mean DCGM_FI_DEV_GPU_TEMP?`,
			bad + ":2: watch interval 1ms is below the minimum of 100ms",
			fresh + ": ok (2 fields)",
		}, "1 of 2 counters files have problems"},
		{"missing", []string{missing}, []string{
			"open counters file: open " + missing + ": no such file or directory",
		}, "1 of 1 counters files have problems"},
		{"none", nil, nil, "no counters file given"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := checkCounters(&out, tt.files)
			if tt.wantErr == "" {
				require.NoError(t, err)
			} else {
				require.EqualError(t, err, tt.wantErr)
			}
			var lines []string
			if s := strings.TrimSpace(out.String()); s != "" {
				lines = strings.Split(s, "\n")
			}
			assert.Equal(t, tt.want, lines)
		})
	}
}

func TestListTable(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, listCounters(&out, sourceSupport(), "", "table"))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	assert.Equal(t, []string{"NAME", "REPLACES", "ID", "TYPE", "UNIT", "DEPRECATED", "SOURCES", "HELP"}, strings.Fields(lines[0]))

	rows := map[string][]string{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		rows[f[0]] = f
	}
	// Names and units from go-dcgm v1.4611.0's dcgm_fields.h: the current
	// name, the deprecated names it replaces, and the base-unit fields.
	require.Contains(t, rows, "DCGM_FI_PROF_SM_UTIL_RATIO")
	assert.Equal(t, []string{"DCGM_FI_PROF_SM_ACTIVE", strconv.Itoa(int(fieldid.ProfSMActive)), "gauge", "ratio", "-"}, rows["DCGM_FI_PROF_SM_UTIL_RATIO"][1:6])
	assert.NotContains(t, rows, "DCGM_FI_PROF_SM_ACTIVE", "one line per field, under its current name")
	require.Contains(t, rows, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
	assert.Equal(t, []string{"-", strconv.Itoa(int(fieldid.TotalEnergyConsumption)), "counter", "mJ", "use:DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL"}, rows["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"][1:6])
	require.Contains(t, rows, "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL")
	assert.Equal(t, []string{"-", "1611", "counter", "J", "-"}, rows["DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL"][1:6])
	require.Contains(t, rows, "DCGM_FI_DEV_GPU_TEMP_CELSIUS")
	assert.Equal(t, "DCGM_FI_DEV_GPU_TEMP", rows["DCGM_FI_DEV_GPU_TEMP_CELSIUS"][1])
	require.Contains(t, rows, "DCGM_EXP_XID_ERRORS_COUNT", "exporter fields are listed")
	assert.Equal(t, "-", rows["DCGM_EXP_XID_ERRORS_COUNT"][2], "exporter IDs are internal")
	assert.NotContains(t, rows, "dcgm_sm_clock", "legacy names are not offered")
	assert.NotContains(t, rows, "DCGM_FI_DEV_VGPU_TYPE_INFO", "undescribed fields are not offered")
}

func TestListNVMLShowsReasons(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, listCounters(&out, sourceSupport(), "nvml", "table"))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	assert.Equal(t, []string{"NAME", "REPLACES", "ID", "TYPE", "UNIT", "DEPRECATED", "SOURCES", "NVML", "HELP"}, strings.Fields(lines[0]))
	// Every described field is listed, with "yes" or why NVML cannot read it.
	sup := nvml.Support()
	for _, f := range counters.All() {
		if f.Legacy || !f.Described() {
			continue
		}
		want := "yes"
		if ok, note := sup.Serves(f.ID); !ok {
			want = note
			if want == "" {
				want = "not read by the NVML source"
			}
		}
		found := false
		name, _ := vocabularies(f)
		for _, l := range lines[1:] {
			if strings.HasPrefix(l, name+" ") {
				found = true
				assert.Contains(t, l, want, f.Name)
			}
		}
		assert.True(t, found, f.Name)
	}
}

func TestListFiltersBySource(t *testing.T) {
	for _, src := range []string{"dcgm", "sim"} {
		var out bytes.Buffer
		require.NoError(t, listCounters(&out, sourceSupport(), src, "table"))
		var sup counters.Support
		for _, s := range sourceSupport() {
			if s.Source == src {
				sup = s
			}
		}
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
			f, ok := counters.Lookup(strings.Fields(l)[0])
			require.True(t, ok, l)
			served, _ := sup.Serves(f.ID)
			assert.True(t, served, "%s listed for %s", f.Name, src)
		}
	}
}

func TestListCSVIsACountersFile(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, listCounters(&out, sourceSupport(), "", "csv"))
	set, err := counters.Parse("list.csv", bytes.NewReader(out.Bytes()))
	require.NoError(t, err)
	assert.Empty(t, set.Warnings)

	var enabled []string
	for _, f := range set.Fields {
		enabled = append(enabled, f.Name)
	}
	defaults, err := counters.Load(filepath.Join("..", "..", "etc", "default-counters.csv"))
	require.NoError(t, err)
	var want []string
	for _, f := range defaults.Fields {
		want = append(want, f.Name)
	}
	assert.ElementsMatch(t, want, enabled, "the everyday set is enabled")

	// Commented-out lines are valid field lines once uncommented.
	var all strings.Builder
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "# DCGM_") {
			all.WriteString(strings.TrimPrefix(l, "# ") + "\n")
		}
	}
	more, err := counters.Parse("uncommented.csv", strings.NewReader(all.String()))
	require.NoError(t, err)
	assert.Greater(t, len(more.Fields), 100)
}

func TestListRejectsBadArguments(t *testing.T) {
	var out bytes.Buffer
	assert.EqualError(t, listCounters(&out, sourceSupport(), "cuda", "table"), `unknown source "cuda" (want dcgm, nvml or sim)`)
	assert.EqualError(t, listCounters(&out, sourceSupport(), "", "json"), `unknown format "json" (want table or csv)`)
}
