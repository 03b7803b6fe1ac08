package engine

import (
	"fmt"

	"github.com/gpuscope/gpuscope/source"
)

func (e *Engine) pollStatus() {
	st := e.src.Status()
	e.mu.Lock()
	defer e.mu.Unlock()
	lost := make(map[string]bool, len(st.Lost))
	for _, k := range st.Lost {
		lost[k] = true
	}
	for _, es := range e.order {
		es.lost = lost[es.key]
	}
	e.status = st
	e.statusAt = e.opts.Now()
}

// Ready says whether the source is up and the first sample is in, and why
// not when it is not.
func (e *Engine) Ready() (bool, string) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	switch {
	case !e.status.Up && e.status.Err != nil:
		return false, fmt.Sprintf("source %s is down: %v", e.sourceName(), e.status.Err)
	case !e.status.Up:
		return false, fmt.Sprintf("source %s is down", e.sourceName())
	case !e.sampled:
		return false, "waiting for the first sample"
	}
	return true, fmt.Sprintf("source %s is up", e.sourceName())
}

func (e *Engine) sourceName() string {
	if e.status.Active != "" {
		return e.status.Active
	}
	return e.src.Name()
}

// Status returns the source status as last polled.
func (e *Engine) Status() source.Status {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.status
}
