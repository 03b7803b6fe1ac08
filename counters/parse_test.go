package counters

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func parseString(t *testing.T, text string) (*Set, *ParseError) {
	t.Helper()
	set, err := Parse("test.csv", strings.NewReader(text))
	if err == nil {
		return set, nil
	}
	var pe *ParseError
	require.True(t, errors.As(err, &pe), "want a *ParseError, got %T: %v", err, err)
	return nil, pe
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		text string
		line int
		msg  string
	}{
		{"unknown field with suggestion", "# c\nDCGM_FI_PROF_SM_ACTIV, gauge, x\n", 2,
			`unknown field "DCGM_FI_PROF_SM_ACTIV"; did you mean DCGM_FI_PROF_SM_ACTIVE?`},
		{"unknown field wrong case", "dcgm_fi_dev_gpu_temp, gauge, x\n", 1,
			`unknown field "dcgm_fi_dev_gpu_temp"; did you mean DCGM_FI_DEV_GPU_TEMP?`},
		{"unknown field far from any", "NOT_A_FIELD_AT_ALL_REALLY, gauge, x\n", 1,
			`unknown field "NOT_A_FIELD_AT_ALL_REALLY" (gpuscope counters list shows the known fields)`},
		{"too few columns", "DCGM_FI_DEV_GPU_TEMP, gauge\n", 1,
			"want 3 to 5 comma-separated columns (FIELD, TYPE, HELP[, INTERVAL[, STATS]]), got 2; quote the help text if it contains commas"},
		{"too many columns", "DCGM_FI_DEV_GPU_TEMP, gauge, a, 1s, max, b\n", 1,
			"want 3 to 5 comma-separated columns (FIELD, TYPE, HELP[, INTERVAL[, STATS]]), got 6; quote the help text if it contains commas"},
		{"unknown type", "DCGM_FI_DEV_GPU_TEMP, gauges, x\n", 1,
			`unknown type "gauges" (want gauge, counter or label)`},
		{"histogram refused", "DCGM_FI_DEV_GPU_TEMP, Histogram, x\n", 1,
			"type histogram is not supported: a DCGM field is a single value per sample, and exporting it as a histogram gives invalid exposition; use gauge (window statistics give min, max, avg and percentiles)"},
		{"summary refused", "DCGM_FI_DEV_GPU_TEMP, summary, x\n", 1,
			"type summary is not supported: a DCGM field is a single value per sample, and exporting it as a summary gives invalid exposition; use gauge (window statistics give min, max, avg and percentiles)"},
		{"bad interval", "DCGM_FI_DEV_GPU_TEMP, gauge, x, soon\n", 1,
			`watch interval "soon" is not a duration such as 100ms or 1s, nor a number of milliseconds`},
		{"help with unquoted comma", "DCGM_FI_DEV_GPU_TEMP, gauge, temperature, in C\n", 1,
			`watch interval "in C" is not a duration such as 100ms or 1s, nor a number of milliseconds; quote the help text if it contains commas`},
		{"interval too short", "DCGM_FI_DEV_GPU_TEMP, gauge, x, 50ms\n", 1,
			"watch interval 50ms is below the minimum of 100ms"},
		{"interval in ms too short", "DCGM_FI_DEV_GPU_TEMP, gauge, x, 99\n", 1,
			"watch interval 99ms is below the minimum of 100ms"},
		{"negative interval", "DCGM_FI_DEV_GPU_TEMP, gauge, x, -1s\n", 1,
			"watch interval -1s is below the minimum of 100ms"},
		{"unknown statistic", "DCGM_FI_DEV_GPU_TEMP, gauge, x, 1s, max p95\n", 1,
			`unknown statistic "p95" (want any of min max avg p50 p90 p99, or nohist)`},
		{"nohist without statistics", "DCGM_FI_DEV_GPU_TEMP, gauge, x, 1s, nohist\n", 1,
			"nohist turns off the native histogram of a field with window statistics; this line asks for none"},
		{"duplicate with and without histogram", "DCGM_FI_DEV_GPU_TEMP, gauge, x, 1s, max\nDCGM_FI_DEV_GPU_TEMP, gauge, x, 1s, max nohist\n", 2,
			"DCGM_FI_DEV_GPU_TEMP is already defined on line 1 with a different type, interval or statistics"},
		{"stats on counter", "DCGM_FI_DEV_POWER_VIOLATION, counter, x, 1s, max\n", 1,
			"DCGM_FI_DEV_POWER_VIOLATION is a counter: window statistics apply to gauges only"},
		{"stats on label", "DCGM_FI_DRIVER_VERSION, label, x, , max\n", 1,
			"DCGM_FI_DRIVER_VERSION is a label field: it takes no watch interval or window statistics"},
		{"interval on label", "DCGM_FI_DRIVER_VERSION, label, x, 1s\n", 1,
			"DCGM_FI_DRIVER_VERSION is a label field: it takes no watch interval or window statistics"},
		{"text field as gauge", "DCGM_FI_DRIVER_VERSION, gauge, x\n", 1,
			"DCGM_FI_DRIVER_VERSION holds text: its type must be label, not gauge"},
		{"duplicate with other type", "DCGM_FI_DEV_GPU_TEMP, gauge, x\n\nDCGM_FI_DEV_GPU_TEMP, counter, x\n", 3,
			"DCGM_FI_DEV_GPU_TEMP is already defined on line 1 with a different type, interval or statistics"},
		{"duplicate with other interval", "DCGM_FI_DEV_GPU_TEMP, gauge, x\nDCGM_FI_DEV_GPU_TEMP, gauge, x, 1s\n", 2,
			"DCGM_FI_DEV_GPU_TEMP is already defined on line 1 with a different type, interval or statistics"},
		{"duplicate with other stats", "DCGM_FI_DEV_GPU_TEMP, gauge, x, 1s, max\nDCGM_FI_DEV_GPU_TEMP, gauge, x, 1s, min\n", 2,
			"DCGM_FI_DEV_GPU_TEMP is already defined on line 1 with a different type, interval or statistics"},
		{"empty field column", ", gauge, x\n", 1, "the FIELD column is empty"},
		{"empty file", "", 0, "file is empty"},
		{"blank file", "\n  \n\t\n", 0, "file is empty"},
		{"only comments", "# DCGM_FI_DEV_GPU_TEMP, gauge, x\n\n# more\n", 0,
			"no enabled field: every line is blank or a comment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, pe := parseString(t, tt.text)
			require.Nil(t, set)
			require.NotNil(t, pe)
			require.Len(t, pe.Errors, 1, pe.Error())
			got := pe.Errors[0]
			assert.Equal(t, "test.csv", got.File)
			assert.Equal(t, tt.line, got.Line)
			assert.Equal(t, tt.msg, got.Msg)
		})
	}
}

