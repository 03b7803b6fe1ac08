package nvml

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	timesource "github.com/gpuscope/gpuscope/internal/clock"
	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/nvml/nvmlfake"
)

func TestNewWithoutDriverSaysWhatToDo(t *testing.T) {
	// This machine has no driver: the real library's Init answers
	// LIBRARY_NOT_FOUND, the one call that is safe without it.
	s, err := New(Config{Logger: quietLogger()})
	if err == nil {
		_ = s.Close()
		t.Skip("an NVIDIA driver is installed here; the missing-driver path cannot be exercised")
	}
	require.ErrorIs(t, err, ErrNoDriver)
	for _, hint := range []string{"libnvidia-ml.so.1", "runtime class", "--gpus all", "LD_LIBRARY_PATH"} {
		assert.Contains(t, err.Error(), hint)
	}
}

func TestSupportFollowsFieldMap(t *testing.T) {
	sup := Support()
	for id := range fieldMap {
		ok, note := sup.Reads(id)
		assert.True(t, ok, "field %d is mapped, so the catalog must say NVML reads it", id)
		assert.Empty(t, note, "field %d", id)
		assert.NotContains(t, unreadNotes, id, "field %d is mapped and also said to be unread", id)
	}
	for id, want := range unreadNotes {
		ok, note := sup.Reads(id)
		assert.False(t, ok, "field %d", id)
		assert.Equal(t, want, note, "field %d", id)
		assert.Equal(t, want, unsupportedReason(id), "the source reports the same reason")
	}
	ok, note := sup.Reads(fieldid.NVSwitchTemperatureCurrent)
	assert.False(t, ok)
	assert.Empty(t, note)
}

// collectTwice collects the group twice, as GPM needs two samples.
func collectTwice(t *testing.T, s *Source, sink *recordingSink) {
	t.Helper()
	for i := 0; i < 2; i++ {
		require.NoError(t, s.Collect(context.Background(), 0, sink))
	}
}

