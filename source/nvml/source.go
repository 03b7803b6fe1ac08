// Package nvml is the NVML source: it reads the DCGM fields a driver alone
// can give through go-nvml (GPM for profiling fields on Hopper and later),
// watches XID events, lists MIG instances and compute processes. It is the
// only package besides dcgm that calls NVML, and it calls nothing before a
// successful Init.
package nvml

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	timesource "github.com/gpuscope/gpuscope/internal/clock"
	"github.com/gpuscope/gpuscope/source"
)

// ErrNoDriver says the NVML library is not there.
var ErrNoDriver = errors.New("NVIDIA driver library libnvidia-ml.so.1 not found: run the container " +
	"with the nvidia runtime class (runtimeClassName: nvidia, or docker run --gpus all), " +
	"or set LD_LIBRARY_PATH to the directory that holds the driver's libraries")

// ErrNoGPU says NVML works but sees no GPU.
var ErrNoGPU = errors.New("NVML sees no NVIDIA GPU")

// ErrReadTimeout is counted for a GPU whose read did not finish in time.
var ErrReadTimeout = errors.New("NVML read still running")

// Config configures the NVML source. Zero durations and sizes take the
// defaults below.
type Config struct {
	// Lib is the NVML library; nil means the real one (gonvml.New()).
	Lib      gonvml.Interface
	Hostname string
	Logger   *logrus.Entry
	// RetryBackoff is the first delay before a lost GPU is retried; each
	// failed retry doubles it up to MaxRetryBackoff. Defaults 1s and 1m.
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
	// ReadTimeout bounds a collection when the context has no deadline and
	// the group has no interval. Default 1s.
	ReadTimeout time.Duration
	// ProcessInterval is how often the process list is refreshed during
	// collections. Default 5s.
	ProcessInterval time.Duration
	// MIGPoll is how often each GPU's MIG layout is listed again, so that
	// instances created or destroyed while running appear and go. Default
	// 30s.
	MIGPoll time.Duration
	// MaxProcesses caps the processes kept per GPU. Default 256.
	MaxProcesses int
	// EventWait is the XID event set's wait timeout, which bounds how long
	// Close waits for the event goroutine. Default 500ms.
	EventWait time.Duration
	// XIDQueue caps the XID events kept between collections. Default 1024.
	XIDQueue int
	// Clock stamps samples and schedules the retries of lost GPUs and the
	// process refreshes; the wall clock when nil. A read's timeout is
	// always wall time: it waits on the hardware.
	Clock timesource.Clock
	// BindUnbindPoll, when positive, is how often Collect lists the GPUs
	// bound to the driver; a GPU bound or unbound since the last look makes
	// Collect return source.ErrEntitiesChanged, so GPUs come and go without
	// a restart. Zero keeps the GPUs found at start.
	BindUnbindPoll time.Duration
}

func (c *Config) defaults() {
	if c.Logger == nil {
		c.Logger = logrus.NewEntry(logrus.StandardLogger())
	}
	c.Clock = timesource.Or(c.Clock)
	setDur := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	setDur(&c.RetryBackoff, time.Second)
	setDur(&c.MaxRetryBackoff, time.Minute)
	setDur(&c.ReadTimeout, time.Second)
	setDur(&c.ProcessInterval, 5*time.Second)
	setDur(&c.MIGPoll, 30*time.Second)
	setDur(&c.EventWait, 500*time.Millisecond)
	if c.MaxRetryBackoff < c.RetryBackoff {
		c.MaxRetryBackoff = c.RetryBackoff
	}
	if c.MaxProcesses <= 0 {
		c.MaxProcesses = 256
	}
	if c.XIDQueue <= 0 {
		c.XIDQueue = 1024
	}
}

// Source is the NVML source. It implements source.Source and
// source.ProcessLister.
type Source struct {
	cfg     Config
	lib     gonvml.Interface
	realLib bool
	// fabricV2 is set once the driver refused the v3 fabric info struct,
	// so that it is not asked for it again (as DCGM's
	// m_driverSupportsFabricInfoV3).
	fabricV2 atomic.Bool
	log      *logrus.Entry

	driverVersion string
	nvmlVersion   string
	// devices is replaced whole, never changed in place, when the bound GPUs
	// change; devMu guards the field, so readers take the slice once.
	devMu   sync.RWMutex
	devices []*device
	xid     *xidWatcher
	// nextGPUList is when Collect next lists the bound GPUs; only Collect
	// touches it, and the engine never runs two at once.
	nextGPUList time.Time

	mu     sync.Mutex
	groups []source.Group
	// derive turns the legacy fields read for base-unit fields back into
	// both (source.DeriveBaseUnits); it changes with groups.
	derive *source.BaseUnits
	gen    uint64

	entitiesChanged atomic.Bool
	closed          atomic.Bool
	inflight        sync.WaitGroup

	procMu sync.RWMutex
	procs  map[int][]source.Process
	// procRunning is set while a process refresh runs; lastProcRefresh is
	// when the last started (Collect only).
	procRunning     atomic.Bool
	lastProcRefresh time.Time
	// procRefreshMu is held by the refresh that runs: Collect's, in the
	// background, or RefreshProcesses's.
	procRefreshMu sync.Mutex
}

