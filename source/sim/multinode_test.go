package sim

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
)

var linkFields = []uint16{fieldid.GPUUtil, fieldid.ProfSMActive, fieldid.PowerUsage,
	fieldid.PCIeLinkGen, fieldid.PCIeMaxLinkGen, fieldid.PCIeLinkWidth, fieldid.PCIeMaxLinkWidth}

// A scenario across nodes is named NAME/INDEX, one gpuscope per node; the
// name alone is node 0, and a node out of range says how many there are.
func TestScenarioByNameTakesTheNode(t *testing.T) {
	tests := []struct {
		name, wantErr string
		host          int
	}{
		{name: "multinode-straggler", host: 0},
		{name: "multinode-straggler/3", host: 3},
		{name: " multinode-healthy/2 ", host: 2},
		{name: "multinode-straggler/4", wantErr: "spans 4 node(s), numbered 0 to 3"},
		{name: "multinode-straggler/-1", wantErr: "spans 4 node(s)"},
		{name: "multinode-straggler/x", wantErr: `node "x"`},
		{name: "zombie/1", wantErr: "spans 1 node(s), numbered 0 to 0"},
		{name: "nope/1", wantErr: "unknown scenario"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := ScenarioByName(tc.name)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.host, sc.Host())
		})
	}
}

// Each node of a job across nodes holds its own rank of the same job, on
// GPUs of its own: other pods, other UUIDs, the same steps.
func TestNodesOfAJobAcrossNodes(t *testing.T) {
	var pods []string
	uuids := map[string]bool{}
	for _, name := range []string{"multinode-power-capped/0", "multinode-power-capped/1", "multinode-power-capped/2"} {
		sc, err := ScenarioByName(name)
		require.NoError(t, err)
		owners := sc.Owners()
		require.Len(t, owners, 4, name)
		pods = append(pods, owners[0].Pod)
		cfg := DefaultConfig()
		cfg.Scenario, cfg.EventRate = name, 0
		s, _ := newSim(t, cfg, fieldid.GPUUtil)
		for _, e := range gpuEntities(s) {
			assert.False(t, uuids[e.UUID], "%s: UUID %s of another node", name, e.UUID)
			uuids[e.UUID] = true
		}
	}
	assert.Equal(t, []string{"pt-llama-worker-0", "pt-llama-worker-1", "pt-llama-worker-2"}, pods)
}

func TestMultinodeScenarios(t *testing.T) {
	const min = time.Minute
	nodePower := func(t *testing.T, p *played, gpus int) float64 {
		sum := 0.0
		for g := range gpus {
			sum += p.mean(t, g, -1, fieldid.PowerUsage, 60*min, 70*min)
		}
		return sum / float64(gpus)
	}
	t.Run("multinode-straggler", func(t *testing.T) {
		t.Parallel()
		slow := play(t, "multinode-straggler/2", 75*min, 10*time.Second, linkFields...)
		for _, n := range []string{"multinode-straggler/0", "multinode-straggler/1", "multinode-straggler/3"} {
			peer := play(t, n, 75*min, 10*time.Second, linkFields...)
			assert.InDelta(t, 0.65, nodePower(t, slow, 1)/nodePower(t, peer, 1), 0.1, "%s: node 2 draws about 65%% of its power", n)
			assert.InDelta(t, peer.mean(t, 0, -1, fieldid.ProfSMActive, 60*min, 70*min), slow.mean(t, 0, -1, fieldid.ProfSMActive, 60*min, 70*min), 0.05,
				"%s: for the same work", n)
		}
	})
	t.Run("multinode-power-capped", func(t *testing.T) {
		t.Parallel()
		capped := play(t, "multinode-power-capped/1", 75*min, 10*time.Second, linkFields...)
		peer := play(t, "multinode-power-capped/0", 75*min, 10*time.Second, linkFields...)
		assert.InDelta(t, 0.65, nodePower(t, capped, 4)/nodePower(t, peer, 4), 0.1, "node 1 draws about 65% of node 0's power")
		for g := 1; g < 4; g++ {
			assert.InEpsilon(t, capped.mean(t, 0, -1, fieldid.PowerUsage, 60*min, 70*min), capped.mean(t, g, -1, fieldid.PowerUsage, 60*min, 70*min), 0.15,
				"node 1's GPUs are even among themselves: GPU %d", g)
		}
	})
	t.Run("multinode-healthy", func(t *testing.T) {
		t.Parallel()
		var all []float64
		for _, n := range []string{"multinode-healthy/0", "multinode-healthy/1", "multinode-healthy/2"} {
			p := play(t, n, 75*min, 10*time.Second, linkFields...)
			for g := range 4 {
				all = append(all, p.mean(t, g, -1, fieldid.PowerUsage, 60*min, 70*min))
			}
		}
		lo, hi := slices.Min(all), slices.Max(all)
		assert.Greater(t, hi/lo, 1.05, "GPUs of one model spread in power")
		assert.Less(t, hi/lo, 1.2, "by a few percent")
	})
}

