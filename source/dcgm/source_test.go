package dcgm_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/clock"
	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/dcgm/dcgmfake"
)

// group is the group the engine would watch for these fields of a counters
// file.
func group(iv time.Duration, ids ...uint16) source.Group {
	var fields []counters.Field
	for _, id := range ids {
		fields = append(fields, counters.Field{ID: id, Name: fmt.Sprint(id), Type: counters.Gauge})
	}
	return source.GroupOf(iv, fields)
}

// epoch is where the tests' fake clocks start.
var epoch = time.Unix(1_750_000_000, 0)

// newFake returns a fake host engine sampling on a fake clock; the source
// under test gets the same clock (testConfig), so a test decides when
// samples are taken and when backoffs end by moving it.
func newFake(opts ...dcgmfake.Option) (*dcgmfake.Fake, *clock.Fake) {
	clk := clock.NewFake(epoch)
	return dcgmfake.New(append([]dcgmfake.Option{dcgmfake.WithClock(clk)}, opts...)...), clk
}

func testConfig(log logrus.FieldLogger, clk clock.Clock) dcgm.Config {
	return dcgm.Config{
		Mode: dcgm.ModeEmbedded, Window: time.Second,
		BackoffInitial: 2 * time.Millisecond, BackoffMax: 10 * time.Millisecond, Log: log, Clock: clk,
	}
}

func quietLog() (*logrus.Logger, *test.Hook) {
	l, h := test.NewNullLogger()
	l.SetLevel(logrus.DebugLevel)
	return l, h
}

