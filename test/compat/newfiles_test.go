package compat

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/testkit/compattest"
	"github.com/gpuscope/gpuscope/source/sim"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

// csvLine is one field line of a counters file, as written.
type csvLine struct {
	name, typ string
}

// fieldLines reads a counters file's field lines with dcgm-exporter's
// rules: '#' starts a comment line, the first two columns are the field
// and its type, names as written (trimmed).
func fieldLines(t *testing.T, b []byte) []csvLine {
	t.Helper()
	var out []csvLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cols := strings.Split(line, ",")
		require.GreaterOrEqual(t, len(cols), 2, line)
		out = append(out, csvLine{name: strings.TrimSpace(cols[0]), typ: strings.TrimSpace(cols[1])})
	}
	require.NoError(t, sc.Err())
	return out
}

// counterFiles are dcgm-exporter's counters files by release: 4.8 as
// released (../shared, commit d5e5f51), 4.9 and 4.10 as derived from it and
// their release notes (each file's header says how).
func counterFiles(t *testing.T) map[string]string {
	files := map[string]string{}
	for _, f := range []string{"default-counters.csv", "dcp-metrics-included.csv"} {
		if dir := compattest.DirOrEmpty(t); dir != "" {
			files["4.8/"+f] = filepath.Join(dir, f)
		}
		for _, v := range []string{"4.9", "4.10"} {
			files[v+"/"+f] = filepath.Join("testdata", "dcgm-exporter-"+v, f)
		}
	}
	return files
}

// TestNewerDCGMExporterCountersFilesServeAsWritten: each file loads
// unchanged and serves on the sim with every value field under the name
// the file writes, and the label field (the driver version) named as the
// file names it: DCGM_FI_SYSTEM_DRIVER_VERSION in a 4.9 file,
// DCGM_FI_DRIVER_VERSION in a 4.8 one. A file naming a field the catalog
// does not know yet is skipped, saying which.
func TestNewerDCGMExporterCountersFilesServeAsWritten(t *testing.T) {
	for release, path := range counterFiles(t) {
		t.Run(release, func(t *testing.T) {
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			lines := fieldLines(t, b)
			var unknown []string
			for _, l := range lines {
				if _, ok := counters.Lookup(l.name); !ok {
					unknown = append(unknown, l.name)
				}
			}
			if len(unknown) > 0 {
				t.Skipf("the catalog does not know %s yet", strings.Join(unknown, ", "))
			}
			_, err = counters.Load(path)
			require.NoError(t, err, "the file loads unchanged")

			clk := sourcetest.NewClock(time.Unix(1_750_000_000, 0))
			cfg := sim.DefaultConfig()
			cfg.GPUs, cfg.Now, cfg.EventRate = 2, clk.Now, 0
			src, err := sim.New(cfg)
			require.NoError(t, err)
			mfs := render(t, src, string(b), clk)

			written := map[string]bool{}
			var labels, notYet []string
			for _, l := range lines {
				written[l.name] = true
				if l.typ == "label" {
					labels = append(labels, l.name)
					continue
				}
				if _, ok := mfs[l.name]; !ok {
					if newIDs[l.name] {
						notYet = append(notYet, l.name)
						continue
					}
					t.Errorf("%s: no family %s", path, l.name)
				}
			}
			for name, mf := range mfs {
				if !strings.HasPrefix(name, "DCGM_") || strings.HasSuffix(name, "_window") || strings.HasSuffix(name, "_window_samples") {
					continue
				}
				assert.True(t, written[name], "%s: family %s is not named as the file writes it", path, name)
				for _, m := range mf.Metric {
					for _, l := range labels {
						assert.NotEmpty(t, labelOf(m, l), "%s: %s has no %s label", path, name, l)
					}
					for _, other := range []string{"DCGM_FI_DRIVER_VERSION", "DCGM_FI_SYSTEM_DRIVER_VERSION"} {
						if !written[other] {
							assert.Empty(t, labelOf(m, other), "%s: %s has a %s label the file does not name", path, name, other)
						}
					}
				}
			}
			if len(notYet) > 0 {
				// After the checks above, so that a wrong name or label still fails.
				t.Skipf("the sim does not serve the base-unit fields %s yet", strings.Join(notYet, ", "))
			}
		})
	}
}

// newIDs are the fields of those files that are not renames of a 4.8
// field but base-unit fields under new IDs (DCGM 4.6.1's dcgm_fields.h,
// 1600-1612): a source serves them once it derives them from the legacy
// field; every other field is the same ID under its new name and must be
// served.
var newIDs = map[string]bool{
	"DCGM_FI_DEV_SM_CLOCK_HERTZ":          true, // 1603, from DCGM_FI_DEV_SM_CLOCK (MHz)
	"DCGM_FI_DEV_MEMORY_CLOCK_HERTZ":      true, // 1604, from DCGM_FI_DEV_MEM_CLOCK (MHz)
	"DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL": true, // 1611, from DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (mJ)
}