func TestParseReportsEveryProblemAtOnce(t *testing.T) {
	text := strings.Join([]string{
		"# header",
		"DCGM_FI_DEV_GPU_TEMP, gauge, ok",
		"DCGM_FI_DEV_GPU_TEMPP, gauge, typo",
		"DCGM_FI_DEV_SM_CLOCK, histogram, no",
		"DCGM_FI_DEV_MEM_CLOCK, gauge, fast, 10ms",
	}, "\n")
	_, pe := parseString(t, text)
	require.NotNil(t, pe)
	assert.Equal(t, strings.Join([]string{
		`test.csv:3: unknown field "DCGM_FI_DEV_GPU_TEMPP"; did you mean DCGM_FI_DEV_GPU_TEMP?`,
		"test.csv:4: type histogram is not supported: a DCGM field is a single value per sample, and exporting it as a histogram gives invalid exposition; use gauge (window statistics give min, max, avg and percentiles)",
		"test.csv:5: watch interval 10ms is below the minimum of 100ms",
	}, "\n"), pe.Error())
}

func TestParseBoundsReportedProblems(t *testing.T) {
	text := strings.Repeat("NOPE, gauge, x\n", maxLineErrors+7)
	_, pe := parseString(t, text)
	require.NotNil(t, pe)
	assert.Len(t, pe.Errors, maxLineErrors)
	assert.Equal(t, 7, pe.Omitted)
	assert.True(t, strings.HasSuffix(pe.Error(), "... and 7 more problems"))
}

