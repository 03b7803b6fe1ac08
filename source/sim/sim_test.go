package sim

import (
	"context"
	"math"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
)

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"unknown model", Config{Model: "v100"}, []string{`unknown model "v100"`, "a100, h100, h200, l4"}},
		{"MIG on L4", Config{Model: "l4", MIG: "all"}, []string{"l4", "does not support MIG"}},
		{"unknown profile", Config{MIG: "7x1g.5gb"}, []string{`"1g.5gb"`, "1g.10gb, 1g.20gb"}},
		{"layout too large", Config{MIG: "2x4g.40gb"}, []string{"8 compute", "at most", "7"}},
		{"bad count", Config{MIG: "0x1g.10gb"}, []string{"positive integer"}},
		{"too many GPUs", Config{GPUs: 17}, []string{"GPUs 17", "between 1 and 16"}},
		{"negative GPUs", Config{GPUs: -1}, []string{"GPUs -1"}},
		{"too many links", Config{NVLinks: 19}, []string{"NVLinks 19", "at most 18"}},
		{"links on L4", Config{Model: "l4", NVLinks: 2}, []string{"no NVLink"}},
		{"negative event rate", Config{EventRate: -1}, []string{"EventRate"}},
		{"shared beyond GPUs", Config{GPUs: 2, SharedGPUs: 3}, []string{"SharedGPUs 3"}},
		{"shared with MIG", Config{SharedGPUs: 1, MIG: "all"}, []string{"SharedGPUs", "MIG"}},
		{"idle GPU out of range", Config{GPUs: 4, IdleGPUs: []int{4}}, []string{"IdleGPUs", "index 4", "0..3"}},
		{"idle GPU repeated", Config{IdleGPUs: []int{1, 1}}, []string{"IdleGPUs", "index 1 repeated"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestModels(t *testing.T) {
	assert.Equal(t, []string{"a100", "h100", "h200", "l4", "l40s", "rtx2080super", "rtx4080super", "rtx6000ada"}, Models())
}

func TestIdentity(t *testing.T) {
	tests := []struct {
		model, name string
		limit       float64
		links       int
	}{
		{"h100", "NVIDIA H100 80GB HBM3", 700, 18},
		{"h200", "NVIDIA H200", 700, 18},
		{"a100", "NVIDIA A100-SXM4-80GB", 400, 12},
		{"l4", "NVIDIA L4", 72, 0},
		{"rtx6000ada", "NVIDIA RTX 6000 Ada Generation", 300, 0},
		{"l40s", "NVIDIA L40S", 350, 0},
		{"rtx4080super", "NVIDIA GeForce RTX 4080 SUPER", 320, 0},
		{"rtx2080super", "NVIDIA GeForce RTX 2080 SUPER", 250, 0},
	}
	uuidRe := regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	busRe := regexp.MustCompile(`^00000000:[0-9A-F]{2}:00\.0$`)
	for _, tc := range tests {
		t.Run(tc.model, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Model = tc.model
			s, c := newSim(t, cfg, fieldid.PowerMgmtLimit, fieldid.DriverVersion)
			rec := newRec()
			run(t, s, c, rec, time.Second, 0)
			gpus := gpuEntities(s)
			require.Len(t, gpus, 8)
			seen := map[string]bool{}
			for i, e := range gpus {
				assert.Equal(t, i, e.GPU)
				assert.Equal(t, tc.name, e.ModelName)
				assert.Regexp(t, uuidRe, e.UUID)
				assert.Regexp(t, busRe, e.PCIBusID)
				assert.False(t, seen[e.UUID] || seen[e.PCIBusID], "duplicate identity")
				seen[e.UUID], seen[e.PCIBusID] = true, true
				assert.Equal(t, tc.limit, rec.last(t, e, fieldid.PowerMgmtLimit))
				assert.Equal(t, driverVersion, rec.texts[key{e.Key(), fieldid.DriverVersion}])
			}
			assert.Equal(t, tc.links, s.cfg.links)
		})
	}
}

func TestSameSeedSameValuesOtherSeedOthers(t *testing.T) {
	ids := FieldIDs()
	collect := func(seed int64) (*recSink, []*source.Entity) {
		cfg := DefaultConfig()
		cfg.Seed = seed
		cfg.GPUs = 2
		cfg.EventRate = 50
		c := newClock()
		cfg.Now = c.Now
		s, err := New(cfg)
		require.NoError(t, err)
		// Two groups at different intervals, as the engine watches them.
		half := len(ids) / 2
		require.NoError(t, s.Watch([]source.Group{
			source.GroupOf(100*time.Millisecond, fieldsOf(ids[:half]...)),
			source.GroupOf(time.Second, fieldsOf(ids[half:]...)),
		}))
		rec := newRec()
		for i := 0; i < 1200; i++ {
			require.NoError(t, s.Collect(context.Background(), 0, rec))
			if i%10 == 0 {
				require.NoError(t, s.Collect(context.Background(), 1, rec))
			}
			c.Add(100 * time.Millisecond)
		}
		return rec, s.Entities()
	}
	a, ea := collect(7)
	b, eb := collect(7)
	o, eo := collect(8)
	assert.Equal(t, ea, eb)
	assert.Equal(t, a.values, b.values)
	assert.Equal(t, a.texts, b.texts)
	assert.Equal(t, a.xids, b.xids)
	assert.NotEqual(t, ea[0].UUID, eo[0].UUID)
	k := key{ea[0].Key(), fieldid.ProfSMActive}
	ko := key{eo[0].Key(), fieldid.ProfSMActive}
	require.Len(t, o.values[ko], len(a.values[k]))
	assert.NotEqual(t, a.values[k], o.values[ko])
}

func TestUnitsAndRanges(t *testing.T) {
	for _, model := range Models() {
		t.Run(model, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Model = model
			cfg.GPUs = 2
			s, c := newSim(t, cfg, FieldIDs()...)
			rec := newRec()
			run(t, s, c, rec, 500*time.Millisecond, 10*time.Minute)
			m := s.cfg.model
			for _, e := range gpuEntities(s) {
				get := func(f uint16) []sample { return rec.values[key{e.Key(), f}] }
				for _, f := range []uint16{fieldid.ProfGREngineActive, fieldid.ProfSMActive, fieldid.ProfSMOccupancy, fieldid.ProfPipeTensorActive,
					fieldid.ProfDRAMActive, fieldid.ProfPipeFP64Active, fieldid.ProfPipeFP32Active, fieldid.ProfPipeFP16Active} {
					for _, v := range get(f) {
						require.True(t, v.v >= 0 && v.v <= 1, "%s = %v, want a ratio", nameOf(f), v.v)
					}
				}
				for _, f := range []uint16{fieldid.GPUUtil, fieldid.MemCopyUtil} {
					for _, v := range get(f) {
						require.True(t, v.v >= 0 && v.v <= 100, "%s = %v, want percent", nameOf(f), v.v)
					}
				}
				used, free, res := get(fieldid.FBUsed), get(fieldid.FBFree), get(fieldid.FBReserved)
				for i := range used {
					require.Equal(t, float64(m.fbTotal), used[i].v+free[i].v+res[i].v, "FB used+free+reserved at sample %d", i)
				}
				assert.Greater(t, used[len(used)-1].v, 10*used[0].v, "framebuffer ramps up")
				assert.Greater(t, used[len(used)-1].v, 0.7*float64(m.fbTotal), "steady framebuffer use")
				for _, f := range []uint16{fieldid.TotalEnergyConsumption, fieldid.PowerViolation, fieldid.LowUtilViolation, fieldid.ECCSBEAggTotal, fieldid.PCIeReplayCounter} {
					vs := get(f)
					for i := 1; i < len(vs); i++ {
						require.GreaterOrEqual(t, vs[i].v, vs[i-1].v, "%s must not decrease", nameOf(f))
					}
				}
				energy := get(fieldid.TotalEnergyConsumption)
				joules := (energy[len(energy)-1].v - energy[0].v) / 1000
				assert.InDelta(t, 600*avg(get(fieldid.PowerUsage)), joules, 0.05*joules, "energy integrates power")
				lo, hi := minMax(get(fieldid.PowerUsageInstant))
				assert.GreaterOrEqual(t, lo, 0.9*m.idleW)
				assert.LessOrEqual(t, hi, m.limitW)
				assert.Greater(t, hi, 0.6*m.limitW, "training reaches high power")
				lo, hi = minMax(get(fieldid.GPUTemp))
				assert.True(t, lo > 15 && hi < 90, "GPU temperature %v..%v C", lo, hi)
				lo, hi = minMax(get(fieldid.SMClock))
				// A power-capped GPU clocks down to 0.88 of its maximum, which
				// is below the idle clock of a GPU that idles at its maximum
				// (the L40S of the capture).
				assert.True(t, lo >= math.Min(m.idleSMClock, 0.88*m.maxSMClock) && hi == m.maxSMClock, "SM clock %v..%v MHz", lo, hi)
				lo, hi = minMax(get(fieldid.ProfPCIeRXBytes))
				assert.True(t, lo >= 0 && hi <= m.pcieBytes && hi > 1e8, "PCIe RX %v..%v bytes/s", lo, hi)
			}
		})
	}
}

