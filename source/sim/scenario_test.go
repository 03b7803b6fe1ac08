package sim

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
)

// played is a scenario sampled every step from its start: the values of
// each field on each entity, by GPU index and MIG instance ID (-1 for the
// GPU itself).
type played struct {
	step   time.Duration
	values map[[3]int][]float64 // GPU, instance, field -> value at each step
	unsup  map[[3]int]bool
	procs  []source.Process // at the end
	src    *Source
}

// play runs a scenario for total, collecting the fields every step.
func play(t *testing.T, name string, total, step time.Duration, ids ...uint16) *played {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Scenario, cfg.EventRate = name, 0
	s, c := newSim(t, cfg, ids...)
	p := &played{step: step, values: map[[3]int][]float64{}, unsup: map[[3]int]bool{}, src: s}
	sink := &playSink{p: p}
	for d := time.Duration(0); d <= total; d += step {
		require.NoError(t, s.Collect(context.Background(), 0, sink))
		c.Add(step)
	}
	p.procs = s.Processes()
	return p
}

type playSink struct {
	recSink
	p *played
}

func entKey(e *source.Entity, f uint16) [3]int {
	gi := -1
	if e.Kind == source.GPUInstance {
		gi = e.GPUInstanceID
	}
	return [3]int{e.GPU, gi, int(f)}
}

func (s *playSink) Value(e *source.Entity, f uint16, _ int64, v float64) {
	k := entKey(e, f)
	s.p.values[k] = append(s.p.values[k], v)
}
func (s *playSink) Unsupported(e *source.Entity, f uint16, _ string) { s.p.unsup[entKey(e, f)] = true }
func (s *playSink) Text(*source.Entity, uint16, string)              {}

// at is a field's value on GPU gpu (MIG instance gi, or -1) at time d.
func (p *played) at(t *testing.T, gpu, gi int, f uint16, d time.Duration) float64 {
	t.Helper()
	vals := p.values[[3]int{gpu, gi, int(f)}]
	i := int(d / p.step)
	require.Less(t, i, len(vals), "no %s on GPU %d/%d at %s", nameOf(f), gpu, gi, d)
	return vals[i]
}

// mean is a field's mean on GPU gpu over [from, to).
func (p *played) mean(t *testing.T, gpu, gi int, f uint16, from, to time.Duration) float64 {
	t.Helper()
	sum, n := 0.0, 0
	for d := from; d < to; d += p.step {
		sum += p.at(t, gpu, gi, f, d)
		n++
	}
	return sum / float64(n)
}

// drops counts the samples of a field on GPU gpu lower than the one before.
func (p *played) drops(gpu int, f uint16) int {
	vals := p.values[[3]int{gpu, -1, int(f)}]
	n := 0
	for i := 1; i < len(vals); i++ {
		if vals[i] < vals[i-1] {
			n++
		}
	}
	return n
}

var scenarioFields = []uint16{fieldid.GPUUtil, fieldid.FBUsed, fieldid.FBFree, fieldid.ProfGREngineActive, fieldid.ProfSMActive,
	fieldid.ProfDRAMActive, fieldid.ProfPipeTensorActive, fieldid.ProfNVLinkTXBytes, fieldid.PowerUsage, fieldid.PowerMgmtLimit,
	fieldid.GPUTemp, fieldid.FanSpeed, fieldid.ECCSBEVolTotal, fieldid.SMClock, fieldid.FabricHealthMask, fieldid.FabricHealthSummary}