func TestParseRefusesOversizedFile(t *testing.T) {
	text := strings.Repeat("# padding padding padding padding padding padding\n", maxFileSize/50+10)
	_, pe := parseString(t, "DCGM_FI_DEV_GPU_TEMP, gauge, x\n"+text)
	require.NotNil(t, pe)
	assert.Contains(t, pe.Error(), "test.csv:20972: the file is larger than 1048576 bytes at this line")
}

func TestParseLenient(t *testing.T) {
	text := strings.Join([]string{
		"  # indented comment",
		"DCGM_FI_DEV_DEC_UTIL ,     gauge, Decoder utilization (in %).",
		`DCGM_FI_DEV_GPU_TEMP, GAUGE, "GPU temperature, in C", 250, P99 max  avg`,
		"DCGM_FI_PROF_SM_ACTIVE, gauge, ratio, 100ms, ",
		"DCGM_FI_DEV_POWER_USAGE, gauge, , , ",
		"DCGM_FI_DRIVER_VERSION, Label, Driver Version",
		"DCGM_FI_DEV_POWER_VIOLATION, Counter, ns, 2s",
		"dcgm_sm_clock, gauge, legacy name",
		"DCGM_EXP_XID_ERRORS_COUNT, gauge, xids",
		"DCGM_FI_PROF_DRAM_ACTIVE, gauge, dram, 100ms, max NoHist",
	}, "\r\n")
	set, pe := parseString(t, text)
	require.Nil(t, pe)
	require.Len(t, set.Fields, 9)
	assert.Empty(t, set.Warnings)
	assert.Equal(t, "test.csv", set.File)

	want := []Field{
		{Name: "DCGM_FI_DEV_DEC_UTIL", ID: fieldid.DecUtil, Type: Gauge, Help: "Decoder utilization (in %).", Line: 2},
		{Name: "DCGM_FI_DEV_GPU_TEMP", ID: fieldid.GPUTemp, Type: Gauge, Help: "GPU temperature, in C", Interval: 250 * time.Millisecond,
			Stats: []Stat{StatMax, StatAvg, StatP99}, Line: 3},
		{Name: "DCGM_FI_PROF_SM_ACTIVE", ID: fieldid.ProfSMActive, Type: Gauge, Help: "ratio", Interval: 100 * time.Millisecond, Line: 4},
		{Name: "DCGM_FI_DEV_POWER_USAGE", ID: fieldid.PowerUsage, Type: Gauge, Help: "Power draw (in W).", Line: 5},
		{Name: "DCGM_FI_DRIVER_VERSION", ID: fieldid.DriverVersion, Type: Label, Help: "Driver Version", Line: 6},
		{Name: "DCGM_FI_DEV_POWER_VIOLATION", ID: fieldid.PowerViolation, Type: Counter, Help: "ns", Interval: 2 * time.Second, Line: 7},
		{Name: "dcgm_sm_clock", ID: fieldid.SMClock, Type: Gauge, Help: "legacy name", Line: 8},
		{Name: "DCGM_EXP_XID_ERRORS_COUNT", ID: fieldid.ExpXIDErrorsCount, Type: Gauge, Help: "xids", Line: 9},
		{Name: "DCGM_FI_PROF_DRAM_ACTIVE", ID: fieldid.ProfDRAMActive, Type: Gauge, Help: "dram", Interval: 100 * time.Millisecond,
			Stats: []Stat{StatMax}, NoHistogram: true, Line: 10},
	}
	assert.Equal(t, want, set.Fields)
}

func TestParseExactRepeatWarns(t *testing.T) {
	text := "DCGM_FI_DEV_GPU_TEMP, gauge, first\nDCGM_FI_DEV_SM_CLOCK, gauge, x\nDCGM_FI_DEV_GPU_TEMP, gauge, second help\n"
	set, pe := parseString(t, text)
	require.Nil(t, pe)
	require.Len(t, set.Fields, 2)
	assert.Equal(t, "first", set.Fields[0].Help, "the first line wins")
	assert.Equal(t, []string{"test.csv:3: DCGM_FI_DEV_GPU_TEMP repeats line 1 with the same type; this line is ignored"}, set.Warnings)
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.csv"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nope.csv")
}

