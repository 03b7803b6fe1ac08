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