func TestEveryMappedFieldAndItsUnit(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	licensed := true
	f.Update(0, func(g *nvmlfake.GPU) { g.R.VGPULicensed = &licensed })
	const mibF = 1 << 20
	want := []struct {
		name  string
		id    uint16
		value float64
	}{
		{"SM clock MHz", fieldid.SMClock, 1980}, {"memory clock MHz", fieldid.MemClock, 2619}, {"video clock MHz", fieldid.VideoClock, 1755},
		{"app SM clock MHz", fieldid.AppSMClock, 1755}, {"max SM clock MHz", fieldid.MaxSMClock, 1980},
		{"clock event reasons bitmask", fieldid.ClocksEventReasons, 1},
		{"memory temp C (field values)", fieldid.MemoryTemp, 50}, {"GPU temp C", fieldid.GPUTemp, 40},
		{"slowdown temp C", fieldid.SlowdownTemp, 87}, {"shutdown temp C", fieldid.ShutdownTemp, 92},
		{"power W from mW", fieldid.PowerUsage, 312.5}, {"power limit W", fieldid.PowerMgmtLimit, 700}, {"enforced limit W", fieldid.EnforcedPowerLimit, 700},
		{"energy mJ", fieldid.TotalEnergyConsumption, 123456789},
		{"PCIe TX KB/s", fieldid.PCIeTXThroughput, 2048}, {"PCIe RX KB/s", fieldid.PCIeRXThroughput, 4096}, {"PCIe replays", fieldid.PCIeReplayCounter, 3},
		{"GPU util %", fieldid.GPUUtil, 87}, {"memory copy util %", fieldid.MemCopyUtil, 42}, {"encoder util %", fieldid.EncUtil, 0}, {"decoder util %", fieldid.DecUtil, 5},
		{"power violation ns", fieldid.PowerViolation, 1000}, {"thermal violation ns", fieldid.ThermalViolation, 2000},
		{"sync boost violation ns", fieldid.SyncBoostViolation, 3000}, {"board limit violation ns", fieldid.BoardLimitViolation, 4000},
		{"low util violation ns", fieldid.LowUtilViolation, 5000}, {"reliability violation ns", fieldid.ReliabilityViolation, 6000},
		{"FB total MiB", fieldid.FBTotal, 81920}, {"FB free MiB", fieldid.FBFree, 81920 - 512 - 10240}, {"FB used MiB", fieldid.FBUsed, 10240}, {"FB reserved MiB", fieldid.FBReserved, 512},
		{"ECC SBE volatile", fieldid.ECCSBEVolTotal, 1}, {"ECC DBE volatile", fieldid.ECCDBEVolTotal, 2},
		{"ECC SBE aggregate", fieldid.ECCSBEAggTotal, 11}, {"ECC DBE aggregate", fieldid.ECCDBEAggTotal, 22},
		{"retired SBE pages", fieldid.RetiredSBE, 1}, {"retired DBE pages", fieldid.RetiredDBE, 2}, {"retired pending", fieldid.RetiredPending, 0},
		{"uncorrectable remapped rows", fieldid.UncorrectableRemappedRows, 1}, {"correctable remapped rows", fieldid.CorrectableRemappedRows, 4},
		{"row remap failure", fieldid.RowRemapFailure, 0}, {"row remap pending", fieldid.RowRemapPending, 1},
		{"NVLink CRC flit errors", fieldid.NVLinkCRCFlitErrorCountTotal, 7}, {"NVLink CRC data errors", fieldid.NVLinkCRCDataErrorCountTotal, 8},
		{"NVLink replay errors", fieldid.NVLinkReplayErrorCountTotal, 9}, {"NVLink recovery errors", fieldid.NVLinkRecoveryErrorCountTotal, 10},
		{"NVLink bandwidth MB/s: counters that did not move", fieldid.NVLinkBandwidthTotal, 0},
		{"vGPU license", fieldid.VGPULicenseStatus, 1},
		{"GR engine ratio from %", fieldid.ProfGREngineActive, 0.9}, {"SM active ratio", fieldid.ProfSMActive, 0.8},
		{"SM occupancy ratio", fieldid.ProfSMOccupancy, 0.5}, {"tensor active ratio", fieldid.ProfPipeTensorActive, 0.4},
		{"DRAM active ratio", fieldid.ProfDRAMActive, 0.3}, {"FP64 ratio", fieldid.ProfPipeFP64Active, 0.01},
		{"FP32 ratio", fieldid.ProfPipeFP32Active, 0.2}, {"FP16 ratio", fieldid.ProfPipeFP16Active, 0.1},
		{"PCIe TX bytes/s from MiB/s", fieldid.ProfPCIeTXBytes, 100 * mibF}, {"PCIe RX bytes/s", fieldid.ProfPCIeRXBytes, 200 * mibF},
		{"NVLink TX bytes/s", fieldid.ProfNVLinkTXBytes, 1000 * mibF}, {"NVLink RX bytes/s", fieldid.ProfNVLinkRXBytes, 2000 * mibF},
		{"max memory clock MHz", fieldid.MaxMemClock, 2619}, {"max video clock MHz", fieldid.MaxVideoClock, 1965},
		{"P-state", fieldid.Pstate, 0}, {"fan %", fieldid.FanSpeed, 30}, {"compute mode", fieldid.ComputeMode, 0},
		{"persistence mode", fieldid.PersistenceMode, 1}, {"MIG mode", fieldid.MIGMode, 0},
		{"default power limit W", fieldid.PowerMgmtLimitDef, 700}, {"recovery action", fieldid.GetGPURecoveryAction, 0},
		{"fabric manager status: completed", fieldid.FabricManagerStatus, 3},
		{"lowest power limit W", fieldid.PowerMgmtLimitMin, 200}, {"highest power limit W", fieldid.PowerMgmtLimitMax, 700},
		{"instant power W from mW", fieldid.PowerUsageInstant, 325.125},
	}
	wantText := map[uint16]string{
		fieldid.DriverVersion: "550.54.15", fieldid.NVMLVersion: "12.550.54.15", fieldid.Name: "NVIDIA H100 80GB HBM3", fieldid.Brand: "NVIDIA",
		fieldid.Serial: "1652323000000", fieldid.UUID: f.GPUs[0].UUID, fieldid.PCIBusID: nvmlfake.BusID(0), fieldid.VBIOSVersion: "96.00.74.00.01",
		// DCGM's encodings: CUDA 12.4 as 12040, compute capability 9.0 as 9<<16.
		fieldid.CUDADriverVersion: "12040", fieldid.CUDAComputeCapability: "589824",
	}
	var ids []uint16
	for _, w := range want {
		ids = append(ids, w.id)
	}
	for id := range wantText {
		ids = append(ids, id)
	}
	s := open(t, f, time.Second, ids...)
	sink := newSink()
	collectTwice(t, s, sink)
	gpu0 := gpuEntity(t, s, 0)
	assert.Equal(t, nvmlfake.BusID(0), gpu0.PCIBusID)
	assert.Equal(t, "nvidia0", gpu0.Device)
	for _, w := range want {
		t.Run(w.name, func(t *testing.T) {
			v, ok := sink.value(gpu0, w.id)
			require.True(t, ok, "no sample of field %d; unsupported: %v, fails: %v", w.id,
				sink.unsupported[sample{gpu0.Key(), w.id}], sink.fails[sample{gpu0.Key(), w.id}])
			assert.InDelta(t, w.value, v, 1e-9)
		})
	}
	for id, txt := range wantText {
		assert.Equal(t, txt, sink.texts[sample{gpu0.Key(), id}], "text field %d", id)
	}
	assert.Empty(t, sink.fails)
	// GPU 1 is no vGPU guest: 0, as DCGM reports on bare metal.
	gpu1 := gpuEntity(t, s, 1)
	v, ok := sink.value(gpu1, fieldid.VGPULicenseStatus)
	require.True(t, ok)
	assert.Equal(t, 0.0, v)
}

