package sim

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
)

func TestParseMIGWorkloads(t *testing.T) {
	tests := []struct {
		spec    string
		gpus    int
		layout  string
		want    []Workload
		wantErr string
	}{
		{"mixed", 2, "3g.40gb,4g.40gb", []Workload{ComputeBound, MemoryBound, InputBound, IdleAllocated}, ""},
		{"mixed", 1, "7x1g.10gb", []Workload{ComputeBound, MemoryBound, InputBound, IdleAllocated, ComputeBound, MemoryBound, InputBound}, ""},
		{"memory", 1, "2x3g.40gb", []Workload{MemoryBound, MemoryBound}, ""},
		{"compute,data-parallel", 1, "2x3g.40gb", []Workload{ComputeBound, DataParallel}, ""},
		{"compute,idle,input", 1, "2x3g.40gb", nil, "give one kind for every GPU or 2 kinds"},
		{"communication", 1, "2x3g.40gb", nil, "communication does not run on a MIG instance"},
		{"compute", 1, "9x1g.10gb", nil, "layout needs"},
	}
	for _, tt := range tests {
		t.Run(tt.spec+" on "+tt.layout, func(t *testing.T) {
			got, err := ParseMIGWorkloads(tt.spec, tt.gpus, "h100", tt.layout)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// Each MIG instance runs its own kind: its profiling fields follow that
// kind (a compute-bound instance keeps its tensor pipe busy while its
// memory-bound neighbour keeps DRAM busy), and its truth says so.
func TestMIGInstancesRunTheirOwnKinds(t *testing.T) {
	cfg := DefaultConfig()
	cfg.GPUs, cfg.MIG, cfg.EventRate = 1, "3g.40gb,4g.40gb", 0
	cfg.Workloads = []Workload{ComputeBound, MemoryBound}
	s, c := newSim(t, cfg, fieldid.ProfPipeTensorActive, fieldid.ProfDRAMActive)
	rec := newRec()
	run(t, s, c, rec, 100*time.Millisecond, 30*time.Second)
	var inst []*source.Entity
	for _, e := range s.Entities() {
		if e.Kind == source.GPUInstance {
			inst = append(inst, e)
		}
	}
	require.Len(t, inst, 2)
	mean := func(e *source.Entity, f uint16) float64 {
		vs := rec.values[key{e.Key(), f}]
		require.NotEmpty(t, vs)
		sum := 0.0
		for _, v := range vs {
			sum += v.v
		}
		return sum / float64(len(vs))
	}
	assert.Greater(t, mean(inst[0], fieldid.ProfPipeTensorActive), 0.5, "the compute-bound instance")
	assert.Less(t, mean(inst[1], fieldid.ProfPipeTensorActive), 0.2, "the memory-bound instance")
	assert.Greater(t, mean(inst[1], fieldid.ProfDRAMActive), 0.7)

	tr, ok := s.InstanceTruth(0, 0)
	require.True(t, ok)
	assert.Equal(t, "compute", tr.Bound)
	assert.Greater(t, tr.Period, 0.0)
	tr, ok = s.InstanceTruth(0, 1)
	require.True(t, ok)
	assert.Equal(t, "memory", tr.Bound)
	assert.Zero(t, tr.Period)
	_, ok = s.InstanceTruth(0, 2)
	assert.False(t, ok, "no third instance")
	assert.False(t, math.IsNaN(tr.BoundShare))
}