func TestParseCompatFiles(t *testing.T) {
	dir := compatDir(t)
	tests := []struct {
		file     string
		enabled  int
		warnings []string
	}{
		{"default-counters.csv", 26, nil},
		{"dcp-metrics-included.csv", 26, nil},
		{"1.x-compatibility-metrics.csv", 20, []string{
			"dcgm_fi_prof_pcie_tx_bytes repeats line 18 with the same type; this line is ignored",
			"dcgm_fi_prof_pcie_rx_bytes repeats line 19 with the same type; this line is ignored",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join(dir, tt.file)
			set, err := Load(path)
			require.NoError(t, err)
			assert.Len(t, set.Fields, tt.enabled)
			require.Len(t, set.Warnings, len(tt.warnings))
			for i, w := range tt.warnings {
				assert.Contains(t, set.Warnings[i], w)
				assert.True(t, strings.HasPrefix(set.Warnings[i], path+":"), set.Warnings[i])
			}
			for _, f := range set.Fields {
				info, ok := ByID(f.ID)
				require.True(t, ok, f.Name)
				assert.NotZero(t, f.Line, f.Name)
				assert.NotEqual(t, KindUnknown, info.Kind, f.Name)
			}
		})
	}
}

func TestParseShippedFiles(t *testing.T) {
	tests := []struct {
		file    string
		enabled int
	}{
		{"default-counters.csv", 55},
		{"dcp-metrics.csv", 61},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			set, err := Load(filepath.Join("..", "etc", tt.file))
			require.NoError(t, err)
			assert.Empty(t, set.Warnings)
			assert.Len(t, set.Fields, tt.enabled)
			for _, f := range set.Fields {
				assert.NotEmpty(t, f.Help, f.Name)
			}
		})
	}
}

// The shipped default file and the catalog's everyday set must not drift
// apart: `counters list --format csv` enables the catalog's set.
func TestDefaultFileMatchesCatalog(t *testing.T) {
	set, err := Load(filepath.Join("..", "etc", "default-counters.csv"))
	require.NoError(t, err)
	var inFile, inCatalog []string
	for _, f := range set.Fields {
		inFile = append(inFile, f.Name)
	}
	for _, f := range All() {
		if f.Default && !f.Legacy {
			inCatalog = append(inCatalog, f.Name)
		}
	}
	assert.ElementsMatch(t, inCatalog, inFile)
}

func TestProfilingFileUsesFastIntervals(t *testing.T) {
	set, err := Load(filepath.Join("..", "etc", "dcp-metrics.csv"))
	require.NoError(t, err)
	byName := map[string]Field{}
	for _, f := range set.Fields {
		byName[f.Name] = f
	}
	for _, name := range []string{"DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE"} {
		f := byName[name]
		assert.Equal(t, 100*time.Millisecond, f.Interval, name)
		assert.Equal(t, AllStats, f.Stats, name)
	}
	for _, name := range []string{"DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_NVLINK_RX_BYTES", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_FP16_ACTIVE"} {
		assert.Equal(t, 100*time.Millisecond, byName[name].Interval, name)
	}
	assert.Equal(t, time.Second, byName["DCGM_FI_DEV_GPU_TEMP"].Interval)
}

// TestLoadFIFOHangsNothing: `counters check` and `-f` on a named pipe, a
// device or a directory answer at once with an error naming the file and
// what it is, instead of blocking on the open or reading forever.
func TestLoadFIFOHangsNothing(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.csv")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	zero := filepath.Join(dir, "zero.csv")
	require.NoError(t, os.Symlink("/dev/zero", zero))
	big := filepath.Join(dir, "big.csv")
	f, err := os.Create(big)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(1<<30))
	require.NoError(t, f.Close())
	tests := []struct{ path, want string }{
		{fifo, "is a named pipe (FIFO), not a regular file"},
		{zero, "is a character device, not a regular file"},
		{dir, "is a directory, not a regular file"},
		{big, "is 1073741824 bytes, larger than 1048576"},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.path), func(t *testing.T) {
			done := make(chan error, 1)
			go func() { _, err := Load(tt.path); done <- err }()
			select {
			case err := <-done:
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.path+" "+tt.want)
			case <-time.After(10 * time.Second):
				t.Fatalf("Load(%s) has not returned", tt.path)
			}
		})
	}
}

