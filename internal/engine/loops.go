package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/source"
)

// Start watches the fields and starts one sampling loop per interval. A
// source that refuses the watch is an error; later failures are not.
func (e *Engine) Start(ctx context.Context) error {
	e.runMu.Lock()
	defer e.runMu.Unlock()
	e.baseCtx = ctx
	if err := e.open(); err != nil {
		return err
	}
	e.startLoops()
	go e.housekeeping(ctx)
	return nil
}

// Stop ends the sampling loops and waits for them.
func (e *Engine) Stop() {
	e.runMu.Lock()
	defer e.runMu.Unlock()
	e.stopLoops()
}

// Reload swaps in a new counters file. The series of fields that stay keep
// their values and windows, so /metrics shows no gap. When the source refuses
// the new watch, the old set is watched again and keeps running.
func (e *Engine) Reload(set *counters.Set) error {
	if set == nil || len(set.Fields) == 0 {
		return errors.New("reload: no enabled field")
	}
	e.runMu.Lock()
	defer e.runMu.Unlock()
	np := newPlan(set, e.opts.DefaultInterval, e.opts.Window, e.opts.ClockEventsWindow, newInsightPlan(e.opts.Insight))
	planHistograms(np, !e.opts.NoNativeHistograms)
	if err := e.checkLabelBudget(np); err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	if err := checkWindow(np, &e.opts); err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	e.stopLoops()
	e.collectMu.Lock()
	err := e.src.Watch(np.groups)
	if err != nil {
		if rerr := e.src.Watch(e.plan.groups); rerr != nil {
			e.log.WithError(rerr).Error("Re-watching the previous counters after a refused reload failed")
		}
	}
	e.collectMu.Unlock()
	if err != nil {
		e.startLoops()
		return fmt.Errorf("reload: source %s refused the new fields: %w", e.src.Name(), err)
	}
	e.mu.Lock()
	old := e.plan
	e.applyDemandLocked(np)
	e.plan = np
	for _, es := range e.byKey {
		es.resize(np, old)
		es.enrichGen = ^uint64(0)
	}
	for _, es := range e.healthOnly {
		es.resize(np, old)
	}
	e.mu.Unlock()
	e.refreshEntities()
	e.startLoops()
	return nil
}

// Loops is how many background loops wait on Options.Clock between their
// runs once Start has returned: one per field group, the insight loop when
// insight is on, the process loop when per-process series are. Each arms
// one timer while it waits, so a driver of a fake clock that finds this many
// armed knows that every loop has finished what its last move started.
func (e *Engine) Loops() int {
	e.mu.RLock()
	defer e.mu.RUnlock()
	n := len(e.plan.groups)
	if e.plan.insight.on {
		n++
	}
	if e.opts.Processes.Enabled {
		n++
	}
	return n
}

func (e *Engine) startLoops() {
	ctx, cancel := context.WithCancel(e.baseCtx)
	e.cancel = cancel
	e.mu.RLock()
	groups := e.plan.groups
	e.mu.RUnlock()
	for gi, g := range groups {
		e.loops.Add(1)
		go e.runGroup(ctx, gi, g.Interval)
	}
	if ins := e.plan.insight; ins.on {
		e.loops.Add(1)
		go e.runInsight(ctx, ins.every)
	}
	e.startProcesses(ctx)
}

func (e *Engine) stopLoops() {
	if e.cancel != nil {
		e.cancel()
		e.loops.Wait()
		e.cancel = nil
	}
}

func (e *Engine) runGroup(ctx context.Context, gi int, interval time.Duration) {
	defer e.loops.Done()
	b := &batch{}
	obs := e.m.collectDuration.WithLabelValues(interval.String())
	clk := e.opts.Clock
	next := clk.Now()
	failing := false
	for {
		start := time.Now()
		err := e.collectOnce(ctx, gi, b)
		obs.Observe(time.Since(start).Seconds())
		if ctx.Err() == nil {
			e.col.note(gi, start, time.Since(start), err)
		}
		switch {
		case err != nil && ctx.Err() == nil:
			if !failing {
				e.log.WithError(err).WithFields(logrus.Fields{"source": e.src.Name(), "interval": interval}).Warn("Collecting a field group failed; retrying at each interval")
			}
			failing = true
		case err == nil && failing:
			e.log.WithFields(logrus.Fields{"source": e.src.Name(), "interval": interval}).Info("Collecting the field group works again")
			failing = false
		}
		// The next read is due an interval after the previous one was;
		// reads missed while a slow one ran are dropped, as by a ticker.
		now := clk.Now()
		for !next.After(now) {
			next = next.Add(interval)
		}
		t := clk.NewTimer(next.Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// collectOnce reads one group into b and applies it. A change of the
// source's entities is handled here and is not an error.
func (e *Engine) collectOnce(ctx context.Context, gi int, b *batch) error {
	err := e.collectBatch(ctx, gi, b)
	if errors.Is(err, source.ErrEntitiesChanged) {
		e.log.WithField("source", e.src.Name()).Info("Source entities changed; refreshing")
		e.refreshEntities()
		// A reconnected source has samples waiting: read them now rather
		// than an interval later, so series come back as soon as they can.
		if err = e.collectBatch(ctx, gi, b); errors.Is(err, source.ErrEntitiesChanged) {
			e.refreshEntities()
			return nil
		}
	}
	return err
}

func (e *Engine) collectBatch(ctx context.Context, gi int, b *batch) error {
	e.collectMu.Lock()
	err := e.src.Collect(ctx, gi, b)
	e.collectMu.Unlock()
	e.apply(b)
	b.reset()
	return err
}

// housekeeping polls the source's status and the enrichers' generations, so
// that the scrape path reads both from memory.
func (e *Engine) housekeeping(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.pollStatus()
			e.mu.Lock()
			var gen uint64
			for _, el := range e.enr {
				gen += el.e.Generation()
			}
			if len(e.order) > 0 && e.order[0].enrichGen != gen {
				e.relabelLocked()
			}
			e.mu.Unlock()
		}
	}
}
