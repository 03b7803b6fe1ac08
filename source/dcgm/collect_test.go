package dcgm_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/dcgm/dcgmfake"
)

// checkContiguous asserts that each series got samples 1..n exactly once.
func checkContiguous(t *testing.T, samples []dcgmfake.Sample) map[string]int {
	t.Helper()
	last := map[string]float64{}
	for _, s := range samples {
		k := s.Key + "/" + fmt.Sprint(s.Field)
		require.Equal(t, last[k]+1, s.V, "series %s: sample after %v lost or repeated", k, last[k])
		last[k] = s.V
	}
	out := map[string]int{}
	for k, v := range last {
		out[k] = int(v)
	}
	return out
}

// TestCollectHandsEverySampleSinceLastRead: the engine reads each group at
// its watch interval. Reads at that pace or faster neither lose nor repeat
// a sample; the event fields keep every sample however late a read comes
// (TestEventFieldsLoseNoSampleBetweenReads).
func TestCollectHandsEverySampleSinceLastRead(t *testing.T) {
	f, clk := newFake()
	s := newSource(t, f, group(10*time.Millisecond, fieldid.GPUTemp, fieldid.PowerUsage))
	rec := &dcgmfake.Recorder{}
	pauses := []time.Duration{0, 3 * time.Millisecond, 10 * time.Millisecond, 1 * time.Millisecond, 7 * time.Millisecond}
	var elapsed time.Duration
	for i := range 2 * len(pauses) {
		require.NoError(t, s.Collect(context.Background(), 0, rec))
		clk.Add(pauses[i%len(pauses)])
		elapsed += pauses[i%len(pauses)]
	}
	require.NoError(t, s.Collect(context.Background(), 0, rec))
	n := checkContiguous(t, rec.All())
	assert.Len(t, n, 4, "two fields on two GPUs")
	for k, got := range n {
		// One sample as the watch starts, then one per 10 ms.
		assert.Equal(t, 1+int(elapsed/(10*time.Millisecond)), got, "series %s", k)
	}
	for _, v := range rec.All() {
		assert.Greater(t, v.TS, int64(1e18), "timestamps are Unix nanoseconds")
	}
}

func TestXIDsRepeatedInOneWindowEachCount(t *testing.T) {
	f, _ := newFake()
	s := newSource(t, f, group(20*time.Millisecond, fieldid.ExpXIDErrorsCount))
	rec := &dcgmfake.Recorder{}
	require.NoError(t, s.Collect(context.Background(), 0, rec))
	gpu0, gpu1 := dcgm.EntityRef{Group: dcgm.EntityGPU, ID: 0}, dcgm.EntityRef{Group: dcgm.EntityGPU, ID: 1}
	for _, x := range []struct {
		e   dcgm.EntityRef
		xid int64
	}{{gpu0, 79}, {gpu0, 79}, {gpu1, 48}, {gpu0, 79}} {
		f.Inject(x.e, fieldid.XIDErrors, dcgm.Value{Kind: dcgm.KindInt64, Int: x.xid})
	}
	require.NoError(t, s.Collect(context.Background(), 0, rec))
	var got []string
	for _, x := range rec.XIDs() {
		got = append(got, fmt.Sprintf("%s:%d", x.Key, x.XID))
	}
	g0, g1 := "gpu/GPU-00000000-0000-0000-0000-000000000000", "gpu/GPU-11111111-1111-1111-1111-111111111111"
	assert.ElementsMatch(t, []string{g0 + ":79", g0 + ":79", g0 + ":79", g1 + ":48"}, got)
	vals := rec.Values(fieldid.XIDErrors)
	require.NotEmpty(t, vals)
	assert.Len(t, vals, 4, "each XID is also the field's value")

	require.NoError(t, s.Collect(context.Background(), 0, rec))
	assert.Len(t, rec.XIDs(), 4, "a later read does not repeat XIDs")
}

