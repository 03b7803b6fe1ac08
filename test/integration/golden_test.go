package integration

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/source/sim"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestGoldenExpositionOfSeededSim pins the exposition of a seeded simulated
// node in both label layouts, dcgm-exporter's and nvidia_gpu_exporter's:
// names, labels, types, help texts, window statistics and values. A change
// here is a change users see; regenerate with
// `go test ./test/integration -run Golden -update` and review the diff.
// test/exposition lints these files with promtool and checks that
// docs/metrics.md documents their families.
func TestGoldenExpositionOfSeededSim(t *testing.T) {
	for _, tc := range []struct {
		golden string
		set    func(testing.TB) *counters.Set
	}{
		{"sim-seed42.prom", dcpSet},
		{"sim-seed42-nvidia-gpu-exporter.prom", nvidiaGPUExporterSet},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			got := renderSeededSim(t, tc.set(t))
			parse(t, got)
			path := filepath.Join("testdata", tc.golden)
			if *update {
				require.NoError(t, os.WriteFile(path, got, 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run with -update to create the golden file")
			require.Equal(t, string(want), string(got), "exposition differs from %s; rerun with -update if the change is intended", path)
		})
	}
}

// renderSeededSim renders two simulated GPUs of seed 42 after 3 s of
// collections every 100 ms.
func renderSeededSim(t *testing.T, set *counters.Set) []byte {
	t.Helper()
	clk := newClock()
	cfg := sim.DefaultConfig()
	cfg.GPUs, cfg.Seed, cfg.Now, cfg.Hostname = 2, 42, clk.Now, "golden-node"
	src, err := sim.New(cfg)
	require.NoError(t, err)
	e, err := engine.New(engine.Options{
		Source: src, Counters: set, DefaultInterval: time.Second, Window: 2 * time.Second,
		Hostname: "golden-node", Now: clk.Now, Log: quietLog(),
	})
	require.NoError(t, err)
	require.NoError(t, e.Open())
	for range 30 {
		clk.Add(100 * time.Millisecond)
		require.NoError(t, e.CollectAll(context.Background()))
	}
	return e.Render(nil)
}

// nvidiaGPUExporterSet is etc/nvidia-gpu-exporter.csv, which switches the
// engine to nvidia_gpu_exporter's label layout.
func nvidiaGPUExporterSet(t testing.TB) *counters.Set {
	t.Helper()
	set, err := counters.Load(filepath.Join("..", "..", "etc", "nvidia-gpu-exporter.csv"))
	require.NoError(t, err)
	return set
}