func avg(s []sample) float64 {
	sum := 0.0
	for _, v := range s {
		sum += v.v
	}
	return sum / float64(len(s))
}

func minMax(s []sample) (float64, float64) {
	lo, hi := s[0].v, s[0].v
	for _, v := range s {
		lo, hi = min(lo, v.v), max(hi, v.v)
	}
	return lo, hi
}

func TestTrainingPhases(t *testing.T) {
	cfg := DefaultConfig()
	cfg.GPUs = 1
	s, c := newSim(t, cfg, fieldid.ProfSMActive, fieldid.ClocksEventReasons, fieldid.ProfNVLinkTXBytes)
	rec := newRec()
	run(t, s, c, rec, 100*time.Millisecond, 5*time.Minute)
	e := gpuEntities(s)[0]
	init := int(s.job.initDur * 10)
	sm := rec.values[key{e.Key(), fieldid.ProfSMActive}][init+10:]
	reasons := rec.values[key{e.Key(), fieldid.ClocksEventReasons}][init+10:]
	high, low, idleLow, nvHigh := 0, 0, 0, 0
	nv := rec.values[key{e.Key(), fieldid.ProfNVLinkTXBytes}][init+10:]
	for i, v := range sm {
		switch {
		case v.v > 0.8:
			high++
		case v.v < 0.1:
			low++
			if uint64(reasons[i].v)&reasonGPUIdle != 0 {
				idleLow++
			}
		}
		if nv[i].v > 0.5*18*25e9 {
			nvHigh++
		}
	}
	n := len(sm)
	assert.Greater(t, high, n/2, "compute phases dominate")
	assert.Greater(t, low, n/200, "data-loader stalls happen")
	assert.Less(t, low, n/5, "stalls are short")
	assert.Equal(t, low, idleLow, "stalls set gpu_idle")
	assert.Greater(t, nvHigh, n/20, "all-reduce phases use NVLink")
}

