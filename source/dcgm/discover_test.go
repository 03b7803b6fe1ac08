package dcgm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/dcgm/dcgmfake"
)

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