var (
	_ source.Source        = (*Source)(nil)
	_ source.ProcessLister = (*Source)(nil)
)

// New initialises NVML and discovers the GPUs. No other NVML function is
// called unless Init succeeds.
func New(cfg Config) (*Source, error) {
	cfg.defaults()
	s := &Source{cfg: cfg, lib: cfg.Lib, procs: map[int][]source.Process{}}
	if s.lib == nil {
		s.lib, s.realLib = gonvml.New(), true
	}
	s.log = cfg.Logger.WithField("source", Name)
	if cfg.Hostname != "" {
		s.log = s.log.WithField("hostname", cfg.Hostname)
	}
	switch ret := s.lib.Init(); ret {
	case gonvml.SUCCESS:
	case gonvml.ERROR_LIBRARY_NOT_FOUND:
		return nil, fmt.Errorf("nvml: %w", ErrNoDriver)
	case gonvml.ERROR_DRIVER_NOT_LOADED:
		return nil, fmt.Errorf("nvml: libnvidia-ml.so.1 is there but the NVIDIA kernel driver is not loaded "+
			"(check nvidia-smi and dmesg on the host): %w", ret)
	default:
		return nil, fmt.Errorf("nvml: Init: %w", ret)
	}
	if err := s.discover(); err != nil {
		_ = s.lib.Shutdown()
		return nil, err
	}
	s.xid = newXIDWatcher(s.lib, s.log, s.devices, cfg.EventWait, cfg.XIDQueue)
	return s, nil
}

func (s *Source) discover() error {
	var ret gonvml.Return
	s.driverVersion, ret = s.lib.SystemGetDriverVersion()
	if err := nvmlErr("SystemGetDriverVersion", ret); err != nil {
		return fmt.Errorf("nvml: %w", err)
	}
	s.nvmlVersion, ret = s.lib.SystemGetNVMLVersion()
	if err := nvmlErr("SystemGetNVMLVersion", ret); err != nil {
		return fmt.Errorf("nvml: %w", err)
	}
	n, ret := s.lib.DeviceGetCount()
	if err := nvmlErr("DeviceGetCount", ret); err != nil {
		return fmt.Errorf("nvml: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("nvml (driver %s): %w", s.driverVersion, ErrNoGPU)
	}
	var firstErr error
	for i := 0; i < n; i++ {
		d, err := s.openDevice(i)
		if err != nil {
			// One GPU that cannot be opened leaves the others to sample.
			s.log.WithFields(logrus.Fields{"gpu": i, "error": err.Error()}).Warn("GPU cannot be opened; it is not sampled")
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		s.devices = append(s.devices, d)
		s.log.WithFields(logrus.Fields{"gpu": i, "uuid": d.uuid, "model": d.gpu.ModelName,
			"gpm": d.gpmSupported, "mig_instances": len(d.instances)}).Info("GPU found")
	}
	if len(s.devices) == 0 {
		return fmt.Errorf("nvml: none of the %d GPUs can be opened: %w", n, firstErr)
	}
	return nil
}

// Name implements source.Source.
func (s *Source) Name() string { return Name }

// Watch implements source.Source. It resets what was reported as
// unsupported, so a reloaded counters file reports it again.
func (s *Source) Watch(groups []source.Group) error {
	groups, derive := source.DeriveBaseUnits(groups, readsNatively)
	cp := make([]source.Group, len(groups))
	for i, g := range groups {
		cp[i] = source.Group{Interval: g.Interval, Fields: append([]counters.Field(nil), g.Fields...)}
		if g.Health {
			// NVML runs no health checks: they are reported unsupported on
			// each GPU, as a field it cannot read is.
			cp[i].Fields = append(cp[i].Fields, source.FieldFor(nil, fieldid.ExpGPUHealthStatus))
		}
	}
	s.mu.Lock()
	s.groups, s.derive = cp, derive
	s.gen++
	s.mu.Unlock()
	return nil
}

// readsNatively says whether NVML reads the field itself; the base-unit
// fields it does not read are derived from their legacy fields.
func readsNatively(id uint16) bool {
	_, ok := fieldMap[id]
	return ok
}

// devs returns the current GPUs.
func (s *Source) devs() []*device {
	s.devMu.RLock()
	defer s.devMu.RUnlock()
	return s.devices
}

// Entities implements source.Source: each GPU, then its MIG instances.
func (s *Source) Entities() []*source.Entity {
	var out []*source.Entity
	for _, d := range s.devs() {
		out = append(out, d.entities()...)
	}
	return out
}

// Status implements source.Source.
func (s *Source) Status() source.Status {
	st := source.Status{Up: !s.closed.Load(), Active: Name}
	if !st.Up {
		st.Err = errors.New("nvml source closed")
	}
	for _, d := range s.devs() {
		if d.isLost() {
			st.Lost = append(st.Lost, d.gpu.Key())
		}
	}
	return st
}

// Close implements source.Source.
func (s *Source) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.xid.close(4 * s.cfg.EventWait)
	done := make(chan struct{})
	go func() { s.inflight.Wait(); close(done) }()
	select {
	case <-done:
		for _, d := range s.devs() {
			d.gpm.free()
			for _, in := range d.instances {
				in.gpm.free()
			}
		}
	case <-time.After(s.cfg.ReadTimeout):
		s.log.Warn("NVML reads still running at close; their GPM samples are not freed")
	}
	if err := nvmlErr("Shutdown", s.lib.Shutdown()); err != nil {
		return fmt.Errorf("nvml: %w", err)
	}
	return nil
}

// Collect implements source.Source. GPUs are read concurrently, one
// goroutine per GPU; a GPU that has not answered by the deadline is counted
// as failed, and skipped (and counted again) while its read still runs, so
// one slow GPU never holds the others back.
func (s *Source) Collect(ctx context.Context, group int, sink source.Sink) error {
	if s.closed.Load() {
		return errors.New("nvml: collect after close")
	}
	s.mu.Lock()
	if group < 0 || group >= len(s.groups) {
		n := len(s.groups)
		s.mu.Unlock()
		return fmt.Errorf("nvml: collect: group %d out of range (%d groups watched)", group, n)
	}
	g, gen := s.groups[group], s.gen
	sink = s.derive.Sink(group, sink)
	s.mu.Unlock()

	now := s.cfg.Clock.Now()
	if s.cfg.BindUnbindPoll > 0 && !now.Before(s.nextGPUList) {
		s.nextGPUList = now.Add(s.cfg.BindUnbindPoll)
		s.listBound()
	}
	devices := s.devs()
	timeout := s.cfg.ReadTimeout
	if g.Interval > 0 {
		// Three quarters of the interval: a collection that waited for a
		// hung GPU as long as the interval would leave no time before the
		// next tick, and run back to back with it.
		timeout = g.Interval * 3 / 4
	}
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(d))
	}
	got, started := s.readAll(ctx, devices, group, g.Fields, gen, now, timeout, sink)
	for i, d := range devices {
		switch {
		case got[i] != nil:
			got[i].apply(sink)
		case started[i]:
			s.failAll(sink, d, g.Fields, fmt.Errorf("GPU %d: %w after %s", d.index, ErrReadTimeout, timeout))
		}
	}
	s.refreshProcesses(devices, now)
	for _, f := range g.Fields {
		if f.ID == fieldid.XIDErrors {
			s.deliverXIDs(sink, devices, now)
			break
		}
	}
	if s.entitiesChanged.Swap(false) {
		return fmt.Errorf("nvml: GPUs or MIG layout changed: %w", source.ErrEntitiesChanged)
	}
	return nil
}

