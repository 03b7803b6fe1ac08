package window

import (
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// multisetDriver drives a multiset as a ring does: samples held back up to
// pendingMax at a time, the oldest leaving first whether merged or not.
type multisetDriver struct {
	b      multiset
	window []heldSample // oldest first
	seq    uint32
	drop   uint32
}

type heldSample struct {
	v      float64
	seq    uint32
	merged bool
}

func (d *multisetDriver) pending() []float64 {
	var vals []float64
	for _, s := range d.window {
		if !s.merged {
			vals = append(vals, s.v)
		}
	}
	return vals
}

func (d *multisetDriver) merge() {
	var add []entry
	for i, s := range d.window {
		if !s.merged {
			add = append(add, entry{v: s.v, seq: s.seq})
			d.window[i].merged = true
		}
	}
	d.b.merge(add, d.drop)
}

func (d *multisetDriver) push(v float64) {
	if len(d.pending()) == pendingMax {
		d.merge()
	}
	d.seq++
	d.window = append(d.window, heldSample{v: v, seq: d.seq})
}

func (d *multisetDriver) leave() {
	old := d.window[0]
	if old.merged {
		if d.b.nd == pendingMax {
			d.merge()
		}
		d.b.left(old.v)
	}
	d.drop = old.seq
	d.window = d.window[1:]
}

// TestMultisetMatchesSortedReference checks every rank of a multiset's view, with
// up to maxExcluded of the oldest values left out, against sorting the
// same values: random, repeated, monotone and mixed-size values, in
// windows that grow, hold steady and shrink to nothing.
func TestMultisetMatchesSortedReference(t *testing.T) {
	rng := rand.New(rand.NewSource(21))
	tests := finiteValues(rng)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d multisetDriver
			for step := 0; step < 2500; step++ {
				// The window's size swings between 0 and 200 samples.
				size := max(0, int(90+110*math.Sin(float64(step)/120)))
				if len(d.window) < size || rng.Intn(4) == 0 {
					d.push(tt.gen(step))
				}
				for len(d.window) > size {
					d.leave()
				}
				out := min(len(d.window), rng.Intn(maxExcluded+1))
				checkView(t, &d, out, step)
			}
		})
	}
}

// checkView compares the view of d's multiset, less the values of its out
// oldest samples, with the sorted values of the rest.
func checkView(t *testing.T, d *multisetDriver, out, step int) {
	t.Helper()
	var want, left []float64
	for i, s := range d.window {
		if i < out {
			left = append(left, s.v)
		} else {
			want = append(want, s.v)
		}
	}
	slices.Sort(want)
	var v multisetView
	require.True(t, d.b.view(d.pending(), left, &v), "step %d", step)
	require.Equal(t, len(want), v.size(), "step %d", step)
	for k, w := range want {
		require.Equal(t, w, v.rank(k), "step %d rank %d of %d", step, k, len(want))
	}
}

// TestMultisetViewRefusesValuesItLacks: a read that leaves out a value the multiset
// does not hold says so, and the ring reads its samples instead.
func TestMultisetViewRefusesValuesItLacks(t *testing.T) {
	var d multisetDriver
	for i := range 40 {
		d.push(float64(i))
	}
	var v multisetView
	require.True(t, d.b.view(d.pending(), []float64{3}, &v))
	require.False(t, d.b.view(d.pending(), []float64{3.5}, &v))
}