func TestTemperatureLagsPower(t *testing.T) {
	cfg := DefaultConfig()
	cfg.GPUs = 1
	s, c := newSim(t, cfg, fieldid.GPUTemp, fieldid.PowerUsage)
	rec := newRec()
	run(t, s, c, rec, time.Second, 3*time.Minute)
	e := gpuEntities(s)[0]
	temp := rec.values[key{e.Key(), fieldid.GPUTemp}]
	power := rec.values[key{e.Key(), fieldid.PowerUsage}]
	start := int(s.job.initDur) + 1 // first second of training
	require.Less(t, start+60, len(temp))
	assert.Greater(t, power[start+2].v, 3*power[start-5].v, "power steps up with training")
	assert.Less(t, temp[start+2].v-temp[start-5].v, 3.0, "temperature does not jump with power")
	assert.Less(t, temp[start+2].v, temp[start+15].v)
	assert.Less(t, temp[start+15].v, temp[start+60].v)
	assert.Greater(t, temp[start+60].v-temp[start].v, 10.0, "temperature follows power")
}

func TestMIGEntities(t *testing.T) {
	cfg := DefaultConfig()
	cfg.GPUs = 2
	cfg.MIG = "3g.40gb, 2x2g.20gb"
	s, c := newSim(t, cfg, fieldid.GPUTemp)
	assert.Len(t, s.Entities(), 2, "GPU fields only: no MIG entities")

	require.NoError(t, s.Watch([]source.Group{{Interval: time.Second, Fields: fieldsOf(fieldid.GPUTemp, fieldid.ProfSMActive, fieldid.FBUsed, fieldid.FBFree, fieldid.FBTotal)}}))
	ents := s.Entities()
	require.Len(t, ents, 8)
	assert.Equal(t, ents, s.Entities(), "the entity list is stable")
	wantProfiles := []string{"3g.40gb", "2g.20gb", "2g.20gb"}
	for g := 0; g < 2; g++ {
		assert.Equal(t, source.GPU, ents[g*4].Kind)
		for k := 0; k < 3; k++ {
			e := ents[g*4+1+k]
			assert.Equal(t, source.GPUInstance, e.Kind)
			assert.Equal(t, g, e.GPU)
			assert.Equal(t, ents[g*4].UUID, e.UUID)
			assert.Equal(t, k+1, e.GPUInstanceID)
			assert.Equal(t, wantProfiles[k], e.GPUInstanceProfile)
			assert.Regexp(t, `^MIG-[0-9a-f]{8}-`, e.MIGUUID)
		}
	}
	rec := newRec()
	run(t, s, c, rec, time.Second, 3*time.Minute)
	gi := ents[1]
	total := rec.last(t, gi, fieldid.FBTotal)
	assert.Equal(t, total, rec.last(t, gi, fieldid.FBUsed)+rec.last(t, gi, fieldid.FBFree))
	assert.Equal(t, 40448.0, total, "3g.40gb holds what a real H100 shows (nvidia-smi -q, h100-mig capture)")
	_, hasTemp := rec.values[key{gi.Key(), fieldid.GPUTemp}]
	assert.False(t, hasTemp, "board fields stay on the GPU")
	gpuUsed := rec.last(t, ents[0], fieldid.FBUsed)
	sum := 0.0
	for _, e := range ents[1:4] {
		sum += rec.last(t, e, fieldid.FBUsed)
	}
	assert.Equal(t, gpuUsed, sum, "the GPU's used framebuffer is its instances'")
}

