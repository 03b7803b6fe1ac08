package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseWorkloads(t *testing.T) {
	tests := []struct {
		spec    string
		n       int
		want    []Workload
		wantErr string
	}{
		{"mixed", 6, []Workload{ComputeBound, MemoryBound, CommunicationBound, InputBound, IdleAllocated, ComputeBound}, ""},
		{"", 2, []Workload{ComputeBound, MemoryBound}, ""},
		{"input", 3, []Workload{InputBound, InputBound, InputBound}, ""},
		{"compute, idle", 2, []Workload{ComputeBound, IdleAllocated}, ""},
		{"data-parallel", 1, []Workload{DataParallel}, ""},
		{"compute,idle", 3, nil, "give one kind for every GPU or 3 kinds"},
		{"gaming", 2, nil, `unknown kind "gaming"`},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := ParseWorkloads(tt.spec, tt.n)
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

func TestWorkloadConfigErrorsNameTheField(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"count", func(c *Config) { c.GPUs, c.Workloads = 2, []Workload{ComputeBound} }, "Workloads: 1 given for 2 GPUs"},
		{"kind", func(c *Config) { c.GPUs, c.Workloads = 1, []Workload{"gaming"} }, `GPU 0: unknown kind "gaming"`},
		{"MIG count", func(c *Config) { c.GPUs, c.MIG, c.Workloads = 1, "all", []Workload{ComputeBound} }, "1 given for 7 MIG instances (1 GPUs x 7)"},
		{"MIG communication", func(c *Config) {
			c.GPUs, c.MIG, c.Workloads = 1, "3g.40gb,4g.40gb", []Workload{ComputeBound, CommunicationBound}
		}, "MIG instance 1: communication does not run on a MIG instance"},
		{"jitter", func(c *Config) { c.StepJitter = 0.9 }, "StepJitter 0.9"},
		{"noise", func(c *Config) { c.Noise = -1 }, "Noise -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.mod(&cfg)
			_, err := New(cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestKindTruthMatchesTheActivity checks the truth a kind states against
// its own instantaneous activity over many steps: the share of time below
// the stall level and the share spent in the kind's first phase.
func TestKindTruthMatchesTheActivity(t *testing.T) {
	for _, k := range Kinds() {
		t.Run(string(k), func(t *testing.T) {
			j := newKindJob(k, 7, 5000, 0)
			tr := j.truth()
			const n = 200_000
			low := 0
			for i := 0; i < n; i++ {
				a := j.instant(float64(i) * 0.001)
				if a.sm < 0.1 {
					low++
				}
			}
			switch k {
			case InputBound:
				assert.InDelta(t, tr.StallShare, float64(low)/n, 0.01)
			case IdleAllocated:
				assert.Equal(t, n, low)
			default:
				assert.Zero(t, low)
			}
		})
	}
}
