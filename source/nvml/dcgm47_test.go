package nvml

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	timesource "github.com/gpuscope/gpuscope/internal/clock"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/nvml/nvmlfake"
)

// DCGM 4.7's DCGM_FI_DEV_NVLINK_THROUGHPUT_BYTES_PER_SECOND (NVIDIA's DCGM
// 4.7.0 field reference; counters/fieldid/dcgm47.go) is the data counters'
// KiB/s times 1024. The NVML source has the KiB/s, so it gives the bytes at
// full resolution rather than the legacy field's truncated "MB/s" (KiB/s /
// 1000) times 1 024 000; one reading of the counters serves both fields,
// which share one baseline.
func TestNVLinkBytesPerSecondFromTheKiBRate(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	clk := timesource.NewFake(time.Unix(1_700_000_000, 0))
	s, err := New(Config{Lib: f, Logger: quietLogger(), RetryBackoff: 20 * time.Millisecond,
		ProcessInterval: time.Millisecond, EventWait: 20 * time.Millisecond, Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Watch([]source.Group{{Interval: time.Second,
		Fields: fields(fieldid.NVLinkBandwidthTotal, fieldid.NVLinkThroughputBytesPerSecond)}}))
	sink := newSink()
	require.NoError(t, s.Collect(context.Background(), 0, sink))
	_, ok := sink.value(gpuEntity(t, s, 0), fieldid.NVLinkThroughputBytesPerSecond)
	assert.False(t, ok, "the first reading only sets the baseline")

	f.Update(0, func(g *nvmlfake.GPU) {
		g.R.NVLinkDataKiB = [][2]uint64{{90 + 600_000, 180 + 300_000}, {270 + 400_000, 360 + 201_001}}
	})
	clk.Add(2 * time.Second)
	require.NoError(t, s.Collect(context.Background(), 0, sink))
	legacy, ok := sink.value(gpuEntity(t, s, 0), fieldid.NVLinkBandwidthTotal)
	require.True(t, ok)
	assert.Equal(t, 750.0, legacy, "1 501 001 KiB over 2 s, /1000, truncated")
	bytes, ok := sink.value(gpuEntity(t, s, 0), fieldid.NVLinkThroughputBytesPerSecond)
	require.True(t, ok)
	assert.Equal(t, 1_501_001.0/2*1024, bytes, "750 500.5 KiB/s in bytes, not 750 x 1 024 000")
}
