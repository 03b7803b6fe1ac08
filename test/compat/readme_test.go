package compat

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

// comparison reads the README's table comparing gpuscope with dcgm-exporter:
// row name -> {dcgm-exporter's cell, gpuscope's cell}.
func comparison(t *testing.T, readme string) map[string][2]string {
	t.Helper()
	i := strings.Index(readme, "## How it compares to dcgm-exporter")
	require.GreaterOrEqual(t, i, 0)
	out := map[string][2]string{}
	for _, l := range strings.Split(readme[i:], "\n")[1:] {
		if strings.HasPrefix(l, "## ") {
			break
		}
		cells := strings.Split(strings.Trim(l, "|"), " | ")
		if len(cells) == 3 {
			out[strings.TrimSpace(cells[0])] = [2]string{cells[1], cells[2]}
		}
	}
	return out
}

// What the README says dcgm-exporter does is what its source does:
// DCGM_EXP_XID_ERRORS_COUNT counts every XID in its window
// (internal/pkg/collector/xid_collector.go, expcollector.go); the pod mapper
// maps <uuid>::N, nvidiaX/giY and nvidiaX/vgpuN without any flag and gives a
// shared GPU to the last pod listed (internal/pkg/transformation/
// kubernetes.go, toDeviceToPod); its counters parser accepts histogram and
// summary (internal/pkg/counters/variables.go, promMetricType), which
// gpuscope refuses.
func TestREADMEDescribesDCGMExporterAsItsSourceDoes(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(e2etest.RepoRoot(), "README.md"))
	require.NoError(t, err)
	readme := string(b)
	rows := comparison(t, readme)

	xid := rows["repeated XIDs"]
	assert.NotContains(t, xid[0], "counted once")
	assert.Contains(t, xid[0], "`DCGM_EXP_XID_ERRORS_COUNT` counts each XID within its window")

	ids := rows["Kubernetes IDs"]
	assert.NotContains(t, ids[0], "need flags")
	assert.Contains(t, ids[0], "every form maps")
	assert.Contains(t, ids[0], "goes to the last pod listed")

	flat := strings.Join(strings.Fields(readme), " ")
	assert.NotContains(t, flat, "so every dcgm-exporter file stays valid:")
	assert.Contains(t, flat, "except lines of type `histogram` or `summary`")
	for _, typ := range []string{"histogram", "summary"} {
		_, err := counters.Parse("h.csv", strings.NewReader("DCGM_FI_DEV_GPU_TEMP, "+typ+", t\n"))
		assert.ErrorContains(t, err, "h.csv:1", "gpuscope refuses %s, naming the line", typ)
	}
}

// The comparison is with the newest dcgm-exporter, and says where each
// statement about it comes from: per-watch intervals and the cumulative XID
// counter since 4.8.3 (internal/pkg/appconfig/yaml_config.go at 7ad58324;
// its README's "Cumulative XID and clock event counters"), per-pod
// GPU_UTIL and FB_USED on shared GPUs (#594), the scrape limit (pkg/cmd/
// app.go after 0048f87c), and a source line for every row.
func TestREADMEComparesWithTheNewestDCGMExporter(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(e2etest.RepoRoot(), "README.md"))
	require.NoError(t, err)
	readme := string(b)
	rows := comparison(t, readme)
	for row, want := range map[string][]string{
		"sampling":                {"since 4.8.3", "own interval"},
		"repeated XIDs":           {"since 4.8.3", "`DCGM_EXP_XID_ERRORS_TOTAL{xid}`"},
		"Kubernetes IDs":          {"`--kubernetes-virtual-gpus`", "`DCGM_FI_DEV_GPU_UTIL`", "`DCGM_FI_DEV_FB_USED`", "#594"},
		"scrape path":             {"`--max-concurrent-scrapes`", "503"},
		"counters CSV":            {"`--config-file`"},
		"metric names and labels": {"`DCGM_FI_SYSTEM_DRIVER_VERSION`"},
	} {
		for _, w := range want {
			assert.Contains(t, rows[row][0], w, "dcgm-exporter's cell of %q", row)
		}
	}
	i := strings.Index(readme, "Where each statement about dcgm-exporter comes from")
	require.GreaterOrEqual(t, i, 0, "the table names its sources")
	sources := readme[i:]
	sources = sources[:strings.Index(sources, "\n\n## ")]
	for row := range rows {
		if row == "" || row == "---" {
			continue
		}
		assert.True(t, strings.Contains(sources, "\n- "+row+":") || strings.Contains(sources, "\n- "+row+";") ||
			strings.Contains(sources, "; "+row+":") || strings.Contains(sources, ", "+row+":"),
			"row %q has a source line", row)
	}
}