// What DCGM reports, read through NVML: FB fields in whole MiB (DCGM
// shifts the bytes right by 20), and no memory temperature above 200 C,
// which DCGM blanks.
func TestFBInWholeMiBAndImplausibleMemoryTempLeftOut(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	f.Update(0, func(g *nvmlfake.GPU) {
		g.R.Memory.Used = 10*1024*1024 + 700*1024 // 10 MiB and 700 KiB
		g.R.MemoryTemp = 255
	})
	s := open(t, f, time.Second, fieldid.FBUsed, fieldid.MemoryTemp)
	sink := newSink()
	collectTwice(t, s, sink)
	v, ok := sink.value(gpuEntity(t, s, 0), fieldid.FBUsed)
	require.True(t, ok)
	assert.Equal(t, 10.0, v)
	_, ok = sink.value(gpuEntity(t, s, 0), fieldid.MemoryTemp)
	assert.False(t, ok, "255 C is a missing sensor, not a temperature")
	assert.Empty(t, sink.fails[sample{gpuEntity(t, s, 0).Key(), fieldid.MemoryTemp}])
	v, ok = sink.value(gpuEntity(t, s, 1), fieldid.MemoryTemp)
	require.True(t, ok)
	assert.Equal(t, 51.0, v)
}

func TestGPMAbsentOnAmpereAndPresentOnHopper(t *testing.T) {
	for _, tc := range []struct {
		name  string
		model nvmlfake.Model
		gpm   bool
	}{{"DGX H100", nvmlfake.DGXH100, true}, {"DGX A100", nvmlfake.DGXA100, false}} {
		t.Run(tc.name, func(t *testing.T) {
			f := nvmlfake.New(tc.model)
			s := open(t, f, time.Second, fieldid.ProfSMActive, fieldid.ProfDRAMActive, fieldid.GPUTemp)
			sink := newSink()
			collectTwice(t, s, sink)
			for i := range f.GPUs {
				e := gpuEntity(t, s, i)
				_, ok := sink.value(e, fieldid.GPUTemp)
				assert.True(t, ok, "GPU %d temperature", i)
				for _, id := range []uint16{fieldid.ProfSMActive, fieldid.ProfDRAMActive} {
					_, ok := sink.value(e, id)
					assert.Equal(t, tc.gpm, ok, "GPU %d field %d: fails %v", i, id, sink.fails[sample{e.Key(), id}])
					if !tc.gpm {
						assert.Equal(t, []string{reasonPreHopper}, sink.unsupported[sample{e.Key(), id}])
					}
				}
			}
			if tc.gpm {
				assert.Equal(t, 2*len(f.GPUs), f.LiveSamples(), "two GPM samples per GPU")
			} else {
				assert.Zero(t, f.LiveSamples())
			}
			require.NoError(t, s.Close())
			assert.Zero(t, f.LiveSamples(), "every GPM sample freed at close")
		})
	}
}