func newSource(t *testing.T, f *dcgmfake.Fake, groups ...source.Group) *dcgm.Source {
	t.Helper()
	l, _ := quietLog()
	s, err := dcgm.New(f, testConfig(l, f.Clock()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Watch(groups))
	return s
}

// collectUntil collects group, moving clk 5 ms between reads, until cond
// holds. Reads that depend only on the clock finish at once; a reconnect,
// which runs on the source's own goroutine, is waited for.
func collectUntil(t *testing.T, clk *clock.Fake, s *dcgm.Source, g int, sink source.Sink, cond func() bool) {
	t.Helper()
	testwait.For(t, "the collected samples", func() bool {
		if cond() {
			return true
		}
		err := s.Collect(context.Background(), g, sink)
		if err != nil && !errors.Is(err, source.ErrEntitiesChanged) {
			t.Logf("collect: %v", err)
		}
		if cond() {
			return true
		}
		clk.Add(5 * time.Millisecond)
		return false
	})
}

func TestOneFieldGroupPerInterval(t *testing.T) {
	tests := []struct {
		name   string
		groups []source.Group
		want   map[time.Duration][]uint16
	}{
		{"one interval", []source.Group{group(20*time.Millisecond, fieldid.GPUTemp, fieldid.PowerUsage)},
			map[time.Duration][]uint16{20 * time.Millisecond: {fieldid.GPUTemp, fieldid.PowerUsage}}},
		{"two intervals", []source.Group{group(20*time.Millisecond, fieldid.PowerUsage, fieldid.GPUTemp), group(50*time.Millisecond, fieldid.GPUUtil, fieldid.MemCopyUtil)},
			map[time.Duration][]uint16{20 * time.Millisecond: {fieldid.GPUTemp, fieldid.PowerUsage}, 50 * time.Millisecond: {fieldid.GPUUtil, fieldid.MemCopyUtil}}},
		{"same interval twice shares a field group", []source.Group{group(20*time.Millisecond, fieldid.GPUTemp), group(40*time.Millisecond, fieldid.PowerUsage), group(20*time.Millisecond, fieldid.GPUUtil)},
			map[time.Duration][]uint16{20 * time.Millisecond: {fieldid.GPUTemp, fieldid.GPUUtil}, 40 * time.Millisecond: {fieldid.PowerUsage}}},
		{"xid and clock events fields imply their DCGM fields", []source.Group{group(30*time.Millisecond, fieldid.ExpXIDErrorsCount, fieldid.ExpClockEventsCount)},
			map[time.Duration][]uint16{30 * time.Millisecond: {fieldid.ClocksEventReasons, fieldid.XIDErrors}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := newFake()
			newSource(t, f, tt.groups...)
			assert.Equal(t, len(tt.want), f.FieldGroupsCreated(), "field groups created")
			got := map[time.Duration][]uint16{}
			for _, w := range f.WatchCalls() {
				got[w.UpdateFreq] = w.Fields
				assert.GreaterOrEqual(t, w.MaxKeepAge, time.Second, "keep age follows the configured window")
				assert.GreaterOrEqual(t, w.MaxKeepSamples, int(w.MaxKeepAge/w.UpdateFreq), "keep samples cover keep age")
				assert.Len(t, w.Entities, 2, "watched on both GPUs")
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestRewatchReplacesFieldGroups(t *testing.T) {
	f, _ := newFake()
	s := newSource(t, f, group(20*time.Millisecond, fieldid.GPUTemp), group(50*time.Millisecond, fieldid.PowerUsage))
	require.NoError(t, s.Watch([]source.Group{group(30*time.Millisecond, fieldid.GPUUtil)}))
	assert.Equal(t, [][]uint16{{fieldid.GPUUtil}}, f.LiveFieldGroups(), "old field groups are destroyed")
	require.NoError(t, s.Close())
	assert.Empty(t, f.LiveFieldGroups(), "Close destroys field groups")
	assert.Zero(t, f.LiveGroups(), "Close destroys entity groups")
}

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

func TestCollectHandsEverySampleSinceLastRead(t *testing.T) {
	f, clk := newFake()
	s := newSource(t, f, group(10*time.Millisecond, fieldid.GPUTemp, fieldid.PowerUsage))
	rec := &dcgmfake.Recorder{}
	// Reads both faster and slower than the interval: neither loses nor
	// repeats a sample.
	pauses := []time.Duration{0, 3 * time.Millisecond, 35 * time.Millisecond, 1 * time.Millisecond, 60 * time.Millisecond}
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

func TestProfilingSupportPerGPU(t *testing.T) {
	f, clk := newFake(dcgmfake.WithProfiling(map[uint][]uint16{0: {fieldid.ProfSMActive, fieldid.ProfPipeTensorActive}}))
	s := newSource(t, f, group(10*time.Millisecond, fieldid.GPUTemp, fieldid.ProfSMActive, fieldid.ProfPipeTensorActive))
	rec := &dcgmfake.Recorder{}
	g0, g1 := "gpu/GPU-00000000-0000-0000-0000-000000000000", "gpu/GPU-11111111-1111-1111-1111-111111111111"
	has := func(key string, field uint16) bool {
		for _, v := range rec.Values(field) {
			if v.Key == key {
				return true
			}
		}
		return false
	}
	collectUntil(t, clk, s, 0, rec, func() bool { return has(g0, fieldid.ProfSMActive) && has(g1, fieldid.GPUTemp) })
	assert.False(t, has(g1, fieldid.ProfSMActive), "GPU 1 has no profiling")
	assert.Equal(t, map[string]string{
		g1 + "/" + idStr(fieldid.ProfSMActive):         "profiling metric not supported by this GPU",
		g1 + "/" + idStr(fieldid.ProfPipeTensorActive): "profiling metric not supported by this GPU",
	}, rec.UnsupportedReasons())
	assert.Equal(t, 2, f.FieldGroupsCreated(), "the mixed node needs a second field group for the GPU without profiling")
}

func TestProfilingErrorsSayWhatToDo(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		reason   string
		logWords string
	}{
		{"module not loaded", fmt.Errorf("reading metric groups: %w", dcgm.ErrModuleNotLoaded), "DCGM profiling module not loaded", "libdcgmmoduleprofiling.so"},
		{"in use", fmt.Errorf("reading metric groups: %w", dcgm.ErrInUse), "profiling counters held by another profiler", "Nsight"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, clk := newFake(dcgmfake.WithProfiling(map[uint][]uint16{0: {fieldid.ProfSMActive}, 1: {fieldid.ProfSMActive}}))
			f.SetProfilingError(tt.err)
			l, hook := quietLog()
			s, err := dcgm.New(f, testConfig(l, clk))
			require.NoError(t, err)
			defer s.Close()
			require.NoError(t, s.Watch([]source.Group{group(10*time.Millisecond, fieldid.GPUTemp, fieldid.ProfSMActive)}))
			rec := &dcgmfake.Recorder{}
			collectUntil(t, clk, s, 0, rec, func() bool { return len(rec.Values(fieldid.GPUTemp)) >= 2 })
			assert.Empty(t, rec.Values(fieldid.ProfSMActive))
			reasons := rec.UnsupportedReasons()
			assert.Equal(t, tt.reason, reasons["gpu/GPU-00000000-0000-0000-0000-000000000000/"+idStr(fieldid.ProfSMActive)])
			var lines int
			for _, e := range hook.AllEntries() {
				if e.Level == logrus.ErrorLevel {
					lines++
					assert.Contains(t, e.Message, tt.logWords)
				}
			}
			assert.Equal(t, 2, lines, "one log line per GPU")
		})
	}
}

func TestMIGHierarchy(t *testing.T) {
	gi := dcgm.EntityRef{Group: dcgm.EntityGPUInstance, ID: 0}
	ci := dcgm.EntityRef{Group: dcgm.EntityComputeInstance, ID: 0}
	f, clk := newFake(dcgmfake.WithMIG(
		dcgm.MIGInfo{Entity: ci, Parent: gi, GPU: 1, ComputeInstanceID: 0},
		dcgm.MIGInfo{Entity: gi, Parent: dcgm.EntityRef{Group: dcgm.EntityGPU, ID: 1}, GPU: 1, InstanceID: 3, Profile: "1g.10gb"},
	))
	s := newSource(t, f, group(10*time.Millisecond, fieldid.GPUUtil))
	keys := map[string]source.Entity{}
	for _, e := range s.Entities() {
		keys[e.Key()] = *e
	}
	giKey := "gi/GPU-11111111-1111-1111-1111-111111111111/3"
	ciKey := "ci/GPU-11111111-1111-1111-1111-111111111111/3/0"
	require.Contains(t, keys, giKey)
	require.Contains(t, keys, ciKey)
	assert.Equal(t, "1g.10gb", keys[giKey].GPUInstanceProfile)
	assert.Equal(t, "1g.10gb", keys[ciKey].GPUInstanceProfile)
	assert.Equal(t, "nvidia1", keys[ciKey].Device)
	assert.Len(t, keys, 4)

	rec := &dcgmfake.Recorder{}
	collectUntil(t, clk, s, 0, rec, func() bool {
		for _, v := range rec.Values(fieldid.GPUUtil) {
			if v.Key == giKey {
				return true
			}
		}
		return false
	})
}

func TestNvSwitchEntitiesOnlyWhenAsked(t *testing.T) {
	links := []dcgm.LinkInfo{{ID: 0x103, Switch: 0, Index: 1, Up: true}, {ID: 0x203, Switch: 0, Index: 2, Up: false}}
	f, clk := newFake(dcgmfake.WithSwitches([]uint{0}, links))
	s := newSource(t, f, group(10*time.Millisecond, fieldid.GPUTemp))
	for _, e := range s.Entities() {
		assert.Equal(t, source.GPU, e.Kind, "no switch fields, no switch entities")
	}
	require.NoError(t, s.Watch([]source.Group{group(10*time.Millisecond, fieldid.GPUTemp, fieldid.NVSwitchTemperatureCurrent, fieldid.NVSwitchLinkThroughputTX)}))
	kinds := map[source.EntityKind]int{}
	for _, e := range s.Entities() {
		kinds[e.Kind]++
	}
	assert.Equal(t, map[source.EntityKind]int{source.GPU: 2, source.NvSwitch: 1, source.NVLink: 1}, kinds, "down links are left out")
	rec := &dcgmfake.Recorder{}
	collectUntil(t, clk, s, 0, rec, func() bool {
		return len(rec.Values(fieldid.NVSwitchTemperatureCurrent)) > 0 && len(rec.Values(fieldid.NVSwitchLinkThroughputTX)) > 0
	})
	for _, v := range rec.Values(fieldid.NVSwitchTemperatureCurrent) {
		assert.Equal(t, "switch/0", v.Key)
	}
	for _, v := range rec.Values(fieldid.NVSwitchLinkThroughputTX) {
		assert.Equal(t, "swlink/0/1", v.Key)
	}
	for _, v := range rec.Values(fieldid.GPUTemp) {
		assert.True(t, strings.HasPrefix(v.Key, "gpu/"), "GPU fields only on GPUs: %s", v.Key)
	}
}

// gpuLinkID encodes a GPU's link as go-dcgm's AddLinkEntityToGroup does
// (entity group FE_GPU = 1, 16-bit index, parent ID).
func gpuLinkID(gpu, index uint) uint { return 1 | index<<8 | gpu<<24 }

// dcgm-exporter watches link-level fields (PPCNT counters among them) on
// each GPU's NVLinks as FE_LINK entities with the GPU as parent
// (internal/pkg/devicewatcher/device_watcher.go, createNVLinkGroups), and
// exports only the links in state LS_UP, each with its GPU's identity
// (internal/pkg/devicemonitoring/device_monitoring.go, monitorAllGPUNvLinks;
// internal/pkg/collector/gpu_collector.go, toGPUNvLinkMetric). GPU fields
// stay on the GPUs.
func TestGPULinksCarryLinkFieldsWithTheirGPU(t *testing.T) {
	links := []dcgm.GPULinkInfo{
		{ID: gpuLinkID(0, 0), GPU: 0, Index: 0, Up: true},
		{ID: gpuLinkID(0, 1), GPU: 0, Index: 1, Up: false},
		{ID: gpuLinkID(1, 3), GPU: 1, Index: 3, Up: true},
	}
	f, clk := newFake(dcgmfake.WithGPULinks(links...))
	s := newSource(t, f, group(10*time.Millisecond, fieldid.GPUTemp))
	for _, e := range s.Entities() {
		assert.Equal(t, source.GPU, e.Kind, "no link field, no link entities")
	}
	require.NoError(t, s.Watch([]source.Group{group(10*time.Millisecond, fieldid.GPUTemp, fieldid.NVLinkPPCNTPhysicalLinkDownCounter)}))
	var got []source.Entity
	for _, e := range s.Entities() {
		if e.Kind == source.NVLink {
			got = append(got, *e)
		}
	}
	gpus := map[int]source.Entity{}
	for _, e := range s.Entities() {
		if e.Kind == source.GPU {
			gpus[e.GPU] = *e
		}
	}
	require.Equal(t, "GPU-11111111-1111-1111-1111-111111111111", gpus[1].UUID)
	want0, want1 := gpus[0], gpus[1]
	want0.Kind, want0.Link = source.NVLink, 0
	want1.Kind, want1.Link = source.NVLink, 3
	assert.Equal(t, []source.Entity{want0, want1}, got, "up links only, each with its GPU's identity and DCGM's link index")

	rec := &dcgmfake.Recorder{}
	collectUntil(t, clk, s, 0, rec, func() bool {
		keys := map[string]bool{}
		for _, v := range rec.Values(fieldid.NVLinkPPCNTPhysicalLinkDownCounter) {
			keys[v.Key] = true
		}
		return len(keys) == 2 && len(rec.Values(fieldid.GPUTemp)) > 0
	})
	for _, v := range rec.Values(fieldid.NVLinkPPCNTPhysicalLinkDownCounter) {
		assert.Contains(t, []string{"link/GPU-00000000-0000-0000-0000-000000000000/0", "link/GPU-11111111-1111-1111-1111-111111111111/3"}, v.Key)
	}
	for _, v := range rec.Values(fieldid.GPUTemp) {
		assert.True(t, strings.HasPrefix(v.Key, "gpu/"), "GPU fields only on GPUs: %s", v.Key)
	}
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

func TestConnectErrorsNameModeAndCause(t *testing.T) {
	tests := []struct {
		name  string
		cfg   dcgm.Config
		setup func(f *dcgmfake.Fake)
		want  []string
		is    error
	}{
		{"library missing", dcgm.Config{Mode: dcgm.ModeEmbedded},
			func(f *dcgmfake.Fake) { f.Refuse(dcgm.ErrLibraryMissing) }, []string{"embedded mode", "libdcgm.so.4"}, dcgm.ErrLibraryMissing},
		{"host engine not listening", dcgm.Config{RemoteHostengine: "gpu-node-3"},
			func(f *dcgmfake.Fake) { f.Kill() }, []string{"remote mode (host engine at gpu-node-3:5555)", "not listening"}, dcgm.ErrNotListening},
		{"unix socket", dcgm.Config{RemoteHostengine: "unix:///run/nvidia/he.sock"},
			func(f *dcgmfake.Fake) { f.Kill() }, []string{"host engine socket /run/nvidia/he.sock"}, dcgm.ErrNotListening},
		{"version mismatch", dcgm.Config{Mode: dcgm.ModeStart},
			func(f *dcgmfake.Fake) { f.Refuse(dcgm.ErrVersionMismatch) }, []string{"start mode", "version mismatch"}, dcgm.ErrVersionMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := newFake()
			tt.setup(f)
			l, _ := quietLog()
			tt.cfg.Log = l
			_, err := dcgm.New(f, tt.cfg)
			require.Error(t, err)
			require.ErrorIs(t, err, tt.is)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		cfg  dcgm.Config
		want string
	}{
		{dcgm.Config{Mode: "cloud"}, `mode "cloud": want one of embedded, remote, start`},
		{dcgm.Config{Mode: dcgm.ModeRemote}, "remote mode needs a host engine address"},
		{dcgm.Config{Mode: dcgm.ModeEmbedded, RemoteHostengine: "h:5555"}, `only used in remote mode, not embedded mode (address "h:5555")`},
		{dcgm.Config{RemoteHostengine: "h:1:2"}, `host engine address "h:1:2"`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			_, err := dcgm.New(dcgmfake.New(), tt.cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestDroppedConnectionReconnects(t *testing.T) {
	f, clk := newFake()
	s := newSource(t, f, group(10*time.Millisecond, fieldid.GPUTemp))
	rec := &dcgmfake.Recorder{}
	collectUntil(t, clk, s, 0, rec, func() bool { return len(rec.Values(fieldid.GPUTemp)) > 0 })
	f.Refuse(errors.New("refused for the test"))
	f.DropConnection()

	start := time.Now()
	err := s.Collect(context.Background(), 0, rec)
	require.ErrorIs(t, err, dcgm.ErrConnectionLost)
	st := s.Status()
	assert.False(t, st.Up)
	require.Error(t, st.Err)
	err = s.Collect(context.Background(), 0, rec)
	require.Error(t, err, "while down, Collect fails")
	assert.Less(t, time.Since(start), time.Second, "Collect fails fast while down")

	f.Refuse(nil)
	var changed bool
	collectUntil(t, clk, s, 0, rec, func() bool {
		err := s.Collect(context.Background(), 0, rec)
		changed = changed || errors.Is(err, source.ErrEntitiesChanged)
		return s.Status().Up && changed
	})
	assert.Equal(t, 2, f.Connects())
	n := len(rec.Values(fieldid.GPUTemp))
	collectUntil(t, clk, s, 0, rec, func() bool { return len(rec.Values(fieldid.GPUTemp)) > n })
	require.NoError(t, s.Collect(context.Background(), 0, rec), "ErrEntitiesChanged comes once")
}

func TestPauseResumeProfiling(t *testing.T) {
	f, clk := newFake(dcgmfake.WithProfiling(map[uint][]uint16{0: {fieldid.ProfSMActive}, 1: {fieldid.ProfSMActive}}))
	s := newSource(t, f, group(10*time.Millisecond, fieldid.ProfSMActive, fieldid.GPUTemp))
	rec := &dcgmfake.Recorder{}
	collectUntil(t, clk, s, 0, rec, func() bool { return len(rec.Values(fieldid.ProfSMActive)) > 0 })

	require.NoError(t, s.PauseProfiling())
	assert.True(t, f.Paused())
	assert.True(t, s.Status().ProfilingPaused)
	require.NoError(t, s.Collect(context.Background(), 0, rec)) // drains samples taken before the pause
	n, temps := len(rec.Values(fieldid.ProfSMActive)), len(rec.Values(fieldid.GPUTemp))
	clk.Add(30 * time.Millisecond)
	require.NoError(t, s.Collect(context.Background(), 0, rec))
	assert.Equal(t, temps+2*3, len(rec.Values(fieldid.GPUTemp)), "three intervals passed: three samples of the other field on each GPU")
	assert.Equal(t, n, len(rec.Values(fieldid.ProfSMActive)), "no profiling values while paused")

	// A host engine restart forgets the pause; the reconnect takes it again.
	f.Kill()
	require.Error(t, s.Collect(context.Background(), 0, rec))
	f.Restart()
	collectUntil(t, clk, s, 0, rec, func() bool { return s.Status().Up })
	assert.True(t, f.Paused(), "pause re-applied after reconnect")

	require.NoError(t, s.ResumeProfiling())
	assert.False(t, s.Status().ProfilingPaused)
	collectUntil(t, clk, s, 0, rec, func() bool { return len(rec.Values(fieldid.ProfSMActive)) > n })
}

func TestPauseWithoutProfilingModule(t *testing.T) {
	f, _ := newFake()
	f.SetPauseError(fmt.Errorf("dcgmProfPause: %w", dcgm.ErrModuleNotLoaded))
	s := newSource(t, f, group(10*time.Millisecond, fieldid.GPUTemp))
	err := s.PauseProfiling()
	require.ErrorIs(t, err, dcgm.ErrModuleNotLoaded)
	assert.Contains(t, err.Error(), "no profiling lock to release")
	assert.False(t, s.Status().ProfilingPaused)
}

// TestHostEngineRestartLoop kills and restarts the host engine 20 times while
// the source is read as the engine reads it: every kill is noticed, every
// restart is survived, and the series return within two intervals of the
// reconnect, counted on the clock the source runs on.
func TestHostEngineRestartLoop(t *testing.T) {
	const interval = 50 * time.Millisecond
	before := runtime.NumGoroutine()
	f, clk := newFake()
	l, _ := quietLog()
	s, err := dcgm.New(f, testConfig(l, clk))
	require.NoError(t, err)
	require.NoError(t, s.Watch([]source.Group{group(interval, fieldid.GPUTemp)}))

	rec := &dcgmfake.Recorder{}
	ctx := context.Background()
	latest := func() int64 {
		v := rec.Values(fieldid.GPUTemp)
		if len(v) == 0 {
			return 0
		}
		return v[len(v)-1].TS
	}
	// Backoff is capped at 10ms (+20% jitter) in testConfig; a restart may
	// wait that long before the reconnect. The engine reads each interval;
	// reading every fifth of one only makes the measurement finer.
	const step = interval / 5
	const budget = 2*interval + 12*time.Millisecond + step
	for i := range 20 {
		f.Kill()
		require.ErrorIs(t, s.Collect(ctx, 0, rec), dcgm.ErrConnectionLost, "restart %d: the kill is noticed", i)
		require.False(t, s.Status().Up)
		restarted := clk.Now()
		f.Restart()
		var waited time.Duration
		testwait.For(t, "series to return", func() bool {
			if err := s.Collect(ctx, 0, rec); errors.Is(err, source.ErrEntitiesChanged) {
				assert.Len(t, s.Entities(), 2)
			}
			if latest() >= restarted.UnixNano() {
				return true
			}
			// Time moves only while the source waits on it: on its
			// backoff timer, or for the host engine's next sample.
			if s.Status().Up || clk.Timers() > 0 {
				clk.Add(step)
				waited += step
			}
			return false
		})
		assert.LessOrEqual(t, waited, budget, "restart %d: series back within two intervals", i)
	}
	assert.Equal(t, 21, f.Connects())
	require.NoError(t, s.Close())
	assert.True(t, testwait.Until(5*time.Second, func() bool { return runtime.NumGoroutine() <= before }), "no goroutine leaked")
}

// idStr is a field ID as the recorder's keys spell it.
func idStr(id uint16) string { return strconv.Itoa(int(id)) }

// DCGM refuses a field group of more than 128 fields
// (DCGM_MAX_FIELD_IDS_PER_FIELD_GROUP); a counters file with more fields at
// one interval is watched through several field groups, and every field is
// read.
func TestMoreFieldsThanOneFieldGroupHolds(t *testing.T) {
	var ids []uint16
	for _, e := range fieldid.Current() {
		if len(ids) == dcgm.MaxFieldsPerGroup+5 {
			break
		}
		if f := fieldid.Of(e.ID); f.Level == fieldid.LevelGPU && !f.Profiling && !slices.Contains(ids, e.ID) {
			ids = append(ids, e.ID)
		}
	}
	require.Len(t, ids, dcgm.MaxFieldsPerGroup+5)
	f, clk := newFake(dcgmfake.WithGen(func(_ dcgm.EntityRef, _ uint16, seq int64) (dcgm.Value, bool) {
		return dcgm.Value{Kind: dcgm.KindInt64, Int: seq}, true
	}))
	s := newSource(t, f, group(10*time.Millisecond, ids...))
	rec := &dcgmfake.Recorder{}
	collectUntil(t, clk, s, 0, rec, func() bool {
		for _, id := range ids {
			if len(rec.Values(id)) == 0 {
				return false
			}
		}
		return true
	})
}

// go-dcgm refuses a read of more values than its limit and gives no next
// position, so a source that fell behind (a long stall, a slow scrape loop)
// would fail every read from then on. The source moves its position to now
// and reads on.
func TestTooManyValuesMovesTheReadPositionOn(t *testing.T) {
	f, clk := newFake(dcgmfake.WithGen(func(_ dcgm.EntityRef, _ uint16, seq int64) (dcgm.Value, bool) {
		return dcgm.Value{Kind: dcgm.KindInt64, Int: seq}, true
	}))
	s := newSource(t, f, group(10*time.Millisecond, fieldid.GPUTemp))
	rec := &dcgmfake.Recorder{}
	collectUntil(t, clk, s, 0, rec, func() bool { return len(rec.Values(fieldid.GPUTemp)) > 0 })

	f.SetValueLimit(50)
	clk.Add(time.Second) // 100 samples on each of 2 GPUs
	err := s.Collect(context.Background(), 0, rec)
	require.ErrorIs(t, err, dcgm.ErrTooManyValues)
	before := len(rec.Values(fieldid.GPUTemp))

	clk.Add(100 * time.Millisecond) // 10 more on each GPU: under the limit
	require.NoError(t, s.Collect(context.Background(), 0, rec), "the next read works")
	got := rec.Values(fieldid.GPUTemp)[before:]
	assert.Len(t, got, 20, "the samples since the skip, and only those")
}

// CPU fields (DCGM_FI_DEV_CPU_*, 11xx) are CPU or CPU-core fields in DCGM's
// field table: they are read on the CPUs and cores of the CPU hierarchy, as
// dcgm-exporter watches them (-p), and never on GPUs. CPU entities exist only
// while a CPU field is watched.
func TestCPUFieldsAreReadOnCPUs(t *testing.T) {
	f, clk := newFake(dcgmfake.WithCPUs(dcgm.CPUInfo{ID: 0, Cores: []uint{0, 1}}, dcgm.CPUInfo{ID: 1, Cores: []uint{72}}))
	s := newSource(t, f, group(10*time.Millisecond, fieldid.GPUTemp))
	for _, e := range s.Entities() {
		assert.Equal(t, source.GPU, e.Kind, "no CPU fields, no CPU entities")
	}
	require.NoError(t, s.Watch([]source.Group{group(10*time.Millisecond, fieldid.GPUTemp, fieldid.CPUPowerUtilCurrent, fieldid.CPUClockCurrent)}))
	kinds := map[source.EntityKind]int{}
	for _, e := range s.Entities() {
		kinds[e.Kind]++
	}
	assert.Equal(t, map[source.EntityKind]int{source.GPU: 2, source.CPU: 2, source.CPUCore: 3}, kinds)
	rec := &dcgmfake.Recorder{}
	collectUntil(t, clk, s, 0, rec, func() bool {
		return len(rec.Values(fieldid.CPUPowerUtilCurrent)) > 0 && len(rec.Values(fieldid.CPUClockCurrent)) > 0
	})
	for _, v := range rec.Values(fieldid.CPUPowerUtilCurrent) {
		assert.True(t, strings.HasPrefix(v.Key, "cpu/"), "CPU field on %s", v.Key)
	}
	for _, v := range rec.Values(fieldid.CPUClockCurrent) {
		assert.True(t, strings.HasPrefix(v.Key, "cpucore/"), "core field on %s", v.Key)
	}
	for _, v := range rec.Values(fieldid.GPUTemp) {
		assert.True(t, strings.HasPrefix(v.Key, "gpu/"), "GPU field on %s", v.Key)
	}
}