// TestParseInvalidUTF8BreaksEveryScrape: help text that is not UTF-8 (a
// Latin-1 degree sign) is served as is, and Prometheus then refuses the
// whole scrape; the file is refused with its line instead.
func TestParseInvalidUTF8BreaksEveryScrape(t *testing.T) {
	text := "DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n" +
		"# a comment in Latin-1 is harmless: \xb0\n" +
		"DCGM_FI_DEV_MEMORY_TEMP, gauge, Memory temperature (in \xb0C).\n"
	_, pe := parseString(t, text)
	require.NotNil(t, pe)
	assert.Equal(t, "test.csv:3: the line is not valid UTF-8 (byte 56); save the file as UTF-8", pe.Error())
}

// nearMisses is a counters file of n unknown field names, each a letter
// away from a real one, as a corrupted or machine-written file might be.
func nearMisses(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "DCGM_FI_DEV_GPU_TEMQ%d, gauge, x\n", i%10)
	}
	return b.String()
}

// TestParsePathologicalFilesCostCPU: past the cap on reported problems, an
// unknown field costs no name suggestion (a walk of the whole catalog), and
// repeated lines past the cap cost no warning each. Allocations measure the
// work without a clock: the lines past the cap must cost what parsing them
// costs, not what suggesting for them costs.
func TestParsePathologicalFilesCostCPU(t *testing.T) {
	small, large := nearMisses(1000), nearMisses(2000)
	allocs := func(text string) float64 {
		return testing.AllocsPerRun(1, func() { _, _ = Parse("test.csv", strings.NewReader(text)) })
	}
	perLine := (allocs(large) - allocs(small)) / 1000
	assert.Less(t, perLine, 40.0, "allocations per unknown field past the cap")

	_, pe := parseString(t, large)
	require.NotNil(t, pe)
	assert.Len(t, pe.Errors, maxLineErrors)
	assert.Equal(t, 2000-maxLineErrors, pe.Omitted)

	set, pe := parseString(t, strings.Repeat("DCGM_FI_DEV_GPU_TEMP, gauge, x\n", 10000))
	require.Nil(t, pe)
	require.Len(t, set.Warnings, maxWarnings+1)
	assert.Equal(t, "test.csv:2: DCGM_FI_DEV_GPU_TEMP repeats line 1 with the same type; this line is ignored", set.Warnings[0])
	assert.Equal(t, fmt.Sprintf("test.csv: ... and %d more repeated lines, ignored", 9999-maxWarnings), set.Warnings[maxWarnings])
}

// TestParseClearerFileErrors: a byte-order mark is stripped, CR-only line
// endings and an over-long line are named, with the line where there is
// one, instead of "unknown field" or "bufio.Scanner: token too long".
func TestParseClearerFileErrors(t *testing.T) {
	set, pe := parseString(t, "\ufeffDCGM_FI_DEV_GPU_TEMP, gauge, x\r\nDCGM_FI_DEV_POWER_USAGE, gauge, y\r\n")
	require.Nil(t, pe, "a UTF-8 byte-order mark and CRLF endings are accepted")
	require.Len(t, set.Fields, 2)
	assert.Equal(t, "DCGM_FI_DEV_GPU_TEMP", set.Fields[0].Name)

	tests := []struct{ name, text, want string }{
		{"CR-only line endings", "DCGM_FI_DEV_GPU_TEMP, gauge, x\rDCGM_FI_DEV_POWER_USAGE, gauge, y\r",
			"test.csv: lines end in a carriage return alone (CR, old Mac style); save the file with LF or CRLF line endings"},
		{"a 10 MB line", "DCGM_FI_DEV_GPU_TEMP, gauge, x\n# fine\nDCGM_FI_DEV_POWER_USAGE, gauge, " + strings.Repeat("y", 10<<20) + "\n",
			"test.csv:3: the file is larger than 1048576 bytes at this line; a counters file lists fields, one per line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("test.csv", strings.NewReader(tt.text))
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
		})
	}
}