func TestMIGInstancesAreEntities(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	created := f.EnableMIG(0, gonvml.GPU_INSTANCE_PROFILE_1_SLICE, gonvml.GPU_INSTANCE_PROFILE_3_SLICE)
	s := open(t, f, time.Second, fieldid.FBUsed, fieldid.FBTotal, fieldid.GPUTemp, fieldid.ProfSMActive, fieldid.ProfGREngineActive)

	var gis []*source.Entity
	for _, e := range s.Entities() {
		if e.Kind == source.GPUInstance {
			gis = append(gis, e)
		}
	}
	require.Len(t, gis, 2)
	assert.Equal(t, "1g.10gb", gis[0].GPUInstanceProfile)
	assert.Equal(t, "3g.40gb", gis[1].GPUInstanceProfile)
	for i, e := range gis {
		assert.Equal(t, int(created[i].GI.Info.Id), e.GPUInstanceID)
		assert.Equal(t, created[i].UUID, e.MIGUUID)
		assert.Equal(t, f.GPUs[0].UUID, e.UUID, "MIG instances carry the parent's UUID")
		assert.Equal(t, 0, e.GPU)
	}

	sink := newSink()
	collectTwice(t, s, sink)
	used, ok := sink.value(gis[0], fieldid.FBUsed)
	require.True(t, ok)
	assert.Equal(t, 1024.0, used)
	total, _ := sink.value(gis[1], fieldid.FBTotal)
	assert.Equal(t, 40960.0, total)
	sm, ok := sink.value(gis[0], fieldid.ProfSMActive)
	require.True(t, ok, "per-instance GPM")
	assert.InDelta(t, 0.25, sm, 1e-9)
	_, ok = sink.value(gis[0], fieldid.ProfGREngineActive)
	assert.False(t, ok, "a metric the instance lacks is absent, not 0")
	_, ok = sink.value(gis[0], fieldid.GPUTemp)
	assert.False(t, ok, "device-level fields stay on the parent")
	parentTemp, ok := sink.value(gpuEntity(t, s, 0), fieldid.GPUTemp)
	assert.True(t, ok)
	assert.Equal(t, 40.0, parentTemp)
}

func TestXIDEventsCountRepeats(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	s := open(t, f, time.Second, fieldid.XIDErrors, fieldid.ExpXIDErrorsCount)
	for _, xid := range []uint64{79, 79, 48} {
		f.PushXID(2, xid)
	}
	sink := newSink()
	require.Eventually(t, func() bool {
		require.NoError(t, s.Collect(context.Background(), 0, sink))
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return len(sink.xids) == 3
	}, 5*time.Second, 20*time.Millisecond)
	key2 := gpuEntity(t, s, 2).Key()
	assert.Equal(t, []xidRecord{{key2, 79}, {key2, 79}, {key2, 48}}, sink.xids)
	last, _ := sink.value(gpuEntity(t, s, 2), fieldid.XIDErrors)
	assert.Equal(t, 48.0, last)
	other, ok := sink.value(gpuEntity(t, s, 0), fieldid.XIDErrors)
	assert.True(t, ok)
	assert.Zero(t, other)
	assert.Empty(t, sink.unsupported, "the derived XID count is the engine's, not unsupported")
}

