package engine

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/source"
)

// TestEntityCacheAnswersAsTheMap: the cache gives the map's state for every
// entity, in any order, with more entities than slots (so that slots are
// shared), for entities the map lacks, and after the map is replaced.
func TestEntityCacheAnswersAsTheMap(t *testing.T) {
	tests := []struct {
		name     string
		entities int
		lookups  int
	}{
		{"a node's entities", 64, 10000},
		{"more entities than slots", 4 << entityCacheBits, 50000},
		{"one entity", 1, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(tt.entities)))
			ents := make([]*source.Entity, tt.entities)
			m := map[*source.Entity]*entityState{}
			for i := range ents {
				ents[i] = &source.Entity{GPU: i}
				if i%5 != 4 { // some entities are not in the map
					m[ents[i]] = &entityState{key: ents[i].Key()}
				}
			}
			var c entityCache
			for range tt.lookups {
				e := ents[rng.IntN(len(ents))]
				require.Same(t, m[e], c.get(e, m))
			}
			// A new map with new states: reset forgets the old ones.
			m2 := map[*source.Entity]*entityState{}
			for _, e := range ents {
				m2[e] = &entityState{}
			}
			c.reset()
			for _, e := range ents {
				require.Same(t, m2[e], c.get(e, m2))
			}
			require.Nil(t, c.get(nil, m2))
		})
	}
}