func TestBlanksAreNoValue(t *testing.T) {
	blanks := map[uint16]dcgm.Value{
		fieldid.GPUTemp:      {Kind: dcgm.KindInt64, Int: 0x7ffffff0},            // int32 blank
		fieldid.PowerUsage:   {Kind: dcgm.KindFloat64, Float: 140737488355328.0}, // fp64 blank
		fieldid.GPUUtil:      {Kind: dcgm.KindInt64, Int: 0x7ffffffffffffff0},    // int64 blank
		fieldid.MemCopyUtil:  {Kind: dcgm.KindInt64, Int: 0x7ffffffffffffff1},    // int64 not found
		fieldid.Name:         {Kind: dcgm.KindString, Str: "<<<NULL>>>"},
		fieldid.ProfSMActive: {Kind: dcgm.KindInt64, Int: 0x7ffffff2}, // int32 not supported
	}
	f, clk := newFake(
		dcgmfake.WithProfiling(map[uint][]uint16{0: {fieldid.ProfSMActive}, 1: {fieldid.ProfSMActive}}),
		dcgmfake.WithGen(func(e dcgm.EntityRef, field uint16, seq int64) (dcgm.Value, bool) {
			if v, ok := blanks[field]; ok && (e.ID == 0 || field == fieldid.ProfSMActive) {
				return v, true
			}
			return dcgm.Value{Kind: dcgm.KindFloat64, Float: float64(seq)}, true
		}))
	s := newSource(t, f, group(10*time.Millisecond, fieldid.GPUTemp, fieldid.PowerUsage, fieldid.GPUUtil, fieldid.MemCopyUtil, fieldid.Name, fieldid.ProfSMActive))
	rec := &dcgmfake.Recorder{}
	collectUntil(t, clk, s, 0, rec, func() bool { return len(rec.Values(fieldid.GPUTemp)) >= 3 })
	for _, v := range rec.All() {
		assert.NotEqual(t, "gpu/GPU-00000000-0000-0000-0000-000000000000", v.Key, "GPU 0 gave only blanks, got field %d = %v", v.Field, v.V)
		assert.Less(t, v.V, 1e9, "no sentinel exported as a number")
	}
	assert.Empty(t, rec.TextOf("gpu/GPU-00000000-0000-0000-0000-000000000000", fieldid.Name))
	assert.NotEmpty(t, rec.Values(fieldid.PowerUsage), "GPU 1 values still come")
	assert.Contains(t, rec.UnsupportedReasons(), "gpu/GPU-11111111-1111-1111-1111-111111111111/"+idStr(fieldid.ProfSMActive), "the not-supported sentinel is reported as unsupported")
}

// dcgm-exporter (internal/pkg/collector/gpu_health_collector.go) reports,
// for each GPU, one result per watch of gpuHealthChecks: PASS with DCGM_FR_OK
// unless an incident of that watch says otherwise; watch and error code are
// named as its healthSystemWatchToStringMap and healthCheckErrorToStringMap
// name them.
func TestHealthStatusIsOneResultPerWatch(t *testing.T) {
	f, _ := newFake()
	f.SetHealth(
		dcgm.HealthIncident{Entity: dcgm.EntityRef{Group: dcgm.EntityGPU, ID: 1}, System: 0x10, Result: 10, Code: 4},
		dcgm.HealthIncident{Entity: dcgm.EntityRef{Group: dcgm.EntityGPU, ID: 1}, System: 0xFFFFFFFF, Result: 20, Code: 101},
		dcgm.HealthIncident{Entity: dcgm.EntityRef{Group: dcgm.EntityGPU, ID: 1}, System: 0x1, Result: 10, Code: 999},
	)
	s := newSource(t, f, group(10*time.Millisecond, fieldid.ExpGPUHealthStatus))
	rec := &dcgmfake.Recorder{}
	require.NoError(t, s.Collect(context.Background(), 0, rec))
	watches := []string{"PCIE", "NVLINK", "PMU", "MCU", "MEM", "SM", "INFOROM", "THERMAL", "POWER", "DRIVER", "ALL"}
	healthy := rec.HealthOf("gpu/GPU-00000000-0000-0000-0000-000000000000")
	require.Len(t, healthy, len(watches))
	for i, r := range healthy {
		assert.Equal(t, source.HealthResult{Watch: watches[i], ErrorCode: "DCGM_FR_OK", Result: 0}, r)
	}
	sick := map[string]source.HealthResult{}
	for _, r := range rec.HealthOf("gpu/GPU-11111111-1111-1111-1111-111111111111") {
		sick[r.Watch] = r
	}
	require.Len(t, sick, len(watches))
	assert.Equal(t, source.HealthResult{Watch: "MEM", ErrorCode: "DCGM_FR_VOLATILE_DBE_DETECTED", Result: 10}, sick["MEM"])
	assert.Equal(t, source.HealthResult{Watch: "ALL", ErrorCode: "DCGM_FR_XID_ERROR", Result: 20}, sick["ALL"])
	assert.Equal(t, source.HealthResult{Watch: "PCIE", ErrorCode: "DCGM_FR_UNKNOWN(999)", Result: 10}, sick["PCIE"])
	assert.Equal(t, source.HealthResult{Watch: "SM", ErrorCode: "DCGM_FR_OK", Result: 0}, sick["SM"])
}