func TestNotSupportedIsReportedOncePerWatch(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	f.Update(1, func(g *nvmlfake.GPU) { g.Errs["GetPowerUsage"] = gonvml.ERROR_NOT_SUPPORTED })
	s := open(t, f, time.Second, fieldid.PowerUsage, fieldid.GPUTemp)
	sink := newSink()
	for i := 0; i < 3; i++ {
		require.NoError(t, s.Collect(context.Background(), 0, sink))
	}
	gpu1 := gpuEntity(t, s, 1)
	assert.Len(t, sink.unsupported[sample{gpu1.Key(), fieldid.PowerUsage}], 1)
	assert.Contains(t, sink.unsupported[sample{gpu1.Key(), fieldid.PowerUsage}][0], "GetPowerUsage")
	_, ok := sink.value(gpu1, fieldid.PowerUsage)
	assert.False(t, ok, "no zero for an unsupported field")
	assert.Len(t, f.GPUs[1].GetPowerUsageCalls(), 1, "an unsupported field is not read again")
	_, ok = sink.value(gpuEntity(t, s, 0), fieldid.PowerUsage)
	assert.True(t, ok)
	assert.Empty(t, sink.fails)

	require.NoError(t, s.Watch([]source.Group{{Interval: time.Second, Fields: fields(fieldid.PowerUsage)}}))
	require.NoError(t, s.Collect(context.Background(), 0, sink))
	assert.Len(t, sink.unsupported[sample{gpu1.Key(), fieldid.PowerUsage}], 2, "reported again after a new Watch")
}

func TestUnmappedFieldIsUnsupportedWithReason(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXA100)
	s := open(t, f, time.Second, fieldid.ExpGPUHealthStatus)
	sink := newSink()
	require.NoError(t, s.Collect(context.Background(), 0, sink))
	assert.Equal(t, []string{"DCGM-only health aggregate"},
		sink.unsupported[sample{gpuEntity(t, s, 0).Key(), fieldid.ExpGPUHealthStatus}])
}

// dcgm-exporter writes DCGM_EXP_P2P_STATUS from DCGM's NVLink P2P matrix
// (internal/pkg/collector/p2p_status_collector.go): each GPU's status
// towards every other GPU. NVML answers the same question per pair with
// nvmlDeviceGetP2PStatus(NVLINK), whose codes are DCGM's.
func TestP2PStatusTowardsEveryOtherGPU(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	f.Update(2, func(g *nvmlfake.GPU) {
		g.R.P2P = map[int]gonvml.GpuP2PStatus{5: gonvml.P2P_STATUS_DISABLED_BY_REGKEY}
	})
	s := open(t, f, time.Second, fieldid.ExpP2PStatus)
	sink := newSink()
	require.NoError(t, s.Collect(context.Background(), 0, sink))
	assert.Empty(t, sink.unsupported)
	for i := range f.GPUs {
		var want []source.P2PLink
		for peer := range f.GPUs {
			switch {
			case peer == i:
			case i == 2 && peer == 5:
				want = append(want, source.P2PLink{Peer: peer, Status: 4})
			default:
				want = append(want, source.P2PLink{Peer: peer, Status: 0})
			}
		}
		assert.Equal(t, want, sink.p2p[gpuEntity(t, s, i).Key()], "GPU %d", i)
	}
}

func TestLostGPUIsSkippedAndRecovers(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	s := open(t, f, time.Second, fieldid.GPUTemp, fieldid.PowerUsage, fieldid.ProfSMActive)
	f.Update(3, func(g *nvmlfake.GPU) { g.Lost = true })
	sink := newSink()
	collectTwice(t, s, sink)
	lostKey := gpuEntity(t, s, 3).Key()
	assert.Equal(t, []string{lostKey}, s.Status().Lost)
	for i := range f.GPUs {
		_, ok := sink.value(gpuEntity(t, s, i), fieldid.GPUTemp)
		assert.Equal(t, i != 3, ok, "GPU %d", i)
	}
	assert.Empty(t, sink.fails, "a lost GPU is reported by Status, not by a failure per field")

	f.Update(3, func(g *nvmlfake.GPU) { g.Lost = false })
	require.Eventually(t, func() bool {
		require.NoError(t, s.Collect(context.Background(), 0, sink))
		_, ok := sink.value(gpuEntity(t, s, 3), fieldid.GPUTemp)
		return ok && len(s.Status().Lost) == 0
	}, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, 2*len(f.GPUs), f.LiveSamples(), "the lost GPU's GPM samples were freed, not leaked")
}

