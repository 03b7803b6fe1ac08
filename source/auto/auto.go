// Package auto is --source=auto: it serves DCGM when a host engine is
// there and NVML otherwise, and switches between them as DCGM comes and goes,
// so that the GPUs never vanish from the exporter. Entity keys are UUID
// based in both sources, so a switch keeps the series of every field both
// sources read.
package auto

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/internal/clock"
	"github.com/gpuscope/gpuscope/source"
)

// Ctor opens one backend.
type Ctor func() (source.Source, error)

// Names of the backends in Status().Active.
const (
	DCGM = "dcgm"
	NVML = "nvml"
)

// Option tunes an Auto source.
type Option func(*Auto)

// WithProbe sets how often DCGM is probed while NVML serves: the first
// retry waits initial, later ones double up to max.
func WithProbe(initial, max time.Duration) Option {
	return func(a *Auto) { a.probeInitial, a.probeMax = initial, max }
}

// WithClock sets the clock that times the probes; the wall clock by default.
func WithClock(c clock.Clock) Option {
	return func(a *Auto) { a.clock = clock.Or(c) }
}

// Auto is the auto source.
type Auto struct {
	dcgmCtor, nvmlCtor Ctor
	log                logrus.FieldLogger

	probeInitial, probeMax time.Duration
	clock                  clock.Clock

	// mu guards the fields below. Collect holds it for reading while it
	// reads the active backend, so a switch never closes a backend under
	// a running Collect.
	mu         sync.RWMutex
	dcgm       source.Source
	nvml       source.Source
	active     source.Source
	activeName string
	groups     []source.Group
	watched    bool
	closed     bool

	// changed makes the next Collect return ErrEntitiesChanged, once.
	changed atomic.Bool

	stop chan struct{}
	wg   sync.WaitGroup
}

var (
	_ source.Source              = (*Auto)(nil)
	_ source.ProfilingController = (*Auto)(nil)
	_ source.ProcessLister       = (*Auto)(nil)
)

// New opens DCGM if it connects, NVML otherwise, and fails when neither
// does, with both reasons.
func New(dcgmCtor, nvmlCtor Ctor, log logrus.FieldLogger, opts ...Option) (*Auto, error) {
	if log == nil {
		log = logrus.StandardLogger()
	}
	a := &Auto{
		dcgmCtor: dcgmCtor, nvmlCtor: nvmlCtor, log: log.WithField("source", Name),
		probeInitial: 5 * time.Second, probeMax: time.Minute, clock: clock.Real, stop: make(chan struct{}),
	}
	for _, o := range opts {
		o(a)
	}
	if a.probeMax < a.probeInitial {
		a.probeMax = a.probeInitial
	}
	d, derr := dcgmCtor()
	if derr == nil {
		a.dcgm, a.active, a.activeName = d, d, DCGM
		a.log.Info("using DCGM: the host engine answered")
	} else {
		n, nerr := nvmlCtor()
		if nerr != nil {
			return nil, fmt.Errorf("no GPU source: DCGM failed (%w) and NVML failed (%w)", derr, nerr)
		}
		a.nvml, a.active, a.activeName = n, n, NVML
		a.log.WithError(derr).Warn("using NVML: DCGM is not available; profiling, NvLink and NvSwitch fields are missing until it is, and gpuscope switches to it when it answers")
	}
	a.wg.Add(1)
	go a.probeLoop()
	return a, nil
}

// Name implements source.Source; the engine reads Status().Active for the
// backend actually serving.
func (a *Auto) Name() string { return Name }

// Watch implements source.Source.
func (a *Auto) Watch(groups []source.Group) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.groups, a.watched = groups, true
	if err := a.active.Watch(groups); err != nil {
		return fmt.Errorf("%s: %w", a.activeName, err)
	}
	return nil
}

// Entities implements source.Source.
func (a *Auto) Entities() []*source.Entity {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.active.Entities()
}

// Collect implements source.Source. When DCGM fails because its host engine
// went away, the group is served by NVML from the next Collect on.
func (a *Auto) Collect(ctx context.Context, group int, sink source.Sink) error {
	if a.changed.CompareAndSwap(true, false) {
		return fmt.Errorf("auto: backend switched: %w", source.ErrEntitiesChanged)
	}
	a.mu.RLock()
	act := a.active
	err := act.Collect(ctx, group, sink)
	down := err != nil && act == a.dcgm && !act.Status().Up
	a.mu.RUnlock()
	if down && a.toNVML(act, err) {
		a.changed.Store(false)
		return fmt.Errorf("auto: DCGM down, serving NVML: %w", source.ErrEntitiesChanged)
	}
	return err
}

