package nvml

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/nvml/nvmlfake"
	"github.com/gpuscope/gpuscope/source"
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

func TestSupportTableMatchesFieldMap(t *testing.T) {
	table := counters.NVMLSupport()
	var served []uint16
	for id, reason := range table {
		if reason == "" {
			served = append(served, id)
		}
	}
	var mapped []uint16
	for id := range fieldMap {
		mapped = append(mapped, id)
		assert.Empty(t, table[id], "field %d is mapped but the table gives a reason", id)
	}
	sort.Slice(served, func(i, j int) bool { return served[i] < served[j] })
	sort.Slice(mapped, func(i, j int) bool { return mapped[i] < mapped[j] })
	assert.Equal(t, served, mapped)
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
		{"SM clock MHz", fSMClock, 1980}, {"memory clock MHz", fMemClock, 2619}, {"video clock MHz", fVideoClock, 1755},
		{"app SM clock MHz", fAppSMClock, 1755}, {"max SM clock MHz", fMaxSMClock, 1980},
		{"clock event reasons bitmask", counters.FieldClockEventReasons, 1},
		{"memory temp C (field values)", fMemoryTemp, 50}, {"GPU temp C", fGPUTemp, 40},
		{"slowdown temp C", fSlowdownTemp, 87}, {"shutdown temp C", fShutdownTemp, 92},
		{"power W from mW", fPowerUsage, 312.5}, {"power limit W", fPowerMgmtLimit, 700}, {"enforced limit W", fEnforcedPowerLimit, 700},
		{"energy mJ", fTotalEnergy, 123456789},
		{"PCIe TX KB/s", fPCIeTxThroughput, 2048}, {"PCIe RX KB/s", fPCIeRxThroughput, 4096}, {"PCIe replays", fPCIeReplayCounter, 3},
		{"GPU util %", fGPUUtil, 87}, {"memory copy util %", fMemCopyUtil, 42}, {"encoder util %", fEncUtil, 0}, {"decoder util %", fDecUtil, 5},
		{"power violation ns", fPowerViolation, 1000}, {"thermal violation ns", fThermalViolation, 2000},
		{"sync boost violation ns", fSyncBoostViolation, 3000}, {"board limit violation ns", fBoardLimitViolation, 4000},
		{"low util violation ns", fLowUtilViolation, 5000}, {"reliability violation ns", fReliabilityViolat, 6000},
		{"FB total MiB", fFBTotal, 81920}, {"FB free MiB", fFBFree, 81920 - 512 - 10240}, {"FB used MiB", fFBUsed, 10240}, {"FB reserved MiB", fFBReserved, 512},
		{"ECC SBE volatile", fECCSBEVolTotal, 1}, {"ECC DBE volatile", fECCDBEVolTotal, 2},
		{"ECC SBE aggregate", fECCSBEAggTotal, 11}, {"ECC DBE aggregate", fECCDBEAggTotal, 22},
		{"retired SBE pages", fRetiredSBE, 1}, {"retired DBE pages", fRetiredDBE, 2}, {"retired pending", fRetiredPending, 0},
		{"uncorrectable remapped rows", fUncorrRemappedRows, 1}, {"correctable remapped rows", fCorrRemappedRows, 4},
		{"row remap failure", fRowRemapFailure, 0}, {"row remap pending", fRowRemapPending, 1},
		{"NVLink CRC flit errors", fNVLinkCRCFlitErrors, 7}, {"NVLink CRC data errors", fNVLinkCRCDataErrors, 8},
		{"NVLink replay errors", fNVLinkReplayErrors, 9}, {"NVLink recovery errors", fNVLinkRecoveryErrs, 10},
		{"NVLink bandwidth KiB, TX+RX over links", fNVLinkBandwidth, 100 + 200 + 300 + 400},
		{"vGPU license", fVGPULicenseStatus, 1},
		{"GR engine ratio from %", fProfGrEngineActive, 0.9}, {"SM active ratio", fProfSMActive, 0.8},
		{"SM occupancy ratio", fProfSMOccupancy, 0.5}, {"tensor active ratio", fProfTensorActive, 0.4},
		{"DRAM active ratio", fProfDRAMActive, 0.3}, {"FP64 ratio", fProfFP64Active, 0.01},
		{"FP32 ratio", fProfFP32Active, 0.2}, {"FP16 ratio", fProfFP16Active, 0.1},
		{"PCIe TX bytes/s from MiB/s", fProfPCIeTxBytes, 100 * mibF}, {"PCIe RX bytes/s", fProfPCIeRxBytes, 200 * mibF},
		{"NVLink TX bytes/s", fProfNVLinkTxBytes, 1000 * mibF}, {"NVLink RX bytes/s", fProfNVLinkRxBytes, 2000 * mibF},
	}
	wantText := map[uint16]string{
		fDriverVersion: "550.54.15", fNVMLVersion: "12.550.54.15", fName: "NVIDIA H100 80GB HBM3", fBrand: "NVIDIA",
		fSerial: "1652323000000", fUUID: f.GPUs[0].UUID, fPCIBusID: nvmlfake.BusID(0), fVBIOS: "96.00.74.00.01",
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
	// GPU 1 is no vGPU guest: its license field is absent, not 0.
	gpu1 := gpuEntity(t, s, 1)
	_, ok := sink.value(gpu1, fVGPULicenseStatus)
	assert.False(t, ok)
	assert.Len(t, sink.unsupported[sample{gpu1.Key(), fVGPULicenseStatus}], 1)
}