func TestMIGAllAndSingle(t *testing.T) {
	for _, tc := range []struct {
		model, layout, profile string
		n, firstID             int
	}{
		{"h100", "all", "1g.10gb", 7, 1},
		{"h200", "all", "1g.18gb", 7, 1},
		{"a100", "7g.80gb", "7g.80gb", 1, 0},
	} {
		t.Run(tc.model+"/"+tc.layout, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.GPUs, cfg.Model, cfg.MIG = 1, tc.model, tc.layout
			s, _ := newSim(t, cfg, fieldid.ProfSMActive)
			ents := s.Entities()
			require.Len(t, ents, 1+tc.n)
			assert.Equal(t, tc.profile, ents[1].GPUInstanceProfile)
			assert.Equal(t, tc.firstID, ents[1].GPUInstanceID)
		})
	}
}

// TestPerLinkFieldsLiveOnTheGPU: DCGM's ..._L<n> fields are GPU fields, one
// per link index, so the sim samples them on the GPU as the DCGM source reads
// them, and the series carry the same labels whichever source feeds them.
func TestPerLinkFieldsLiveOnTheGPU(t *testing.T) {
	cfg := DefaultConfig()
	cfg.GPUs = 2
	cfg.NVLinks = 4
	s, c := newSim(t, cfg, fieldid.GPUTemp, fieldid.NVLinkBandwidthByLink[0], fieldid.NVLinkBandwidthByLink[3], fieldid.NVLinkBandwidthByLink[5], fieldid.NVLinkBandwidthTotal)
	ents := s.Entities()
	require.Len(t, ents, 2, "no entity besides the GPUs")
	for _, e := range ents {
		assert.Equal(t, source.GPU, e.Kind)
	}
	rec := newRec()
	run(t, s, c, rec, 100*time.Millisecond, 2*time.Minute)
	assert.NotEmpty(t, rec.values[key{ents[0].Key(), fieldid.NVLinkBandwidthByLink[0]}])
	assert.NotEmpty(t, rec.values[key{ents[1].Key(), fieldid.NVLinkBandwidthByLink[3]}])
	assert.Equal(t, 1, rec.unsup[key{ents[0].Key(), fieldid.NVLinkBandwidthByLink[5]}], "link 5 of a 4-link GPU")
	_, hi := minMax(rec.values[key{ents[0].Key(), fieldid.NVLinkBandwidthByLink[0]}])
	assert.Greater(t, hi, 20_000.0, "all-reduce moves tens of GB/s per link (MB/s)")
	assert.LessOrEqual(t, hi, 50_000.0)

	cfg = DefaultConfig()
	cfg.Model, cfg.GPUs = "l4", 1
	s, c = newSim(t, cfg, fieldid.NVLinkBandwidthByLink[0], fieldid.ProfNVLinkTXBytes, fieldid.GPUTemp)
	assert.Len(t, s.Entities(), 1)
	rec = newRec()
	run(t, s, c, rec, time.Second, 0)
	e := s.Entities()[0]
	assert.Equal(t, 1, rec.unsup[key{e.Key(), fieldid.NVLinkBandwidthByLink[0]}])
	assert.Equal(t, 1, rec.unsup[key{e.Key(), fieldid.ProfNVLinkTXBytes}])
}

