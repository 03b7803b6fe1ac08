// Package logonce remembers which conditions were logged, so that one that
// repeats at every refresh (an unknown device ID, a bad mapping file) is
// logged the first time only. The set is bounded: once full, new keys are
// no longer logged, so a flood of distinct keys cannot grow memory.
package logonce

import "sync"

// Set is a bounded set of logged keys; the zero value is not usable.
type Set struct {
	mu   sync.Mutex
	seen map[string]struct{}
	max  int
}

// New returns a set that remembers at most max keys.
func New(max int) *Set { return &Set{seen: map[string]struct{}{}, max: max} }

// Do calls log the first time key is seen, while the set has room.
func (s *Set) Do(key string, log func()) {
	s.mu.Lock()
	_, seen := s.seen[key]
	first := !seen && len(s.seen) < s.max
	if first {
		s.seen[key] = struct{}{}
	}
	s.mu.Unlock()
	if first {
		log()
	}
}

// Len is the number of keys remembered.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}