func TestGPMAbsentOnAmpereAndPresentOnHopper(t *testing.T) {
	for _, tc := range []struct {
		name  string
		model nvmlfake.Model
		gpm   bool
	}{{"DGX H100", nvmlfake.DGXH100, true}, {"DGX A100", nvmlfake.DGXA100, false}} {
		t.Run(tc.name, func(t *testing.T) {
			f := nvmlfake.New(tc.model)
			s := open(t, f, time.Second, fProfSMActive, fProfDRAMActive, fGPUTemp)
			sink := newSink()
			collectTwice(t, s, sink)
			for i := range f.GPUs {
				e := gpuEntity(t, s, i)
				_, ok := sink.value(e, fGPUTemp)
				assert.True(t, ok, "GPU %d temperature", i)
				for _, id := range []uint16{fProfSMActive, fProfDRAMActive} {
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
	s := open(t, f, time.Second, fFBUsed, fFBTotal, fGPUTemp, fProfSMActive, fProfGrEngineActive)

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
	used, ok := sink.value(gis[0], fFBUsed)
	require.True(t, ok)
	assert.Equal(t, 1024.0, used)
	total, _ := sink.value(gis[1], fFBTotal)
	assert.Equal(t, 40960.0, total)
	sm, ok := sink.value(gis[0], fProfSMActive)
	require.True(t, ok, "per-instance GPM")
	assert.InDelta(t, 0.25, sm, 1e-9)
	_, ok = sink.value(gis[0], fProfGrEngineActive)
	assert.False(t, ok, "a metric the instance lacks is absent, not 0")
	_, ok = sink.value(gis[0], fGPUTemp)
	assert.False(t, ok, "device-level fields stay on the parent")
	parentTemp, ok := sink.value(gpuEntity(t, s, 0), fGPUTemp)
	assert.True(t, ok)
	assert.Equal(t, 40.0, parentTemp)
}

func TestXIDEventsCountRepeats(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	s := open(t, f, time.Second, counters.FieldXIDErrors, counters.FieldExpXIDErrorsCount)
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
	last, _ := sink.value(gpuEntity(t, s, 2), counters.FieldXIDErrors)
	assert.Equal(t, 48.0, last)
	other, ok := sink.value(gpuEntity(t, s, 0), counters.FieldXIDErrors)
	assert.True(t, ok)
	assert.Zero(t, other)
	assert.Empty(t, sink.unsupported, "the derived XID count is the engine's, not unsupported")
}

func TestNotSupportedIsReportedOncePerWatch(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	f.Update(1, func(g *nvmlfake.GPU) { g.Errs["GetPowerUsage"] = gonvml.ERROR_NOT_SUPPORTED })
	s := open(t, f, time.Second, fPowerUsage, fGPUTemp)
	sink := newSink()
	for i := 0; i < 3; i++ {
		require.NoError(t, s.Collect(context.Background(), 0, sink))
	}
	gpu1 := gpuEntity(t, s, 1)
	assert.Len(t, sink.unsupported[sample{gpu1.Key(), fPowerUsage}], 1)
	assert.Contains(t, sink.unsupported[sample{gpu1.Key(), fPowerUsage}][0], "GetPowerUsage")
	_, ok := sink.value(gpu1, fPowerUsage)
	assert.False(t, ok, "no zero for an unsupported field")
	assert.Len(t, f.GPUs[1].GetPowerUsageCalls(), 1, "an unsupported field is not read again")
	_, ok = sink.value(gpuEntity(t, s, 0), fPowerUsage)
	assert.True(t, ok)
	assert.Empty(t, sink.fails)

	require.NoError(t, s.Watch([]source.Group{{Interval: time.Second, Fields: fields(fPowerUsage)}}))
	require.NoError(t, s.Collect(context.Background(), 0, sink))
	assert.Len(t, sink.unsupported[sample{gpu1.Key(), fPowerUsage}], 2, "reported again after a new Watch")
}

func TestUnmappedFieldIsUnsupportedWithReason(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXA100)
	s := open(t, f, time.Second, counters.FieldExpGPUHealthStatus)
	sink := newSink()
	require.NoError(t, s.Collect(context.Background(), 0, sink))
	assert.Equal(t, []string{"DCGM-only health aggregate"},
		sink.unsupported[sample{gpuEntity(t, s, 0).Key(), counters.FieldExpGPUHealthStatus}])
}

func TestLostGPUIsSkippedAndRecovers(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	s := open(t, f, time.Second, fGPUTemp, fPowerUsage, fProfSMActive)
	f.Update(3, func(g *nvmlfake.GPU) { g.Lost = true })
	sink := newSink()
	collectTwice(t, s, sink)
	lostKey := gpuEntity(t, s, 3).Key()
	assert.Equal(t, []string{lostKey}, s.Status().Lost)
	for i := range f.GPUs {
		_, ok := sink.value(gpuEntity(t, s, i), fGPUTemp)
		assert.Equal(t, i != 3, ok, "GPU %d", i)
	}
	assert.Empty(t, sink.fails, "a lost GPU is reported by Status, not by a failure per field")

	f.Update(3, func(g *nvmlfake.GPU) { g.Lost = false })
	require.Eventually(t, func() bool {
		require.NoError(t, s.Collect(context.Background(), 0, sink))
		_, ok := sink.value(gpuEntity(t, s, 3), fGPUTemp)
		return ok && len(s.Status().Lost) == 0
	}, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, 2*len(f.GPUs), f.LiveSamples(), "the lost GPU's GPM samples were freed, not leaked")
}

func TestLostGPURetryBacksOff(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	s, err := New(Config{Lib: f, Logger: quietLogger(), RetryBackoff: 200 * time.Millisecond, EventWait: 20 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Watch([]source.Group{{Interval: time.Second, Fields: fields(fGPUTemp)}}))
	f.Update(6, func(g *nvmlfake.GPU) { g.Lost = true })
	sink := newSink()
	for i := 0; i < 5; i++ {
		require.NoError(t, s.Collect(context.Background(), 0, sink))
	}
	assert.Empty(t, f.DeviceGetHandleByUUIDCalls(), "no retry before the backoff elapsed")
	time.Sleep(250 * time.Millisecond)
	require.NoError(t, s.Collect(context.Background(), 0, sink))
	assert.Len(t, f.DeviceGetHandleByUUIDCalls(), 1)
}

func TestSlowGPUDoesNotStallOthers(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	s := open(t, f, 100*time.Millisecond, fGPUTemp)
	f.Update(5, func(g *nvmlfake.GPU) { g.Delay = 600 * time.Millisecond })
	sink := newSink()
	for round := 0; round < 2; round++ {
		start := time.Now()
		require.NoError(t, s.Collect(context.Background(), 0, sink))
		assert.Less(t, time.Since(start), 400*time.Millisecond, "round %d waited on the slow GPU", round)
	}
	for i := range f.GPUs {
		_, ok := sink.value(gpuEntity(t, s, i), fGPUTemp)
		assert.Equal(t, i != 5, ok, "GPU %d", i)
	}
	slowFails := sink.fails[sample{gpuEntity(t, s, 5).Key(), fGPUTemp}]
	require.Len(t, slowFails, 2, "timed out once, then skipped while still running")
	for _, err := range slowFails {
		assert.True(t, errors.Is(err, ErrReadTimeout), err)
	}

	f.Update(5, func(g *nvmlfake.GPU) { g.Delay = 0 })
	require.Eventually(t, func() bool {
		require.NoError(t, s.Collect(context.Background(), 0, sink))
		_, ok := sink.value(gpuEntity(t, s, 5), fGPUTemp)
		return ok
	}, 5*time.Second, 50*time.Millisecond)
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
	s := open(t, f, time.Second, fGPUTemp)
	require.Empty(t, s.Processes(), "nothing before the first collection")
	require.NoError(t, s.Collect(context.Background(), 0, newSink()))
	got := s.Processes()
	require.Len(t, got, 2)
	assert.Equal(t, source.Process{PID: 100, UUID: f.GPUs[0].UUID, GPUInstanceID: -1, UsedMemoryBytes: 2 << 30, SMUtil: 70}, got[0])
	assert.Equal(t, source.Process{PID: 200, UUID: f.GPUs[0].UUID, GPUInstanceID: -1, UsedMemoryBytes: 1 << 30, SMUtil: -1}, got[1])
}

func TestCollectRejectsUnknownGroup(t *testing.T) {
	s := open(t, nvmlfake.New(nvmlfake.DGXA100), time.Second, fGPUTemp)
	err := s.Collect(context.Background(), 3, newSink())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "group 3")
}