func TestUnsupportedOncePerWatch(t *testing.T) {
	cfg := DefaultConfig()
	cfg.GPUs = 2
	s, c := newSim(t, cfg, 9999, fieldid.GPUTemp)
	rec := newRec()
	run(t, s, c, rec, time.Second, 5*time.Second)
	for _, e := range s.Entities() {
		assert.Equal(t, 1, rec.unsup[key{e.Key(), 9999}])
		assert.Zero(t, rec.unsup[key{e.Key(), fieldid.GPUTemp}])
		assert.Empty(t, rec.values[key{e.Key(), 9999}])
	}
	require.NoError(t, s.Watch([]source.Group{{Interval: time.Second, Fields: fieldsOf(9999)}}))
	run(t, s, c, rec, time.Second, time.Second)
	assert.Equal(t, 2, rec.unsup[key{s.Entities()[0].Key(), 9999}], "reported again after a new Watch")

	err := s.Collect(context.Background(), 3, rec)
	assert.ErrorContains(t, err, "group 3")
}

// TestEventRate: the rare events come at their base rates times EventRate.
// The chance of an event is drawn every 100 ms tick in proportion to
// EventRate, so one simulated hour at EventRate 24 holds as many events,
// in expectation, as a day at EventRate 1, at a 24th of the cost.
func TestEventRate(t *testing.T) {
	simulate := func(rate float64) (*recSink, *Source) {
		cfg := DefaultConfig()
		cfg.EventRate = rate
		s, c := newSim(t, cfg, fieldid.XIDErrors, fieldid.ECCSBEVolTotal, fieldid.ECCDBEVolTotal, fieldid.PCIeReplayCounter,
			fieldid.NVLinkCRCFlitErrorCountTotal, fieldid.ThermalViolation, fieldid.BoardLimitViolation)
		rec := newRec()
		run(t, s, c, rec, 10*time.Second, time.Hour)
		return rec, s
	}
	rec, s := simulate(24)
	// 8 GPUs x 1 h at 24 x 0.1025 XIDs per GPU-hour, as 192 GPU-hours at
	// EventRate 1: about 20 expected.
	assert.True(t, len(rec.xids) >= 5 && len(rec.xids) <= 45, "%d XIDs in 192 GPU-hours", len(rec.xids))
	codes := map[uint64]int{}
	for _, x := range rec.xids {
		codes[x.xid]++
	}
	assert.Greater(t, codes[13]+codes[31], 0)
	for code := range codes {
		assert.Contains(t, []uint64{13, 31, 48, 79}, code)
	}
	for _, e := range gpuEntities(s) {
		var last float64
		for _, x := range rec.xids {
			if x.ent == e.Key() {
				last = float64(x.xid)
			}
		}
		assert.Equal(t, last, rec.last(t, e, fieldid.XIDErrors), "the XID errors field holds the last XID")
	}
	sbe := 0.0
	for _, e := range gpuEntities(s) {
		sbe += rec.last(t, e, fieldid.ECCSBEVolTotal)
	}
	assert.True(t, sbe >= 15 && sbe <= 70, "%v SBE ECC errors in 192 GPU-hours, expected about 38", sbe)

	rec, s = simulate(0)
	assert.Empty(t, rec.xids)
	for _, e := range gpuEntities(s) {
		for _, f := range []uint16{fieldid.XIDErrors, fieldid.ECCSBEVolTotal, fieldid.ECCDBEVolTotal, fieldid.PCIeReplayCounter,
			fieldid.NVLinkCRCFlitErrorCountTotal, fieldid.ThermalViolation, fieldid.BoardLimitViolation} {
			assert.Zero(t, rec.last(t, e, f), "%s with EventRate 0", nameOf(f))
		}
	}
}

func TestXIDsReachTheSinkOnceWithExporterCountOnly(t *testing.T) {
	cfg := DefaultConfig()
	cfg.GPUs = 1
	cfg.EventRate = 500
	c := newClock()
	cfg.Now = c.Now
	s, err := New(cfg)
	require.NoError(t, err)
	xidCount := counters.Field{Name: "DCGM_EXP_XID_ERRORS_COUNT", ID: fieldid.ExpXIDErrorsCount, Type: counters.Counter}
	require.NoError(t, s.Watch([]source.Group{
		source.GroupOf(time.Second, []counters.Field{xidCount}),
		source.GroupOf(time.Second, fieldsOf(fieldid.XIDErrors)),
	}))
	rec := newRec()
	for i := 0; i < 3600; i++ {
		require.NoError(t, s.Collect(context.Background(), 0, rec))
		require.NoError(t, s.Collect(context.Background(), 1, rec))
		c.Add(time.Second)
	}
	assert.NotEmpty(t, rec.xids)
	seen := map[int64]bool{}
	for _, x := range rec.xids {
		assert.False(t, seen[x.ts], "event at %d handed over twice", x.ts)
		seen[x.ts] = true
	}
	assert.Empty(t, rec.unsup, "engine-derived fields are not unsupported")
}

