package cost

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
)

// twoGPUs is an exposition of two GPUs, one field with two window
// statistics, and one family of gpuscope's own.
const twoGPUs = `# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a",modelName="H100 \"SXM\""} 41
DCGM_FI_DEV_GPU_TEMP{gpu="1",UUID="GPU-b",modelName="H100 \"SXM\""} 39
# HELP DCGM_FI_DEV_GPU_TEMP_window Window statistics of DCGM_FI_DEV_GPU_TEMP over the last 15s, by stat.
# TYPE DCGM_FI_DEV_GPU_TEMP_window gauge
DCGM_FI_DEV_GPU_TEMP_window{gpu="0",UUID="GPU-a",modelName="H100 \"SXM\"",stat="max"} 44
DCGM_FI_DEV_GPU_TEMP_window{gpu="0",UUID="GPU-a",modelName="H100 \"SXM\"",stat="avg"} 41.5
DCGM_FI_DEV_GPU_TEMP_window{gpu="1",UUID="GPU-b",modelName="H100 \"SXM\"",stat="max"} 40
DCGM_FI_DEV_GPU_TEMP_window{gpu="1",UUID="GPU-b",modelName="H100 \"SXM\"",stat="avg"} 39.5
# HELP DCGM_FI_DEV_GPU_TEMP_window_samples Samples of DCGM_FI_DEV_GPU_TEMP in the last 15s window.
# TYPE DCGM_FI_DEV_GPU_TEMP_window_samples gauge
DCGM_FI_DEV_GPU_TEMP_window_samples{gpu="0",UUID="GPU-a",modelName="H100 \"SXM\""} 15
DCGM_FI_DEV_GPU_TEMP_window_samples{gpu="1",UUID="GPU-b",modelName="H100 \"SXM\""} 15
# HELP gpuscope_gpus GPUs the source sees now.
# TYPE gpuscope_gpus gauge
gpuscope_gpus 2
`

func TestParse(t *testing.T) {
	x, err := Parse([]byte(twoGPUs), nil)
	require.NoError(t, err)
	assert.Len(t, x.Series, 9)
	assert.Equal(t, len(twoGPUs), x.Bytes)
	assert.Equal(t, `H100 "SXM"`, x.Series[0].Labels["modelName"], "escaped quotes are read back")
	assert.Equal(t, "41.5", x.Series[3].Value)
	assert.Equal(t, "2", x.Series[8].Value)
	// Every byte belongs to one family: sample lines and HELP/TYPE lines.
	assert.Equal(t, Family{Series: 9, Bytes: len(twoGPUs)}, x.Total())
	temp := x.Field("DCGM_FI_DEV_GPU_TEMP")
	assert.Equal(t, 8, temp.Series)
	assert.Equal(t, Family{Series: 1, Bytes: x.Families["gpuscope_gpus"].Bytes}, x.Besides([]string{"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_GPU_TEMP"}))
	assert.InDelta(t, 0.6, SamplesPerSecond(9, Scrape), 1e-9)

	dropped, err := Parse([]byte(twoGPUs), func(name string) bool { return strings.HasPrefix(name, "gpuscope_") })
	require.NoError(t, err)
	assert.Len(t, dropped.Series, 8)
	assert.Equal(t, len(twoGPUs), dropped.Bytes, "a relabel rule drops after the scrape: the bytes are still sent")
	assert.NotContains(t, dropped.Families, "gpuscope_gpus")
}

func TestParseRefusesBadLines(t *testing.T) {
	for _, line := range []string{`{gpu="0"} 1`, `m{gpu=0} 1`, `m{gpu="0} 1`} {
		_, err := Parse([]byte(line+"\n"), nil)
		assert.Error(t, err, line)
		if err != nil {
			assert.Contains(t, err.Error(), "line 1", line)
		}
	}
}

// TestModelMatchesExposition prices the field of twoGPUs from the node the
// exposition shows: the model must give what was measured.
func TestModelMatchesExposition(t *testing.T) {
	x, err := Parse([]byte(twoGPUs), nil)
	require.NoError(t, err)
	node := NodeOf(x, 15*time.Second)
	require.Equal(t, 2, node.Sets(fieldid.LevelGPU))
	info, ok := counters.Lookup("DCGM_FI_DEV_GPU_TEMP")
	require.True(t, ok)
	f := counters.Field{Name: info.Name, ID: info.ID, Type: info.Type, Help: info.Help, Stats: []counters.Stat{counters.StatMax, counters.StatAvg}}
	model := node.Field(f)
	for _, tc := range []struct {
		stats      int
		wantSeries int
	}{{0, 2}, {1, 6}, {2, 8}, {6, 16}} {
		assert.Equal(t, tc.wantSeries, model.With(tc.stats).Series, "%d statistics", tc.stats)
	}
	got := model.With(2)
	want := x.Field(f.Name)
	assert.Equal(t, want.Series, got.Series)
	assert.InEpsilon(t, want.Bytes, got.Bytes, 0.03, "modelled %d bytes, measured %d", got.Bytes, want.Bytes)

	label := counters.Field{Name: "DCGM_FI_DEV_NAME", ID: mustID(t, "DCGM_FI_DEV_NAME"), Type: counters.Label}
	assert.Equal(t, Family{}, node.Field(label).With(3), "a label field adds labels, not series")
}

func TestAssumeFillsOnlyUnseenLevels(t *testing.T) {
	x, err := Parse([]byte(twoGPUs), nil)
	require.NoError(t, err)
	node := NodeOf(x, 15*time.Second)
	node.Assume(fieldid.LevelGPU, 8)
	node.Assume(fieldid.LevelNvSwitch, 4)
	assert.Equal(t, 2, node.Sets(fieldid.LevelGPU), "the exposition's GPUs win over a count")
	assert.Equal(t, 4, node.Sets(fieldid.LevelNvSwitch))
	assert.Equal(t, 0, node.Sets(fieldid.LevelLink))
	sw := counters.Field{Name: "DCGM_FI_DEV_NVSWITCH_TEMPERATURE_CURRENT", ID: mustID(t, "DCGM_FI_DEV_NVSWITCH_TEMPERATURE_CURRENT"), Type: counters.Gauge}
	assert.Equal(t, 4, node.Field(sw).With(0).Series)
}

func mustID(t *testing.T, name string) uint16 {
	t.Helper()
	info, ok := counters.Lookup(name)
	require.True(t, ok, name)
	return info.ID
}