// readAll reads every GPU that is not still busy with an earlier read, one
// goroutine each, and waits for them until timeout or ctx ends. It returns
// the results by GPU and which reads were started; a busy GPU's fields are
// counted as failed.
func (s *Source) readAll(ctx context.Context, devices []*device, group int, fields []counters.Field, gen uint64,
	now time.Time, timeout time.Duration, sink source.Sink) ([]*result, []bool) {
	results := make(chan *result, len(devices))
	started := make([]bool, len(devices))
	pending := 0
	for i, d := range devices {
		if !d.busy.CompareAndSwap(false, true) {
			s.failAll(sink, d, fields, fmt.Errorf("GPU %d: %w since an earlier collection", d.index, ErrReadTimeout))
			continue
		}
		started[i] = true
		pending++
		s.inflight.Add(1)
		go func() {
			defer s.inflight.Done()
			r := s.read(d, group, fields, gen, now)
			// Free the GPU before handing over the result, so the next
			// collection never sees a finished read as still running.
			d.busy.Store(false)
			results <- r
		}()
	}
	got := make([]*result, len(devices))
	timer := time.NewTimer(timeout)
	defer timer.Stop()
wait:
	for pending > 0 {
		select {
		case r := <-results:
			got[r.dev] = r
			pending--
		case <-timer.C:
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	return got, started
}

// failAll counts a failed read of every field the GPU serves in the group.
func (s *Source) failAll(sink source.Sink, d *device, fields []counters.Field, err error) {
	if d.isLost() {
		return
	}
	for _, f := range fields {
		if _, ok := fieldMap[f.ID]; ok {
			sink.Fail(d.gpu, f.ID, err)
		}
	}
}

// deliverXIDs hands every queued XID event to the sink, repeats included,
// and the last XID of each GPU as the XID errors field.
func (s *Source) deliverXIDs(sink source.Sink, devices []*device, now time.Time) {
	for _, e := range s.xid.drain() {
		sink.XID(e.dev.gpu, e.xid, e.ts)
	}
	ts := now.UnixNano()
	for _, d := range devices {
		if !d.isLost() {
			sink.Value(d.gpu, fieldid.XIDErrors, ts, float64(s.xid.lastXID(d)))
		}
	}
}