// toNVML switches from a DCGM backend that is down to NVML, opening NVML on
// demand. It reports whether it switched.
func (a *Auto) toNVML(from source.Source, why error) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed || a.active != from {
		return a.active != from && !a.closed
	}
	if a.nvml == nil {
		n, err := a.nvmlCtor()
		if err != nil {
			a.log.WithError(err).Error("DCGM is down and NVML cannot be opened; no GPU is visible until one returns")
			return false
		}
		a.nvml = n
	}
	if a.watched {
		if err := a.nvml.Watch(a.groups); err != nil {
			a.log.WithError(err).Error("NVML refused the watched fields; staying on DCGM")
			return false
		}
	}
	a.active, a.activeName = a.nvml, NVML
	a.changed.Store(true)
	a.log.WithError(why).Warn("DCGM is down; serving the GPUs through NVML until it returns")
	return true
}

// toDCGM switches back to DCGM and closes NVML. Called with mu held.
func (a *Auto) toDCGM() {
	a.active, a.activeName = a.dcgm, DCGM
	a.changed.Store(true)
	if a.nvml != nil {
		if err := a.nvml.Close(); err != nil {
			a.log.WithError(err).Warn("closing NVML")
		}
		a.nvml = nil
	}
	a.log.Info("DCGM answers again; switched back from NVML")
}

func (a *Auto) probeLoop() {
	defer a.wg.Done()
	wait := a.probeInitial
	for {
		d := time.Duration(float64(wait) * (0.8 + 0.4*rand.Float64()))
		t := a.clock.NewTimer(d)
		select {
		case <-a.stop:
			t.Stop()
			return
		case <-t.C():
		}
		if a.probe() {
			wait = a.probeInitial
		} else {
			wait = min(2*wait, a.probeMax)
		}
	}
}

// probe moves toward the right backend once; it reports whether DCGM is
// serving or answering.
func (a *Auto) probe() bool {
	a.mu.RLock()
	d, active, closed := a.dcgm, a.active, a.closed
	a.mu.RUnlock()
	if closed {
		return false
	}
	if d == nil {
		// DCGM never connected: try to open it.
		nd, err := a.dcgmCtor()
		if err != nil {
			a.log.WithError(err).Debug("DCGM still unavailable")
			return false
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.closed {
			_ = nd.Close()
			return false
		}
		if a.watched {
			if err := nd.Watch(a.groups); err != nil {
				a.log.WithError(err).Warn("DCGM answered but refused the watched fields; staying on NVML")
				_ = nd.Close()
				return false
			}
		}
		a.dcgm = nd
		a.toDCGM()
		return true
	}
	up := d.Status().Up
	switch {
	case up && active != d:
		a.mu.Lock()
		defer a.mu.Unlock()
		if !a.closed && a.active != a.dcgm {
			a.toDCGM()
		}
		return true
	case !up && active == d:
		// No Collect noticed yet (or the engine is idle): switch now so
		// that /ready and gpuscope_source_up say the truth.
		a.toNVML(d, d.Status().Err)
		return false
	}
	return up
}

// Status implements source.Source.
func (a *Auto) Status() source.Status {
	a.mu.RLock()
	defer a.mu.RUnlock()
	st := a.active.Status()
	st.Active = a.activeName
	if a.dcgm != nil && a.active != a.dcgm {
		st.ProfilingPaused = a.dcgm.Status().ProfilingPaused
	}
	return st
}

// PauseProfiling implements source.ProfilingController for the DCGM backend.
func (a *Auto) PauseProfiling() error {
	return a.profiling(func(p source.ProfilingController) error { return p.PauseProfiling() })
}

// ResumeProfiling implements source.ProfilingController for the DCGM backend.
func (a *Auto) ResumeProfiling() error {
	return a.profiling(func(p source.ProfilingController) error { return p.ResumeProfiling() })
}

func (a *Auto) profiling(f func(source.ProfilingController) error) error {
	a.mu.RLock()
	defer a.mu.RUnlock()
	p, ok := a.dcgm.(source.ProfilingController)
	if !ok || a.dcgm == nil {
		return errors.New("auto: profiling pause needs DCGM, and DCGM is not connected (NVML holds no profiling lock)")
	}
	return f(p)
}

// Processes implements source.ProcessLister when the active backend does.
func (a *Auto) Processes() []source.Process {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if pl, ok := a.active.(source.ProcessLister); ok {
		return pl.Processes()
	}
	return nil
}

// Close implements source.Source.
func (a *Auto) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	close(a.stop)
	a.mu.Unlock()
	a.wg.Wait()

	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	for _, s := range []source.Source{a.dcgm, a.nvml} {
		if s != nil {
			if err := s.Close(); err != nil {
				errs = append(errs, fmt.Errorf("closing %s: %w", s.Name(), err))
			}
		}
	}
	return errors.Join(errs...)
}