func TestLostGPURetryBacksOff(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	clk := timesource.NewFake(time.Unix(1_750_000_000, 0))
	s, err := New(Config{Lib: f, Logger: quietLogger(), RetryBackoff: 200 * time.Millisecond, EventWait: 20 * time.Millisecond, Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Watch([]source.Group{{Interval: time.Second, Fields: fields(fieldid.GPUTemp)}}))
	f.Update(6, func(g *nvmlfake.GPU) { g.Lost = true })
	sink := newSink()
	for i := 0; i < 5; i++ {
		require.NoError(t, s.Collect(context.Background(), 0, sink))
	}
	assert.Empty(t, f.DeviceGetHandleByUUIDCalls(), "no retry before the backoff elapsed")
	clk.Add(199 * time.Millisecond)
	require.NoError(t, s.Collect(context.Background(), 0, sink))
	assert.Empty(t, f.DeviceGetHandleByUUIDCalls(), "no retry a millisecond before the backoff ends")
	clk.Add(time.Millisecond)
	require.NoError(t, s.Collect(context.Background(), 0, sink))
	assert.Len(t, f.DeviceGetHandleByUUIDCalls(), 1, "one retry when the backoff ends")
	clk.Add(399 * time.Millisecond)
	require.NoError(t, s.Collect(context.Background(), 0, sink))
	assert.Len(t, f.DeviceGetHandleByUUIDCalls(), 1, "the failed retry doubled the backoff")
	clk.Add(time.Millisecond)
	require.NoError(t, s.Collect(context.Background(), 0, sink))
	assert.Len(t, f.DeviceGetHandleByUUIDCalls(), 2)
}

// TestSlowGPUDoesNotStallOthers holds one GPU's reads until the end: a
// collection that waited on it would never return.
func TestSlowGPUDoesNotStallOthers(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	// The interval bounds the first collection, which waits it out for the
	// held GPU: generous, so that the other GPUs answer in time however
	// loaded the machine.
	s := open(t, f, 2*time.Second, fieldid.GPUTemp)
	hold := make(chan struct{})
	f.Update(5, func(g *nvmlfake.GPU) { g.Hold = hold })
	released := false
	release := func() {
		if !released {
			released = true
			close(hold)
		}
	}
	t.Cleanup(release)
	sink := newSink()
	for round := 0; round < 2; round++ {
		done := make(chan error, 1)
		go func() { done <- s.Collect(context.Background(), 0, sink) }()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(testwait.Timeout):
			t.Fatalf("round %d waited on the held GPU", round)
		}
	}
	for i := range f.GPUs {
		_, ok := sink.value(gpuEntity(t, s, i), fieldid.GPUTemp)
		assert.Equal(t, i != 5, ok, "GPU %d", i)
	}
	slowFails := sink.fails[sample{gpuEntity(t, s, 5).Key(), fieldid.GPUTemp}]
	require.Len(t, slowFails, 2, "timed out once, then skipped while still running")
	for _, err := range slowFails {
		assert.True(t, errors.Is(err, ErrReadTimeout), err)
	}
	assert.ErrorContains(t, slowFails[0], "after 1.5s", "three quarters of the interval")
	assert.ErrorContains(t, slowFails[1], "since an earlier collection")

	f.Update(5, func(g *nvmlfake.GPU) { g.Hold = nil })
	release()
	testwait.For(t, "the released GPU to be read again", func() bool {
		require.NoError(t, s.Collect(context.Background(), 0, sink))
		_, ok := sink.value(gpuEntity(t, s, 5), fieldid.GPUTemp)
		return ok
	})
}