func TestScenarioByNameListsTheNames(t *testing.T) {
	sc, err := ScenarioByName("zombie")
	require.NoError(t, err)
	assert.Equal(t, "zombie", sc.Name)
	_, err = ScenarioByName("zombies")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"zombies"`)
	for _, n := range ScenarioNames() {
		assert.Contains(t, err.Error(), n)
	}
	_, err = New(Config{Scenario: "nope"})
	assert.ErrorContains(t, err, "sim: Scenario: unknown scenario")
	_, err = New(Config{Scenario: "idle-pod", Workloads: []Workload{ComputeBound}})
	assert.ErrorContains(t, err, "lays out the node itself")
}

func TestScenarioOwners(t *testing.T) {
	owners := func(name string) map[[2]int]string {
		sc, err := ScenarioByName(name)
		require.NoError(t, err)
		out := map[[2]int]string{}
		for _, o := range sc.Owners() {
			out[[2]int{o.GPU, o.GPUInstanceID}] = o.Namespace + "/" + o.Pod + o.Job
		}
		return out
	}
	assert.Equal(t, map[[2]int]string{{0, -1}: "ml-training/llama-train-0", {1, -1}: "ml-training/llama-train-0", {2, -1}: "research/notebook-7f9c"},
		owners("idle-pod"), "GPU 3 is free")
	assert.Equal(t, map[[2]int]string{{0, -1}: "/4242", {1, -1}: "/4242", {2, -1}: "/4243"}, owners("slurm-idle"), "HPC jobs, no pods")
	assert.Equal(t, "research/notebook-7f9c", owners("mig-idle")[[2]int{0, 2}], "the idle MIG instance is the notebook's")
	assert.NotContains(t, owners("zombie"), [2]int{2, -1}, "no pod owns the zombie's GPU")
	for _, sc := range Scenarios() {
		assert.NotEmpty(t, sc.Summary, sc.Name)
		assert.Positive(t, sc.GPUs(), sc.Name)
	}
}

// TestTroublesShowTheirShape checks each trouble against its summary, on
// the fields an operator would read, and that the rest of the node is
// healthy.
func TestTroublesShowTheirShape(t *testing.T) {
	const min = time.Minute
	tests := []struct {
		name  string
		check func(t *testing.T, p *played)
	}{
		{"idle-pod", func(t *testing.T, p *played) {
			assert.Equal(t, 60.0*1024, p.at(t, 2, -1, fieldid.FBUsed, 150*min), "the notebook holds 60 GiB")
			assert.Zero(t, p.at(t, 2, -1, fieldid.GPUUtil, 150*min))
			assert.Less(t, p.at(t, 2, -1, fieldid.ProfGREngineActive, 150*min), 0.05)
			assert.Greater(t, p.mean(t, 0, -1, fieldid.GPUUtil, 60*min, 70*min), 80.0, "the training pod beside it works")
			assert.Zero(t, p.at(t, 3, -1, fieldid.FBUsed, 150*min), "GPU 3 is free")
		}},
		{"zombie", func(t *testing.T, p *played) {
			assert.Equal(t, 20.0*1024, p.at(t, 2, -1, fieldid.FBUsed, 150*min))
			assert.Zero(t, p.at(t, 2, -1, fieldid.GPUUtil, 150*min))
			var onGPU2 []source.Process
			for _, pr := range p.procs {
				if pr.UUID == p.src.gpus[2].ent.UUID {
					onGPU2 = append(onGPU2, pr)
				}
			}
			require.Len(t, onGPU2, 1, "NVML lists the zombie process")
			assert.Equal(t, uint64(20<<30), onGPU2[0].UsedMemoryBytes)
			assert.Equal(t, "/usr/local/bin/stale-inference-server", onGPU2[0].Name, "the leftover names itself apart from the training jobs")
		}},
		{"leak", func(t *testing.T, p *played) {
			grew := p.at(t, 2, -1, fieldid.FBUsed, 150*min) - p.at(t, 2, -1, fieldid.FBUsed, 90*min)
			assert.InDelta(t, 2.4*1024, grew, 300, "MiB grown in an hour")
			assert.GreaterOrEqual(t, p.drops(2, fieldid.FBUsed), 10, "the allocator hands memory back now and then")
			assert.Zero(t, p.drops(0, fieldid.FBUsed), "the training job's memory is level")
			assert.InDelta(t, p.mean(t, 2, -1, fieldid.ProfDRAMActive, 30*min, 40*min), p.mean(t, 2, -1, fieldid.ProfDRAMActive, 150*min, 160*min), 0.05,
				"the work stays level")
		}},
		{"fan-stopped", func(t *testing.T, p *played) {
			before, after := p.at(t, 1, -1, fieldid.GPUTemp, 39*min), p.at(t, 1, -1, fieldid.GPUTemp, 150*min)
			assert.GreaterOrEqual(t, after-before, 20.0, "the card heats without its fan: %v -> %v", before, after)
			assert.Less(t, after, 85.0, "but stays below GPUTemperatureHigh's threshold")
			assert.GreaterOrEqual(t, after-p.at(t, 0, -1, fieldid.GPUTemp, 150*min), 15.0, "hotter than its neighbour")
			fan, peer := p.at(t, 1, -1, fieldid.FanSpeed, 150*min), p.at(t, 0, -1, fieldid.FanSpeed, 150*min)
			assert.GreaterOrEqual(t, fan-peer, 30.0, "NVML reports the speed the driver asks of the dead fan: %v%% against %v%%", fan, peer)
			assert.InDelta(t, p.mean(t, 1, -1, fieldid.PowerUsage, 20*min, 30*min), p.mean(t, 1, -1, fieldid.PowerUsage, 140*min, 150*min), 40,
				"at the same power")
		}},
		{"ecc-rising", func(t *testing.T, p *played) {
			sbe := func(d time.Duration) float64 { return p.at(t, 2, -1, fieldid.ECCSBEVolTotal, d) }
			assert.Zero(t, sbe(40*min))
			assert.Greater(t, sbe(160*min)-sbe(100*min), sbe(100*min)-sbe(40*min), "faster and faster")
			assert.GreaterOrEqual(t, sbe(160*min)-sbe(100*min), 30.0)
			assert.Zero(t, p.at(t, 1, -1, fieldid.ECCSBEVolTotal, 170*min), "the other GPUs count none")
		}},
		{"collective-hang", func(t *testing.T, p *played) {
			assert.Greater(t, p.mean(t, 0, -1, fieldid.ProfSMActive, 70*min, 80*min), 0.5, "it trains first")
			for gpu := 0; gpu < 4; gpu++ {
				at := 150 * min
				assert.Equal(t, 100.0, p.at(t, gpu, -1, fieldid.GPUUtil, at), "GPU %d", gpu)
				assert.Less(t, p.at(t, gpu, -1, fieldid.ProfSMActive, at), 0.1, "GPU %d", gpu)
				assert.Less(t, p.at(t, gpu, -1, fieldid.ProfPipeTensorActive, at), 0.05, "GPU %d", gpu)
				assert.Zero(t, p.at(t, gpu, -1, fieldid.ProfNVLinkTXBytes, at), "GPU %d", gpu)
				assert.Less(t, p.at(t, gpu, -1, fieldid.PowerUsage, at), 0.3*p.at(t, gpu, -1, fieldid.PowerMgmtLimit, at), "GPU %d", gpu)
			}
		}},
		{"mig-idle", func(t *testing.T, p *played) {
			assert.Equal(t, 12.0*1024, p.at(t, 0, 2, fieldid.FBUsed, 150*min))
			assert.Less(t, p.at(t, 0, 2, fieldid.ProfGREngineActive, 150*min), 0.05)
			assert.Greater(t, p.mean(t, 0, 1, fieldid.ProfGREngineActive, 60*min, 70*min), 0.8, "its neighbours work")
			assert.Greater(t, p.mean(t, 0, 3, fieldid.ProfGREngineActive, 60*min, 70*min), 0.8)
			assert.True(t, p.unsup[[3]int{0, -1, int(fieldid.GPUUtil)}], "no GPU_UTIL on a MIG-enabled GPU")
		}},
		{"slurm-idle", func(t *testing.T, p *played) {
			assert.Equal(t, float64(contextMiB), p.at(t, 2, -1, fieldid.FBUsed, 150*min))
			assert.Zero(t, p.at(t, 2, -1, fieldid.GPUUtil, 150*min))
		}},
		{"power-imbalance", func(t *testing.T, p *played) {
			peer := (p.mean(t, 0, -1, fieldid.PowerUsage, 60*min, 70*min) + p.mean(t, 1, -1, fieldid.PowerUsage, 60*min, 70*min)) / 2
			ratio := p.mean(t, 2, -1, fieldid.PowerUsage, 60*min, 70*min) / peer
			assert.InDelta(t, 0.65, ratio, 0.07, "about 60%% of its peers' power above idle")
			assert.InDelta(t, p.mean(t, 0, -1, fieldid.ProfSMActive, 60*min, 70*min), p.mean(t, 2, -1, fieldid.ProfSMActive, 60*min, 70*min), 0.05,
				"for the same work")
			assert.Equal(t, 1410.0, p.at(t, 2, -1, fieldid.SMClock, 60*min), "its clocks are locked")
		}},
		{"overload", func(t *testing.T, p *played) {
			assert.Less(t, p.mean(t, 2, -1, fieldid.ProfSMActive, 10*min, 20*min), 0.8, "its usual load")
			assert.Greater(t, p.mean(t, 2, -1, fieldid.ProfSMActive, 120*min, 130*min), 0.93, "saturated")
			total := p.at(t, 2, -1, fieldid.FBUsed, 0) + p.at(t, 2, -1, fieldid.FBFree, 0)
			grew := p.at(t, 2, -1, fieldid.FBUsed, 120*min) - p.at(t, 2, -1, fieldid.FBUsed, 20*min)
			assert.Greater(t, grew, 0.25*total, "its batch and KV cache grew with the load")
		}},
		{"fabric-degraded", func(t *testing.T, p *played) {
			assert.Equal(t, float64(fabricHealthyMask), p.at(t, 2, -1, fieldid.FabricHealthMask, 39*min), "healthy at first")
			assert.Equal(t, 1.0, p.at(t, 2, -1, fieldid.FabricHealthSummary, 39*min))
			assert.Equal(t, float64(fabricDegradedMask), p.at(t, 2, -1, fieldid.FabricHealthMask, 41*min), "bandwidth degraded from 40 minutes")
			assert.Equal(t, 3.0, p.at(t, 2, -1, fieldid.FabricHealthSummary, 150*min), "limited capacity")
			for _, gpu := range []int{0, 1, 3} {
				assert.Equal(t, float64(fabricHealthyMask), p.at(t, gpu, -1, fieldid.FabricHealthMask, 150*min), "GPU %d", gpu)
				assert.Equal(t, 1.0, p.at(t, gpu, -1, fieldid.FabricHealthSummary, 150*min), "GPU %d", gpu)
			}
			assert.Greater(t, p.mean(t, 2, -1, fieldid.GPUUtil, 60*min, 170*min), 80.0, "the job trains on")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.check(t, play(t, tc.name, 3*time.Hour, 10*time.Second, scenarioFields...))
		})
	}
}

// TestControlsStayHealthy checks the healthy controls against their
// summaries.
func TestControlsStayHealthy(t *testing.T) {
	const min = time.Minute
	tests := []struct {
		name  string
		check func(t *testing.T, p *played)
	}{
		{"healthy-training", func(t *testing.T, p *played) {
			for gpu := 0; gpu < 4; gpu++ {
				assert.Greater(t, p.mean(t, gpu, -1, fieldid.GPUUtil, 30*min, 170*min), 80.0, "GPU %d", gpu)
			}
		}},
		{"checkpoint", func(t *testing.T, p *played) {
			assert.Less(t, p.mean(t, 0, -1, fieldid.GPUUtil, 46*min, 48*min), 5.0, "paused for the checkpoint")
			assert.Greater(t, p.mean(t, 0, -1, fieldid.GPUUtil, 50*min, 60*min), 80.0, "then trains again")
			assert.Equal(t, p.at(t, 0, -1, fieldid.FBUsed, 40*min), p.at(t, 0, -1, fieldid.FBUsed, 47*min), "holding its memory")
		}},
		{"model-loading", func(t *testing.T, p *played) {
			total := p.at(t, 0, -1, fieldid.FBUsed, 0) + p.at(t, 0, -1, fieldid.FBFree, 0)
			assert.Less(t, p.at(t, 0, -1, fieldid.FBUsed, 4*min), 0.5*total, "loading")
			assert.Less(t, p.mean(t, 0, -1, fieldid.ProfSMActive, 0, 7*min), 0.2)
			assert.Greater(t, p.at(t, 0, -1, fieldid.FBUsed, 20*min), 0.75*total, "then allocated")
			assert.Greater(t, p.mean(t, 0, -1, fieldid.GPUUtil, 20*min, 30*min), 80.0, "and training")
		}},
		{"bursty-inference", func(t *testing.T, p *played) {
			busy, n := 0, 0
			for d := 0 * min; d < 30*min; d += p.step {
				if p.at(t, 0, -1, fieldid.GPUUtil, d) > 50 {
					busy++
				}
				n++
			}
			share := float64(busy) / float64(n)
			assert.Greater(t, share, 0.1, "bursts of requests")
			assert.Less(t, share, 0.5, "idle between them")
			assert.Zero(t, p.mean(t, 0, -1, fieldid.GPUUtil, 31*min, 39*min), "a lull")
			total := p.at(t, 0, -1, fieldid.FBUsed, 0) + p.at(t, 0, -1, fieldid.FBFree, 0)
			assert.InDelta(t, 0.85, p.at(t, 0, -1, fieldid.FBUsed, 60*min)/total, 0.01, "preallocated")
		}},
		{"free-idle", func(t *testing.T, p *played) {
			for gpu := 0; gpu < 4; gpu++ {
				assert.Zero(t, p.at(t, gpu, -1, fieldid.FBUsed, 60*min), "GPU %d", gpu)
				assert.Zero(t, p.at(t, gpu, -1, fieldid.GPUUtil, 60*min), "GPU %d", gpu)
			}
			assert.Empty(t, p.procs)
		}},
		{"gpu-reset", func(t *testing.T, p *played) {
			assert.Positive(t, p.at(t, 2, -1, fieldid.ECCSBEVolTotal, 60*min), "corrected errors before the reset")
			assert.Zero(t, p.at(t, 2, -1, fieldid.ECCSBEVolTotal, 63*min), "which the reset clears")
			assert.Zero(t, p.at(t, 2, -1, fieldid.FBUsed, 61*min), "nothing runs across the reset")
			assert.Greater(t, p.mean(t, 2, -1, fieldid.GPUUtil, 80*min, 90*min), 80.0, "then the job trains again")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.check(t, play(t, tc.name, 3*time.Hour, 10*time.Second, scenarioFields...))
		})
	}
}

// TestScenariosReplay holds a scenario to its promise: the same seed gives
// the same node, value for value.
func TestScenariosReplay(t *testing.T) {
	a := play(t, "leak", 10*time.Minute, 10*time.Second, fieldid.FBUsed, fieldid.ProfSMActive)
	b := play(t, "leak", 10*time.Minute, 10*time.Second, fieldid.FBUsed, fieldid.ProfSMActive)
	assert.Equal(t, a.values, b.values)
	assert.Equal(t, fmt.Sprint(a.procs), fmt.Sprint(b.procs))
}