// dcgm-exporter (internal/pkg/collector/p2p_status_collector.go) reads
// dcgmGetNvLinkP2PStatus and writes, for row i and column j != i, GPU i's
// status towards peer GPU j. A failed read counts as a failed read of the
// field; it is not "unsupported".
func TestP2PStatusIsEachGPUsRowOfTheMatrix(t *testing.T) {
	f, _ := newFake()
	f.SetP2P([][]int{{0, 3}, {4, 0}}, nil)
	s := newSource(t, f, group(10*time.Millisecond, fieldid.ExpP2PStatus))
	rec := &dcgmfake.Recorder{}
	require.NoError(t, s.Collect(context.Background(), 0, rec))
	assert.Empty(t, rec.UnsupportedReasons())
	got, ok := rec.P2POf("gpu/GPU-00000000-0000-0000-0000-000000000000")
	require.True(t, ok)
	assert.Equal(t, []source.P2PLink{{Peer: 1, Status: 3}}, got)
	got, ok = rec.P2POf("gpu/GPU-11111111-1111-1111-1111-111111111111")
	require.True(t, ok)
	assert.Equal(t, []source.P2PLink{{Peer: 0, Status: 4}}, got)

	f.SetP2P(nil, errors.New("DCGM_ST_GENERIC_ERROR"))
	rec = &dcgmfake.Recorder{}
	require.NoError(t, s.Collect(context.Background(), 0, rec))
	assert.Equal(t, 2, rec.Fails(), "one failed read per GPU")
}

// go-dcgm refuses a read of more values than its limit and gives no next
// position, so a source that fell behind (a long stall, a slow scrape loop)
// would fail every read from then on. The source moves its position to now
// and reads on.
func TestTooManyValuesMovesTheReadPositionOn(t *testing.T) {
	f, clk := newFake(dcgmfake.WithGen(func(_ dcgm.EntityRef, _ uint16, seq int64) (dcgm.Value, bool) {
		return dcgm.Value{Kind: dcgm.KindInt64, Int: seq}, true
	}))
	// Only the event fields are read since the last read.
	s := newSource(t, f, group(10*time.Millisecond, fieldid.ClocksEventReasons))
	rec := &dcgmfake.Recorder{}
	collectUntil(t, clk, s, 0, rec, func() bool { return len(rec.Values(fieldid.ClocksEventReasons)) > 0 })

	f.SetValueLimit(50)
	clk.Add(time.Second) // 100 samples on each of 2 GPUs
	err := s.Collect(context.Background(), 0, rec)
	require.ErrorIs(t, err, dcgm.ErrTooManyValues)
	before := len(rec.Values(fieldid.ClocksEventReasons))

	clk.Add(100 * time.Millisecond) // 10 more on each GPU: under the limit
	require.NoError(t, s.Collect(context.Background(), 0, rec), "the next read works")
	got := rec.Values(fieldid.ClocksEventReasons)[before:]
	assert.Len(t, got, 20, "the samples since the skip, and only those")
}
