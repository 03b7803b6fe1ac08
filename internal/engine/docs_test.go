package engine

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docs/metrics.md's differences table states the caps of the XID history
// with the numbers the engine uses, and says what dcgm-exporter does
// instead (internal/pkg/collector/expcollector.go, getMetrics: every value
// GetValuesSince returns over the window).
func TestMetricsDocStatesTheXIDCaps(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	require.NoError(t, err)
	var row string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "| `DCGM_EXP_XID_ERRORS_COUNT` window |") {
			row = l
		}
	}
	require.NotEmpty(t, row, "docs/metrics.md has no differences row for the XID count window")
	assert.Contains(t, row, "the "+strconv.Itoa(maxRecentEvents)+" most recent XID events")
	assert.Contains(t, row, strconv.Itoa(maxXIDCodes)+" distinct XID codes per GPU")
	assert.Contains(t, row, "every XID event DCGM keeps in the window")
}
