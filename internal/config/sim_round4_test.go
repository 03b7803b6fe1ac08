package config

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/source/sim"
)

// TestSimGPUsRound4OutOfRange (round 4, item 16): --sim-gpus -1 panicked
// (makeslice) and 0 silently ran 8 GPUs, where 100000 was refused; every
// value out of 1..MaxGPUs is refused naming the flag, with or without a
// workload or MIG layout that reads it.
func TestSimGPUsRound4OutOfRange(t *testing.T) {
	want := fmt.Sprintf("must be between 1 and %d", sim.MaxGPUs)
	for _, n := range []int{-1, 0, sim.MaxGPUs + 1, 100000} {
		for _, extra := range []struct {
			name string
			edit func(*Input)
		}{
			{"alone", func(*Input) {}},
			{"with a workload", func(in *Input) { in.SimWorkload = "compute" }},
			{"with MIG GPUs", func(in *Input) { in.SimMIG, in.SimMIGGPUs = "all", "0" }},
		} {
			t.Run(fmt.Sprintf("%d %s", n, extra.name), func(t *testing.T) {
				var err error
				require.NotPanics(t, func() {
					_, err = Build(input(func(in *Input) {
						in.Source, in.SimGPUs = "sim", n
						extra.edit(in)
					}))
				})
				require.Error(t, err)
				assert.Contains(t, err.Error(), "--sim-gpus")
				assert.Contains(t, err.Error(), want)
			})
		}
	}
	_, err := Build(input(func(in *Input) { in.Source, in.SimGPUs = "sim", 1 }))
	require.NoError(t, err)
}