func TestProcessesFromSnapshot(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	f.Update(0, func(g *nvmlfake.GPU) {
		g.R.Processes = []gonvml.ProcessInfo{
			{Pid: 100, UsedGpuMemory: 2 << 30, GpuInstanceId: 0xFFFFFFFF},
			{Pid: 200, UsedGpuMemory: 1 << 30, GpuInstanceId: 0xFFFFFFFF},
		}
		g.R.ProcUtil = []gonvml.ProcessUtilizationSample{{Pid: 100, TimeStamp: 10, SmUtil: 30}, {Pid: 100, TimeStamp: 20, SmUtil: 70}}
	})
	f.SetProcessName(100, "/usr/bin/python3")
	f.SetProcessName(200, "python")
	s := open(t, f, time.Second, fieldid.GPUTemp)
	require.Empty(t, s.Processes(), "nothing before the first collection")
	require.NoError(t, s.Collect(context.Background(), 0, newSink()))
	// The list is refreshed beside the reads: the snapshot follows.
	testwait.For(t, "the process snapshot", func() bool { return len(s.Processes()) == 2 })
	got := s.Processes()
	require.Len(t, got, 2)
	assert.Equal(t, source.Process{PID: 100, UUID: f.GPUs[0].UUID, GPUInstanceID: -1, UsedMemoryBytes: 2 << 30, SMUtil: 70, Name: "/usr/bin/python3"}, got[0])
	assert.Equal(t, source.Process{PID: 200, UUID: f.GPUs[0].UUID, GPUInstanceID: -1, UsedMemoryBytes: 1 << 30, SMUtil: -1, Name: "python"}, got[1])
}

func TestCollectRejectsUnknownGroup(t *testing.T) {
	s := open(t, nvmlfake.New(nvmlfake.DGXA100), time.Second, fieldid.GPUTemp)
	err := s.Collect(context.Background(), 3, newSink())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "group 3")
}

// dcgm-exporter names the device label "nvidia" + the GPU index
// (internal/pkg/collector/gpu_collector.go, toMetric), not after the device
// node's minor number, which can differ.
func TestDeviceLabelFollowsTheIndexNotTheMinorNumber(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	f.GPUs[1].Device.Minor = 7
	s := open(t, f, time.Second, fieldid.GPUTemp)
	assert.Equal(t, "nvidia1", gpuEntity(t, s, 1).Device)
}