func TestProcesses(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SharedGPUs = 2
	s, c := newSim(t, cfg, fieldid.FBUsed)
	rec := newRec()
	run(t, s, c, rec, 5*time.Second, 2*time.Minute)
	c.Add(-5 * time.Second) // back to the last sample's time
	procs := s.Processes()
	require.Len(t, procs, 8+2)
	perGPU := map[string][]source.Process{}
	pids := map[uint32]bool{}
	for _, p := range procs {
		perGPU[p.UUID] = append(perGPU[p.UUID], p)
		assert.False(t, pids[p.PID], "PID %d repeated", p.PID)
		pids[p.PID] = true
		assert.Equal(t, -1, p.GPUInstanceID)
		assert.Contains(t, []string{"/usr/bin/python3", "/opt/conda/bin/python3.11"}, p.Name, "a training job's or a notebook's interpreter")
	}
	for i, e := range gpuEntities(s) {
		ps := perGPU[e.UUID]
		want := 1
		if i < 2 {
			want = 2
		}
		require.Len(t, ps, want, "processes on GPU %d", i)
		var mem uint64
		for _, p := range ps {
			mem += p.UsedMemoryBytes
		}
		assert.Equal(t, uint64(rec.last(t, e, fieldid.FBUsed))*mib, mem, "process memory adds up to FB used on GPU %d", i)
	}

	cfg = DefaultConfig()
	cfg.GPUs, cfg.MIG = 1, "all"
	s, _ = newSim(t, cfg, fieldid.FBUsed)
	procs = s.Processes()
	require.Len(t, procs, 7)
	for k, p := range procs {
		assert.Equal(t, k+1, p.GPUInstanceID)
		assert.Equal(t, -1.0, p.SMUtil, "no per-process SM share inside a MIG instance, as with NVML")
	}
}

func TestStatusAndName(t *testing.T) {
	s, _ := newSim(t, DefaultConfig(), fieldid.GPUTemp)
	assert.Equal(t, "sim", s.Name())
	assert.True(t, s.Status().Up)
	assert.Equal(t, "gpuscope-sim", s.Hostname())
	var _ source.Source = s
	var _ source.ProcessLister = s
	assert.NoError(t, s.Close())

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, s.Collect(ctx, 0, newRec()), context.Canceled)
}

