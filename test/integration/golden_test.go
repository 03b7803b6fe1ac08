package integration

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/source/sim"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestGoldenExpositionOfSeededSim pins the exposition of a seeded simulated
// node: names, labels, types, help texts, window statistics and values. A
// change here is a change users see; regenerate with
// `go test ./test/integration -run Golden -update` and review the diff.
func TestGoldenExpositionOfSeededSim(t *testing.T) {
	clk := newClock()
	cfg := sim.DefaultConfig()
	cfg.GPUs, cfg.Seed, cfg.Now, cfg.Hostname = 2, 42, clk.Now, "golden-node"
	src, err := sim.New(cfg)
	require.NoError(t, err)
	e, err := engine.New(engine.Options{
		Source: src, Counters: dcpSet(t), DefaultInterval: time.Second, Window: 2 * time.Second,
		Hostname: "golden-node", Now: clk.Now, Log: quietLog(),
	})
	require.NoError(t, err)
	require.NoError(t, e.Open())
	for range 30 {
		clk.Add(100 * time.Millisecond)
		require.NoError(t, e.CollectAll(context.Background()))
	}
	got := e.Render(nil)
	parse(t, got)

	path := filepath.Join("testdata", "sim-seed42.prom")
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run with -update to create the golden file")
	require.Equal(t, string(want), string(got), "exposition differs from %s; rerun with -update if the change is intended", path)
}