// DCGM computes DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL (field 449) from NVML's
// data counters of all links, scope 0xFFFFFFFF, TX plus RX, their increase
// in KiB per second divided by 1000 and truncated (DCGM commit 72fa3fe,
// dcgmlib/src/DcgmCacheManager.cpp, ReadAndCacheNvLinkBandwidth). The NVML
// source does the same, so that the series keeps its level when `auto`
// switches source; the raw counters, which include the protocol overhead,
// are not used. The first reading only sets the baseline.
func TestNVLinkBandwidthTotalIsDCGMsRateOfTheDataCounters(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	clk := timesource.NewFake(time.Unix(1_700_000_000, 0))
	s, err := New(Config{Lib: f, Logger: quietLogger(), RetryBackoff: 20 * time.Millisecond,
		ProcessInterval: time.Millisecond, EventWait: 20 * time.Millisecond, Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Watch([]source.Group{{Interval: time.Second, Fields: fields(fieldid.NVLinkBandwidthTotal)}}))
	sink := newSink()
	require.NoError(t, s.Collect(context.Background(), 0, sink))
	_, ok := sink.value(gpuEntity(t, s, 0), fieldid.NVLinkBandwidthTotal)
	assert.False(t, ok, "the first reading only sets the baseline")
	assert.Empty(t, sink.fails[sample{gpuEntity(t, s, 0).Key(), fieldid.NVLinkBandwidthTotal}], "and is no failure")

	// 2 s later the links carried 1 000 000 KiB of data out and 501 001 KiB
	// in, over two links; the raw counters moved more, by the overhead.
	f.Update(0, func(g *nvmlfake.GPU) {
		g.R.NVLinkDataKiB = [][2]uint64{{90 + 600_000, 180 + 300_000}, {270 + 400_000, 360 + 201_001}}
		g.R.NVLinkRawKiB = [][2]uint64{{100 + 660_000, 200 + 330_000}, {300 + 440_000, 400 + 221_100}}
	})
	clk.Add(2 * time.Second)
	require.NoError(t, s.Collect(context.Background(), 0, sink))
	v, ok := sink.value(gpuEntity(t, s, 0), fieldid.NVLinkBandwidthTotal)
	require.True(t, ok)
	assert.Equal(t, 750.0, v, "1 501 001 KiB over 2 s, /1000, truncated")
}

// DCGM keeps GPM state per watch: a field read every second is measured
// between that watch's own samples, not against the sample a 100 ms group
// took a moment before. So the second group's first reading only sets its
// baseline. A metric GPM gives as NaN (nothing to divide by) is left out,
// as DCGM blanks it.
func TestGPMStatePerFieldGroupAndNaNLeftOut(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	f.Update(0, func(g *nvmlfake.GPU) { g.R.GPM[gonvml.GPM_METRIC_DRAM_BW_UTIL] = math.NaN() })
	s, err := New(Config{Lib: f, Logger: quietLogger(), RetryBackoff: 20 * time.Millisecond,
		ProcessInterval: time.Millisecond, EventWait: 20 * time.Millisecond, Clock: newSteppingClock()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Watch([]source.Group{
		{Interval: 100 * time.Millisecond, Fields: fields(fieldid.ProfSMActive)},
		{Interval: time.Second, Fields: fields(fieldid.ProfPipeTensorActive, fieldid.ProfDRAMActive)},
	}))
	sink := newSink()
	gpu0 := gpuEntity(t, s, 0)
	for range 2 {
		require.NoError(t, s.Collect(context.Background(), 0, sink))
	}
	_, ok := sink.value(gpu0, fieldid.ProfSMActive)
	require.True(t, ok, "the 100 ms group has its two samples")

	require.NoError(t, s.Collect(context.Background(), 1, sink))
	_, ok = sink.value(gpu0, fieldid.ProfPipeTensorActive)
	assert.False(t, ok, "the 1 s group's first reading is its own baseline")
	require.NoError(t, s.Collect(context.Background(), 1, sink))
	_, ok = sink.value(gpu0, fieldid.ProfPipeTensorActive)
	assert.True(t, ok, "then it measures between its own samples")
	_, ok = sink.value(gpu0, fieldid.ProfDRAMActive)
	assert.False(t, ok, "a NaN metric is left out")
	assert.Empty(t, sink.fails[sample{gpu0.Key(), fieldid.ProfDRAMActive}], "and is no failure")
}

// DCGM keeps the NVLink5 PPCNT counters per link entity, which dcgm-exporter
// exports in its link layout (internal/pkg/collector/gpu_collector.go,
// toGPUNvLinkMetric). The NVML source has no link entities: it says so on
// each GPU, once, and the support table says why.
func TestPerLinkFieldsAreUnsupportedWithAReason(t *testing.T) {
	s := open(t, nvmlfake.New(nvmlfake.DGXH100), time.Second, fieldid.NVLinkPPCNTPhysicalLinkDownCounter, fieldid.GPUTemp)
	sink := newSink()
	for range 2 {
		require.NoError(t, s.Collect(context.Background(), 0, sink))
	}
	gpu0 := gpuEntity(t, s, 0)
	assert.Equal(t, []string{linkFieldNote}, sink.unsupported[sample{gpu0.Key(), fieldid.NVLinkPPCNTPhysicalLinkDownCounter}])
	_, ok := sink.value(gpu0, fieldid.NVLinkPPCNTPhysicalLinkDownCounter)
	assert.False(t, ok, "no value invented")
	_, ok = sink.value(gpu0, fieldid.GPUTemp)
	assert.True(t, ok)
	ok, note := Support().Reads(fieldid.NVLinkPPCNTPhysicalLinkDownCounter)
	assert.False(t, ok)
	assert.Equal(t, linkFieldNote, note)
}
