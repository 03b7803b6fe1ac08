package engine

import "github.com/gpuscope/gpuscope/counters"

// Counters returns the counters file the engine runs now: the last one a
// reload accepted.
func (e *Engine) Counters() *counters.Set {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.plan == nil {
		return nil
	}
	return e.plan.set
}
