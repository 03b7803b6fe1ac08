package engine

import (
	"context"
	"fmt"
)

func (e *Engine) open() error {
	e.collectMu.Lock()
	err := e.src.Watch(e.plan.groups)
	e.collectMu.Unlock()
	if err != nil {
		return fmt.Errorf("watching %d field groups on source %s: %w", len(e.plan.groups), e.src.Name(), err)
	}
	e.refreshEntities()
	e.pollStatus()
	return nil
}

// Open watches the fields and reads the source's entities without starting
// the sampling loops. With CollectAll it drives the engine by hand, so that
// tests and benchmarks control every sample. Use Start or Open, not both.
func (e *Engine) Open() error {
	e.runMu.Lock()
	defer e.runMu.Unlock()
	return e.open()
}

// CollectAll collects every field group once, in interval order, and
// refreshes the polled source status and, when per-process series are on,
// the process list, as the background loops would.
func (e *Engine) CollectAll(ctx context.Context) error {
	e.mu.RLock()
	n := len(e.plan.groups)
	e.mu.RUnlock()
	b := &batch{}
	for gi := 0; gi < n; gi++ {
		if err := e.collectOnce(ctx, gi, b); err != nil {
			return fmt.Errorf("collecting field group %d: %w", gi, err)
		}
	}
	e.pollStatus()
	if e.opts.Processes.Enabled {
		e.refreshProcesses()
	}
	return nil
}
