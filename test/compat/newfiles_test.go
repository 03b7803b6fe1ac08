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
// DCGM_FI_DRIVER_VERSION in a 4.8 one. Every field of the 4.9 and 4.10
// files is in the catalog and served: the base-unit fields of DCGM 4.6.1
// (go-dcgm v1.4611.0's dcgm_fields.h) and DCGM 4.7
// (counters/fieldid/dcgm47.go) derived from their legacy fields, and a
// ratio (DCGM_FI_DEV_GPU_UTIL_RATIO, a 0-1 ratio in DCGM 4.7's field
// reference and dcgm-exporter 4.9's release notes) stays in 0..1.
func TestNewerDCGMExporterCountersFilesServeAsWritten(t *testing.T) {
	for release, path := range counterFiles(t) {
		t.Run(release, func(t *testing.T) {
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			lines := fieldLines(t, b)
			for _, l := range lines {
				_, ok := counters.Lookup(l.name)
				assert.True(t, ok, "%s: the catalog does not know %s", path, l.name)
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
			var labels []string
			for _, l := range lines {
				written[l.name] = true
				if l.typ == "label" {
					labels = append(labels, l.name)
					continue
				}
				mf, ok := mfs[l.name]
				if !ok {
					t.Errorf("%s: no family %s", path, l.name)
					continue
				}
				if info, _ := counters.Lookup(l.name); info.Unit == "ratio" {
					for _, m := range mf.Metric {
						assert.InDelta(t, 0.5, value(m), 0.5, "%s: %s is a 0-1 ratio", path, l.name)
					}
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
		})
	}
}
