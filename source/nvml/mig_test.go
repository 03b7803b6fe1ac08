package nvml

import (
	"context"
	"strings"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	timesource "github.com/gpuscope/gpuscope/internal/clock"
	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/nvml/nvmlfake"
)

func kindOf(s *Source, k source.EntityKind) []*source.Entity {
	var out []*source.Entity
	for _, e := range s.Entities() {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// Both images run as a non-root user. nvml.h (go-nvml v0.13.4-1) says
// nvmlDeviceGetGpuInstanceById "Requires privileged user", and that in MIG
// mode the whole GPU's memory and processes are given "only if the caller
// has appropriate privileges"; utilisation is not supported in MIG mode at
// all. A MIG GPU read by a non-root user keeps its other series and its
// instances (profile names from nvmlDeviceGetAttributes_v2 on the MIG
// device handles), and says why the rest is missing; discovery of the
// other GPUs never stops on one GPU's MIG layout.
func TestMIGGPUReadWithoutPrivileges(t *testing.T) {
	cases := []struct {
		name    string
		nonRoot bool
		errs    map[string]gonvml.Return
		// wantGIs are the profiles of GPU 0's instances the source lists.
		wantGIs []string
		// parentFB says whether GPU 0's own framebuffer fields have values.
		parentFB bool
	}{
		{name: "root", wantGIs: []string{"1g.10gb", "3g.40gb"}, parentFB: true},
		{name: "non-root", nonRoot: true, wantGIs: []string{"1g.10gb", "3g.40gb"}},
		{name: "MIG devices cannot be listed", errs: map[string]gonvml.Return{"GetMigDeviceHandleByIndex": gonvml.ERROR_UNKNOWN},
			parentFB: true},
		{name: "MIG mode cannot be read", errs: map[string]gonvml.Return{"GetMaxMigDeviceCount": gonvml.ERROR_NO_PERMISSION},
			parentFB: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := nvmlfake.New(nvmlfake.DGXH100)
			f.EnableMIG(0, gonvml.GPU_INSTANCE_PROFILE_1_SLICE, gonvml.GPU_INSTANCE_PROFILE_3_SLICE)
			f.SetNonRoot(tc.nonRoot)
			f.Update(0, func(g *nvmlfake.GPU) {
				for k, v := range tc.errs {
					g.Errs[k] = v
				}
			})
			s := open(t, f, time.Second, fieldid.FBUsed, fieldid.FBTotal, fieldid.GPUTemp, fieldid.GPUUtil, fieldid.ProfSMActive)
			require.Len(t, kindOf(s, source.GPU), len(f.GPUs), "every GPU is discovered")
			var profiles []string
			for _, e := range kindOf(s, source.GPUInstance) {
				profiles = append(profiles, e.GPUInstanceProfile)
			}
			assert.Equal(t, tc.wantGIs, profiles)

			sink := newSink()
			collectTwice(t, s, sink)
			assert.Empty(t, s.Status().Lost)
			for _, e := range kindOf(s, source.GPUInstance) {
				_, ok := sink.value(e, fieldid.FBUsed)
				assert.True(t, ok, "instance %s reads its memory through its own handle", e.Key())
				_, ok = sink.value(e, fieldid.ProfSMActive)
				assert.True(t, ok, "instance %s has GPM", e.Key())
			}
			gpu0, gpu1 := gpuEntity(t, s, 0), gpuEntity(t, s, 1)
			_, ok := sink.value(gpu0, fieldid.GPUTemp)
			assert.True(t, ok, "the MIG GPU's other fields are read")
			_, ok = sink.value(gpu0, fieldid.FBUsed)
			assert.Equal(t, tc.parentFB, ok)
			assert.Empty(t, sink.fails[sample{gpu0.Key(), fieldid.FBUsed}], "a field without permission is no read error")
			if !tc.parentFB {
				reasons := sink.unsupported[sample{gpu0.Key(), fieldid.FBUsed}]
				require.Len(t, reasons, 1, "reported once")
				assert.True(t, strings.Contains(reasons[0], "root"), "the reason says what to do: %q", reasons[0])
			}
			assert.Len(t, sink.unsupported[sample{gpu0.Key(), fieldid.GPUUtil}], 1, "no utilisation in MIG mode")
			for _, id := range []uint16{fieldid.FBUsed, fieldid.GPUUtil, fieldid.GPUTemp} {
				_, ok = sink.value(gpu1, id)
				assert.True(t, ok, "the GPU without MIG keeps field %d", id)
			}
		})
	}
}

// Processes through the whole GPU need privileges in MIG mode; each MIG
// device handle lists its own (nvml.h, nvmlDeviceGetComputeRunningProcesses:
// "Per-instance information can be queried by using specific MIG device
// handles").
func TestMIGProcessesWithoutPrivileges(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	ins := f.EnableMIG(0, gonvml.GPU_INSTANCE_PROFILE_1_SLICE, gonvml.GPU_INSTANCE_PROFILE_3_SLICE)
	f.SetNonRoot(true)
	f.Update(0, func(g *nvmlfake.GPU) {
		ins[1].Processes = []gonvml.ProcessInfo{{Pid: 300, UsedGpuMemory: 1 << 30, GpuInstanceId: ins[1].GI.Info.Id}}
	})
	f.SetProcessName(300, "trainer")
	s := open(t, f, time.Second, fieldid.GPUTemp)
	require.NoError(t, s.Collect(context.Background(), 0, newSink()))
	testwait.For(t, "the process snapshot", func() bool { return len(s.Processes()) == 1 })
	assert.Equal(t, []source.Process{{PID: 300, UUID: f.GPUs[0].UUID, GPUInstanceID: int(ins[1].GI.Info.Id),
		UsedMemoryBytes: 1 << 30, SMUtil: -1, Name: "trainer"}}, s.Processes())
}

// NVML's MIG device is a compute instance (nvml.h,
// nvmlDeviceGetComputeInstanceId): a GPU instance split into several
// compute instances has a MIG device for each. DCGM models them as FE_GPU_I
// and FE_GPU_CI entities (dcgm_structs.h), and dcgm-exporter labels the GPU
// instance's series with GPU_I_ID and GPU_I_PROFILE
// (internal/pkg/collector/gpu_collector.go, toMetric): one GPU instance is
// one set of series however many compute instances it has, and each
// compute instance is an entity of its own under it.
func TestMIGComputeInstancesAreEntitiesUnderTheirGPUInstance(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	ins := f.EnableMIG(0, gonvml.GPU_INSTANCE_PROFILE_3_SLICE, gonvml.GPU_INSTANCE_PROFILE_1_SLICE)
	extra := []*nvmlfake.ComputeInstance{f.AddComputeInstance(0, ins[0]), f.AddComputeInstance(0, ins[0])}
	s := open(t, f, time.Second, fieldid.FBUsed, fieldid.FBTotal, fieldid.ProfSMActive)

	gis, cis := kindOf(s, source.GPUInstance), kindOf(s, source.ComputeInstance)
	require.Len(t, gis, 2, "one entity per GPU instance")
	require.Len(t, cis, 4, "one entity per compute instance")
	keys := map[string]bool{}
	for _, e := range s.Entities() {
		assert.False(t, keys[e.Key()], "key %s is taken once", e.Key())
		keys[e.Key()] = true
	}
	assert.Equal(t, "3g.40gb", gis[0].GPUInstanceProfile)
	assert.Equal(t, ins[0].UUID, gis[0].MIGUUID, "the GPU instance carries its first MIG device's UUID")
	wantCIs := []struct {
		gi, ci int
		uuid   string
	}{
		{int(ins[0].GI.Info.Id), 0, ins[0].UUID},
		{int(ins[0].GI.Info.Id), extra[0].ID, extra[0].UUID},
		{int(ins[0].GI.Info.Id), extra[1].ID, extra[1].UUID},
		{int(ins[1].GI.Info.Id), 0, ins[1].UUID},
	}
	for i, w := range wantCIs {
		assert.Equal(t, w.gi, cis[i].GPUInstanceID, "CI %d", i)
		assert.Equal(t, w.ci, cis[i].ComputeInstanceID, "CI %d", i)
		assert.Equal(t, w.uuid, cis[i].MIGUUID, "CI %d", i)
		assert.NotEmpty(t, cis[i].GPUInstanceProfile, "CI %d carries its GPU instance's profile", i)
	}

	sink := newSink()
	collectTwice(t, s, sink)
	for _, e := range append(gis, cis...) {
		total, ok := sink.value(e, fieldid.FBTotal)
		assert.True(t, ok, "%s has its memory", e.Key())
		want := 40960.0
		if e.GPUInstanceID == int(ins[1].GI.Info.Id) {
			want = 10240
		}
		assert.Equal(t, want, total, e.Key())
	}
	for _, e := range gis {
		_, ok := sink.value(e, fieldid.ProfSMActive)
		assert.True(t, ok, "GPM per GPU instance")
	}
	for _, e := range cis {
		assert.Equal(t, []string{reasonCIGPM}, sink.unsupported[sample{e.Key(), fieldid.ProfSMActive}])
	}
}

// A MIG layout changes without a restart (nvidia-smi mig -cgi/-dgi, the
// GPU operator's MIG manager). The source lists it again every MIGPoll,
// and at once after an instance's handle answers as a destroyed one's, so
// new instances appear and removed ones go, with their GPM samples.
func TestMIGLayoutFollowedWhileRunning(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	ins := f.EnableMIG(0, gonvml.GPU_INSTANCE_PROFILE_1_SLICE)
	clk := timesource.NewFake(time.Unix(1_750_000_000, 0))
	s, err := New(Config{Lib: f, Logger: quietLogger(), EventWait: 20 * time.Millisecond, Clock: clk, MIGPoll: 30 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Watch([]source.Group{{Interval: time.Second, Fields: fields(fieldid.FBUsed, fieldid.ProfSMActive)}}))
	collect := func() error { clk.Add(time.Second); return s.Collect(context.Background(), 0, newSink()) }
	require.NoError(t, collect())
	require.Len(t, kindOf(s, source.GPUInstance), 1)

	added := f.EnableMIG(0, gonvml.GPU_INSTANCE_PROFILE_2_SLICE)
	migModeCalls := len(f.GPUs[0].GetMigModeCalls())
	for range 28 { // up to 29 s after the first listing
		require.NoError(t, collect())
	}
	assert.Len(t, kindOf(s, source.GPUInstance), 1, "not listed again before MIGPoll")
	assert.Equal(t, migModeCalls, len(f.GPUs[0].GetMigModeCalls()), "no MIG call between polls")
	require.ErrorIs(t, collect(), source.ErrEntitiesChanged)
	gis := kindOf(s, source.GPUInstance)
	require.Len(t, gis, 2, "the new instance appears at the poll")
	assert.Equal(t, added[0].UUID, gis[1].MIGUUID)
	require.NoError(t, collect())
	assert.Equal(t, 2*len(f.GPUs)+2*2, f.LiveSamples(), "each GPU instance has its GPM samples")

	f.DestroyInstance(0, ins[0])
	sink := newSink()
	clk.Add(time.Second)
	require.NoError(t, s.Collect(context.Background(), 0, sink))
	assert.Len(t, sink.fails[sample{gis[0].Key(), fieldid.FBUsed}], 1, "the destroyed instance fails once")
	require.ErrorIs(t, collect(), source.ErrEntitiesChanged, "and is listed again at the next read")
	gis = kindOf(s, source.GPUInstance)
	require.Len(t, gis, 1)
	assert.Equal(t, added[0].UUID, gis[0].MIGUUID)
	assert.Equal(t, 2*len(f.GPUs)+2, f.LiveSamples(), "the removed instance's GPM samples are freed")
}

// ptrSink records which entity pointers a source hands over: the engine
// finds an entity's series by its pointer, from the last Entities().
type ptrSink struct {
	*recordingSink
	ptrs map[*source.Entity]bool
}

func (p *ptrSink) Value(e *source.Entity, f uint16, ts int64, v float64) {
	p.ptrs[e] = true
	p.recordingSink.Value(e, f, ts, v)
}

// A listing that finds the layout unchanged keeps the entities the engine
// knows: values of the MIG instances keep landing on them after each poll.
func TestMIGPollKeepsTheEntitiesOfAnUnchangedLayout(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	ins := f.EnableMIG(0, gonvml.GPU_INSTANCE_PROFILE_1_SLICE)
	f.AddComputeInstance(0, ins[0])
	clk := timesource.NewFake(time.Unix(1_750_000_000, 0))
	s, err := New(Config{Lib: f, Logger: quietLogger(), EventWait: 20 * time.Millisecond, Clock: clk, MIGPoll: 30 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Watch([]source.Group{{Interval: time.Second, Fields: fields(fieldid.FBUsed)}}))
	known := map[*source.Entity]bool{}
	for _, e := range s.Entities() {
		known[e] = true
	}
	for _, step := range []time.Duration{time.Second, 30 * time.Second, 30 * time.Second} {
		clk.Add(step)
		sink := &ptrSink{recordingSink: newSink(), ptrs: map[*source.Entity]bool{}}
		require.NoError(t, s.Collect(context.Background(), 0, sink), "the layout did not change")
		require.Len(t, sink.ptrs, len(f.GPUs)+1+2, "every GPU, the GPU instance and its two compute instances")
		for e := range sink.ptrs {
			assert.True(t, known[e], "%s is an entity the engine was given", e.Key())
		}
	}
}

// A MIG device that cannot be read is left out with one warning, however
// many periodic listings find it so; the GPU's other instances are read.
func TestUnreadableMIGDeviceIsSaidOnce(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	f.EnableMIG(0, gonvml.GPU_INSTANCE_PROFILE_1_SLICE)
	f.Update(0, func(g *nvmlfake.GPU) { g.Errs["MIG.GetComputeInstanceId"] = gonvml.ERROR_UNKNOWN })
	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	clk := timesource.NewFake(time.Unix(1_750_000_000, 0))
	s, err := New(Config{Lib: f, Logger: logrus.NewEntry(log), EventWait: 20 * time.Millisecond, Clock: clk, MIGPoll: 30 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Watch([]source.Group{{Interval: time.Second, Fields: fields(fieldid.GPUTemp)}}))
	for range 4 {
		clk.Add(30 * time.Second)
		require.NoError(t, s.Collect(context.Background(), 0, newSink()))
	}
	warned, debugged := 0, 0
	for _, e := range hook.AllEntries() {
		if e.Message == "MIG device cannot be read; it is not sampled" {
			switch e.Level {
			case logrus.WarnLevel:
				warned++
			case logrus.DebugLevel:
				debugged++
			}
		}
	}
	assert.Equal(t, 1, warned, "said once")
	assert.Equal(t, 4, debugged, "then at debug level at each listing")
	assert.Empty(t, kindOf(s, source.GPUInstance))
	assert.Len(t, kindOf(s, source.GPU), len(f.GPUs))
}
