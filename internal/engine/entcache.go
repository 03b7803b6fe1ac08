package engine

import (
	"unsafe"

	"github.com/gpuscope/gpuscope/source"
)

// entityCacheBits sizes entityCache: 256 slots, a few times the entities
// of a large node (8 GPUs with 7 MIG instances each, their compute
// instances and NVSwitches), in 4 KiB.
const entityCacheBits = 8

// entityCache finds the state of the entity a sample belongs to by its
// pointer, the work a map lookup does (hashing the key, probing a group)
// for every sample, in a multiplication and one comparison: a source
// hands over a field for every entity in turn, so the state changes from
// one sample to the next. A slot holds the last entity whose pointer hashed
// to it; a miss asks the map. It is emptied whenever the map is replaced,
// and used under the engine's lock.
type entityCache struct {
	slots [1 << entityCacheBits]struct {
		e  *source.Entity
		es *entityState
	}
}

// get returns m[e], from the slot of e when it holds e.
func (c *entityCache) get(e *source.Entity, m map[*source.Entity]*entityState) *entityState {
	// The pointer is only hashed, never turned back into one.
	h := uint64(uintptr(unsafe.Pointer(e))) * 0x9e3779b97f4a7c15 >> (64 - entityCacheBits)
	s := &c.slots[h]
	if s.e != e || e == nil {
		s.e, s.es = e, m[e]
	}
	return s.es
}

// reset empties the cache, for a new map.
func (c *entityCache) reset() { *c = entityCache{} }