// The PCIe link as the captures show it: a GeForce card at generation 1
// while idle and at its maximum while it works; a link that lost lanes
// reads them, whatever the load.
func TestPCIeLinkScenarios(t *testing.T) {
	const min = time.Minute
	t.Run("consumer-idle", func(t *testing.T) {
		p := play(t, "consumer-idle", 30*min, 10*time.Second, linkFields...)
		assert.Equal(t, 1.0, p.at(t, 0, -1, fieldid.PCIeLinkGen, 20*min), "idle at generation 1")
		assert.Equal(t, 4.0, p.at(t, 0, -1, fieldid.PCIeMaxLinkGen, 20*min), "of 4")
		assert.Greater(t, p.mean(t, 1, -1, fieldid.GPUUtil, 20*min, 30*min), 80.0, "the other card trains")
		assert.Equal(t, 4.0, p.at(t, 1, -1, fieldid.PCIeLinkGen, 20*min), "at generation 4")
		assert.Equal(t, 16.0, p.at(t, 0, -1, fieldid.PCIeLinkWidth, 20*min), "no card narrows its link at rest")
	})
	t.Run("pcie-x8", func(t *testing.T) {
		p := play(t, "pcie-x8", 30*min, 10*time.Second, linkFields...)
		assert.Equal(t, 8.0, p.at(t, 2, -1, fieldid.PCIeLinkWidth, 20*min), "x8")
		assert.Equal(t, 16.0, p.at(t, 2, -1, fieldid.PCIeMaxLinkWidth, 20*min), "of x16")
		assert.Equal(t, 5.0, p.at(t, 2, -1, fieldid.PCIeLinkGen, 20*min), "at its generation")
		assert.Equal(t, 16.0, p.at(t, 0, -1, fieldid.PCIeLinkWidth, 20*min), "its neighbours keep x16")
		assert.Greater(t, p.mean(t, 2, -1, fieldid.GPUUtil, 20*min, 30*min), 80.0, "it trains")
	})
	t.Run("pcie-gen-low", func(t *testing.T) {
		p := play(t, "pcie-gen-low", 30*min, 10*time.Second, linkFields...)
		assert.Equal(t, 3.0, p.at(t, 2, -1, fieldid.PCIeLinkGen, 20*min), "generation 3")
		assert.Equal(t, 5.0, p.at(t, 2, -1, fieldid.PCIeMaxLinkGen, 20*min), "of 5")
		assert.Equal(t, 16.0, p.at(t, 2, -1, fieldid.PCIeLinkWidth, 20*min), "at its width")
		assert.Equal(t, 5.0, p.at(t, 0, -1, fieldid.PCIeLinkGen, 20*min), "its neighbours keep generation 5")
		assert.Greater(t, p.mean(t, 2, -1, fieldid.GPUUtil, 20*min, 30*min), 80.0, "it trains")
	})
}
