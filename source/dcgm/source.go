// Package dcgm is the DCGM source: it reads GPU fields through a DCGM host
// engine (embedded, remote over TCP or a unix socket, or started by us),
// with one DCGM field group per watch interval, and hands every sample since
// the previous read to the engine.
//
// All DCGM calls go through the small Client interface, so that the source's
// logic is tested against dcgmfake; dcgm/godcgm is the thin adapter over
// go-dcgm that production uses. This package is pure Go: all cgo lives in
// that adapter.
//
// One file per concern: source.go holds the Source and its life (New,
// Status, Close); discover.go what a connection finds (GPUs, MIG
// instances, NvSwitches, CPUs, links); watch.go the field and entity groups
// each watch interval needs; collect.go the reads that hand samples, health
// and P2P status to the sink; reconnect.go the loss of the host engine and
// the backoff back to it; profiling.go the profiling fields each GPU
// supports and the pause that lends them to another profiler; bind.go the
// GPUs bound and unbound while running. client.go is the Client interface,
// config.go the connection modes, deadline.go the deadline on every call,
// fields.go each field's entity level and DCGM's blank values,
// healthnames.go dcgm-exporter's names of health watches and errors;
// processes.go the GPUs' processes, which DCGM has no call to list: the
// source asks a ProcessReader, NVML beside the host engine
// (nvmlDeviceGetComputeRunningProcesses and
// nvmlDeviceGetProcessUtilization by GPU UUID, the nvml package's reader),
// and the file says why each DCGM call that looks like one does not serve.
package dcgm

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/source"
)

// Source is the DCGM source. It implements source.Source,
// source.ProfilingController and source.ProcessLister.
type Source struct {
	client Client
	cfg    Config
	params ConnectParams
	log    logrus.FieldLogger

	// clientMu serialises client calls. A reconnect attempt holds it for as
	// long as connecting takes, so Collect checks up under mu first and
	// fails fast while the host engine is down.
	clientMu sync.Mutex

	mu     sync.Mutex
	up     bool
	err    error
	closed bool
	// gen counts connections; a Collect that started on an older one
	// does not touch the new one's handles.
	gen     uint64
	changed bool
	paused  bool
	groups  []source.Group
	// watchSeq counts Watch calls, so a reconnect notices one made while
	// it was connecting.
	watchSeq uint64
	conn     *connState
	plans    []*groupPlan
	// since carries the last read time of each interval over re-watches
	// and reconnects, so that samples a restarted watch still finds in the
	// host engine's cache are not handed over twice. Bounded by the number
	// of distinct intervals.
	since map[time.Duration]int64
	// lastTS is, for the same reason, the time of the latest sample handed
	// over of each pair read as latest values (latest.go); touched only
	// under clientMu, and bounded by the watched pairs.
	lastTS map[pairKey]int64

	// nextGPUList is when Collect next lists the GPUs for the bind/unbind
	// watch; touched only under clientMu.
	nextGPUList time.Time

	reconnecting bool
	stop         chan struct{}
	wg           sync.WaitGroup

	// status is up, err and paused as last published under mu, read
	// without a lock: Status must answer while a call to the host engine
	// is outstanding, or auto mode could not notice a hung one.
	status atomic.Pointer[source.Status]

	// procs is the GPUs' process list (processes.go).
	procs procState
}

var (
	_ source.Source              = (*Source)(nil)
	_ source.ProfilingController = (*Source)(nil)
)

// New connects to DCGM in the configured mode and discovers the entities. A
// failed connection is an error that names the mode and what is missing; the
// caller (or the auto source) decides what to do with it.
func New(client Client, cfg Config) (*Source, error) {
	c := cfg.withDefaults()
	params, err := c.connectParams()
	if err != nil {
		return nil, err
	}
	s := &Source{
		client: withDeadline(client, c.CallTimeout, c.ConnectTimeout), cfg: c, params: params, stop: make(chan struct{}),
		log:   c.Log.WithField("source", Name),
		since: map[time.Duration]int64{}, lastTS: map[pairKey]int64{},
	}
	conn, err := s.connect()
	if err != nil {
		return nil, err
	}
	s.conn = conn
	s.up = true
	s.gen = 1
	s.publishStatusLocked()
	s.log.WithFields(logrus.Fields{"mode": params.Mode, "address": params.Address, "gpus": len(conn.gpus), "mig_instances": len(conn.migs)}).Info("connected to DCGM")
	return s, nil
}

// Name implements source.Source.
func (s *Source) Name() string { return Name }

// Status implements source.Source. It never waits for the host engine.
func (s *Source) Status() source.Status {
	if st := s.status.Load(); st != nil {
		return *st
	}
	return source.Status{}
}

// publishStatusLocked makes up, err and paused visible to Status. Called
// with mu held, after any of them changes.
func (s *Source) publishStatusLocked() {
	s.status.Store(&source.Status{Up: s.up, Err: s.err, ProfilingPaused: s.paused})
}

// Close implements source.Source.
func (s *Source) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.stop)
	s.mu.Unlock()
	s.wg.Wait()
	s.closeProcesses()

	s.clientMu.Lock()
	defer s.clientMu.Unlock()
	s.mu.Lock()
	if s.up && s.conn != nil {
		s.teardown(s.conn)
	}
	s.up = false
	s.publishStatusLocked()
	s.mu.Unlock()
	if err := s.client.Disconnect(); err != nil {
		return fmt.Errorf("dcgm: disconnecting: %w", err)
	}
	return nil
}