func TestCollectDoesNotAllocate(t *testing.T) {
	cfg := DefaultConfig()
	cfg.EventRate = 100
	s, c := newSim(t, cfg, FieldIDs()...)
	sink := &countSink{}
	run(t, s, c, sink, time.Second, 10*time.Second)
	allocs := testing.AllocsPerRun(200, func() {
		c.Add(100 * time.Millisecond)
		if err := s.Collect(context.Background(), 0, sink); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
	assert.Greater(t, sink.n, 0)
}

func BenchmarkCollect(b *testing.B) {
	cfg := DefaultConfig()
	s, c := newSim(b, cfg, FieldIDs()...)
	sink := &countSink{}
	run(b, s, c, sink, time.Second, 10*time.Second)
	n0 := sink.n
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.Add(100 * time.Millisecond)
		if err := s.Collect(context.Background(), 0, sink); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(sink.n-n0)/float64(b.N), "samples/op")
}

func TestIdleGPUs(t *testing.T) {
	cfg := DefaultConfig()
	cfg.GPUs = 2
	cfg.IdleGPUs = []int{1}
	s, c := newSim(t, cfg, fieldid.GPUUtil, fieldid.ProfSMActive, fieldid.ClocksEventReasons, fieldid.FBUsed, fieldid.PowerUsage)
	rec := newRec()
	run(t, s, c, rec, time.Second, 3*time.Minute)
	c.Add(-time.Second)
	gpus := gpuEntities(s)
	busy, idle := gpus[0], gpus[1]
	assert.Equal(t, 100.0, maxOf(rec.values[key{busy.Key(), fieldid.GPUUtil}]))
	assert.Equal(t, 0.0, maxOf(rec.values[key{idle.Key(), fieldid.GPUUtil}]))
	for _, v := range rec.values[key{idle.Key(), fieldid.ClocksEventReasons}] {
		require.NotZero(t, uint64(v.v)&reasonGPUIdle, "an idle GPU reports gpu_idle")
	}
	assert.Less(t, maxOf(rec.values[key{idle.Key(), fieldid.PowerUsage}]), 1.2*s.cfg.model.idleW)
	used := rec.last(t, idle, fieldid.FBUsed)
	assert.Equal(t, float64(contextMiB), used, "an idle GPU holds only a CUDA context")
	for _, p := range s.Processes() {
		if p.UUID == idle.UUID {
			assert.Equal(t, uint64(used)*mib, p.UsedMemoryBytes)
			assert.Zero(t, p.SMUtil)
		}
	}
}

func maxOf(s []sample) float64 {
	_, hi := minMax(s)
	return hi
}

// The sim reports health as DCGM does through dcgm-exporter: one result per
// watch, passing ones included.
func TestHealthIsOneResultPerWatch(t *testing.T) {
	cfg := DefaultConfig()
	cfg.GPUs = 1
	s, c := newSim(t, cfg, fieldid.ExpGPUHealthStatus)
	rec := newRec()
	run(t, s, c, rec, time.Second, time.Second)
	h := rec.health[s.gpus[0].ent.Key()]
	require.Len(t, h, len(source.HealthWatches))
	for i, r := range h {
		assert.Equal(t, source.HealthResult{Watch: source.HealthWatches[i], ErrorCode: "DCGM_FR_OK"}, r)
	}
	s.mu.Lock()
	s.event(s.gpus[0], evXID79, s.nowTick)
	s.mu.Unlock()
	run(t, s, c, rec, time.Second, time.Second)
	got := map[string]source.HealthResult{}
	for _, r := range rec.health[s.gpus[0].ent.Key()] {
		got[r.Watch] = r
	}
	assert.Equal(t, source.HealthResult{Watch: "ALL", ErrorCode: "DCGM_FR_XID_ERROR", Result: 20}, got["ALL"])
	assert.Equal(t, 0, got["MEM"].Result)
}

// With --sim-pods the GPUs do what their pods do: the training job's GPUs
// train near the power limit with most of the memory; a GPU no pod holds
// has no process, no memory in use and idle power; the notebook's GPU holds
// a third of the memory and runs little. HBM sits a few degrees above the
// die, and PCIe traffic follows activity.
func TestGPUsDoWhatTheirPodsDo(t *testing.T) {
	cfg := DefaultConfig()
	cfg.EventRate = 0
	cfg.IdleGPUs, cfg.LightGPUs, cfg.FreeGPUs = []int{5}, []int{4}, []int{6, 7}
	s, c := newSim(t, cfg, fieldid.PowerUsage, fieldid.FBUsed, fieldid.ProfSMActive, fieldid.GPUTemp, fieldid.MemoryTemp, fieldid.ProfPCIeRXBytes)
	rec := newRec()
	run(t, s, c, rec, time.Second, 3*time.Minute)
	gpus := gpuEntities(s)
	m := s.cfg.model
	usable := float64(m.fbTotal - m.fbReserved)

	train, light, free := gpus[0], gpus[4], gpus[6]
	assert.Greater(t, rec.last(t, train, fieldid.PowerUsage), 0.6*m.limitW, "training near the limit")
	assert.Greater(t, rec.last(t, train, fieldid.FBUsed), 0.7*usable)
	assert.Less(t, rec.last(t, free, fieldid.PowerUsage), m.idleW*1.2, "a free GPU idles")
	assert.Zero(t, rec.last(t, free, fieldid.FBUsed), "and holds no memory")
	assert.Zero(t, rec.last(t, free, fieldid.ProfPCIeRXBytes), "nor moves data")
	assert.InDelta(t, lightMemShare*usable, rec.last(t, light, fieldid.FBUsed), 2)
	assert.Less(t, rec.last(t, light, fieldid.ProfSMActive), 0.1, "the notebook does little")
	assert.Less(t, rec.last(t, light, fieldid.PowerUsage), 0.3*m.limitW)
	assert.Greater(t, rec.last(t, train, fieldid.ProfPCIeRXBytes), rec.last(t, light, fieldid.ProfPCIeRXBytes), "PCIe follows activity")
	for _, g := range []*source.Entity{train, free} {
		margin := rec.last(t, g, fieldid.MemoryTemp) - rec.last(t, g, fieldid.GPUTemp)
		assert.GreaterOrEqual(t, margin, 2.0, "HBM above the die on GPU %d", g.GPU)
		assert.LessOrEqual(t, margin, 12.0, "by a realistic margin on GPU %d", g.GPU)
	}
	for _, p := range s.Processes() {
		assert.NotEqual(t, free.UUID, p.UUID, "no process on a free GPU")
	}
}

// DCGM keeps the NVLink5 PPCNT counters per link entity, which dcgm-exporter
// exports in its link layout (internal/pkg/collector/gpu_collector.go,
// toGPUNvLinkMetric). The sim has no link entities, so it says so, for each
// GPU, and the catalog's table says why, rather than invent values.
func TestPerLinkFieldsAreUnsupportedWithAReason(t *testing.T) {
	cfg := DefaultConfig()
	cfg.GPUs = 2
	s, c := newSim(t, cfg, fieldid.NVLinkPPCNTPhysicalLinkDownCounter, fieldid.GPUTemp)
	rec := newRec()
	run(t, s, c, rec, time.Second, 3*time.Second)
	for _, e := range s.Entities() {
		k := key{e.Key(), fieldid.NVLinkPPCNTPhysicalLinkDownCounter}
		assert.Equal(t, 1, rec.unsup[k], e.Key())
		assert.Contains(t, rec.reasons[k], "PPCNT")
		assert.Empty(t, rec.values[k])
		assert.NotEmpty(t, rec.values[key{e.Key(), fieldid.GPUTemp}])
	}
	ok, note := Support().Reads(fieldid.NVLinkPPCNTPhysicalLinkDownCounter)
	assert.False(t, ok)
	assert.Equal(t, linkFieldNote, note)
	ok, note = Support().Reads(9999)
	assert.False(t, ok)
	assert.Empty(t, note, "an unknown field gets no link note")
}

// TestTrainingMemoryStaysUnderTheNearFullAlert: a healthy simulated fleet
// holds most of its memory but no GPU or MIG instance crosses 90%
// (used / (used + free), as GPUFramebufferRunningOut computes it), far from
// the 98% at which that alert reads memory as at the top, whatever the seed.
func TestTrainingMemoryStaysUnderTheNearFullAlert(t *testing.T) {
	for _, tc := range []struct{ name, mig string }{{"whole GPUs", ""}, {"MIG all", "all"}} {
		t.Run(tc.name, func(t *testing.T) {
			// Each GPU and instance draws its share from the seed, in a
			// range set apart from both bounds: 10 seeds are 80 draws of
			// whole GPUs, and more of instances.
			for seed := int64(1); seed <= 10; seed++ {
				cfg := DefaultConfig()
				cfg.Seed, cfg.MIG = seed, tc.mig
				s, c := newSim(t, cfg, fieldid.FBUsed, fieldid.FBFree)
				rec := newRec()
				run(t, s, c, rec, time.Minute, 15*time.Minute)
				for _, e := range s.Entities() {
					used, free := rec.last(t, e, fieldid.FBUsed), rec.last(t, e, fieldid.FBFree)
					require.Less(t, used/(used+free), 0.9, "seed %d, GPU %d instance %d", seed, e.GPU, e.GPUInstanceID)
					require.Greater(t, used/(used+free), 0.6, "seed %d, GPU %d instance %d: a training job holds most of its memory", seed, e.GPU, e.GPUInstanceID)
				}
			}
		})
	}
}

// DCGM_EXP_P2P_STATUS is one status per ordered pair of GPUs, as
// dcgm-exporter reads it from DCGM (internal/pkg/collector/
// p2p_status_collector.go): every GPU towards every other one, never towards
// itself; OK over NVLink, NotSupported on a model without NVLink.
func TestP2PStatusIsOnePerOrderedPair(t *testing.T) {
	for _, tc := range []struct {
		model  string
		status int
	}{{"h100", source.P2POK}, {"l4", source.P2PNotSupported}} {
		t.Run(tc.model, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.GPUs, cfg.Model = 4, tc.model
			s, c := newSim(t, cfg, fieldid.ExpP2PStatus)
			rec := newRec()
			run(t, s, c, rec, time.Second, time.Second)
			assert.Empty(t, rec.unsup)
			for _, g := range gpuEntities(s) {
				var want []source.P2PLink
				for peer := range 4 {
					if peer != g.GPU {
						want = append(want, source.P2PLink{Peer: peer, Status: tc.status})
					}
				}
				assert.Equal(t, want, rec.p2p[g.Key()], "GPU %d", g.GPU)
			}
		})
	}
}
