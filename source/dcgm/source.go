package dcgm

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/source"
)

// Source is the DCGM source. It implements source.Source and
// source.ProfilingController.
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
}

var (
	_ source.Source              = (*Source)(nil)
	_ source.ProfilingController = (*Source)(nil)
)

// connState is what one connection to the host engine discovered and created.
type connState struct {
	all      []*source.Entity
	byRef    map[EntityRef]*source.Entity
	gpus     []GPUInfo
	migs     []MIGInfo
	switches []uint
	links    []LinkInfo
	gpuLinks []GPULinkInfo
	cpus     []CPUInfo
	gpuEnt   map[uint]*source.Entity
	// migOf lists the MIG entities of each physical GPU.
	migOf map[uint][]EntityRef
	// healthGroup holds the GPUs for health checks; zero until health is
	// asked for.
	healthGroup Handle
	healthSet   bool
	// created handles, destroyed on the next Watch or on Close.
	entityGroups []Handle
	fieldGroups  []Handle
	// prof caches per-GPU profiling support for this connection.
	prof map[uint]profSupport
	// wantLevels says which entity levels the current watch uses.
	wantLevels map[level]bool
}

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
		client: withDeadline(client, c.CallTimeout), cfg: c, params: params, stop: make(chan struct{}),
		log:   c.Log.WithField("source", "dcgm"),
		since: map[time.Duration]int64{},
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
func (s *Source) Name() string { return "dcgm" }

// connect opens the connection and discovers entities. Called with clientMu
// held (or before the source is shared).
func (s *Source) connect() (*connState, error) {
	if err := s.client.Connect(s.params); err != nil {
		_ = s.client.Disconnect()
		return nil, fmt.Errorf("dcgm %s: %w", s.params.describe(), err)
	}
	conn, err := s.discover()
	if err != nil {
		_ = s.client.Disconnect()
		return nil, fmt.Errorf("dcgm %s: %w", s.params.describe(), err)
	}
	return conn, nil
}

// discover lists the host engine's entities: GPUs, their MIG instances,
// NvSwitches, CPUs and their cores, and the links. Only a failed GPU list
// is an error; the others leave their entities out, with a warning.
func (s *Source) discover() (*connState, error) {
	gpus, err := s.client.GPUs()
	if err != nil {
		return nil, fmt.Errorf("listing GPUs: %w", err)
	}
	c := &connState{
		byRef: map[EntityRef]*source.Entity{}, gpus: gpus, gpuEnt: map[uint]*source.Entity{},
		migOf: map[uint][]EntityRef{}, prof: map[uint]profSupport{}, wantLevels: map[level]bool{},
	}
	for _, g := range gpus {
		e := source.NewGPU(int(g.ID), g.UUID, g.PCIBusID, g.Model)
		c.add(EntityRef{EntityGPU, g.ID}, &e)
		c.gpuEnt[g.ID] = &e
	}
	s.discoverMIG(c)
	s.discoverSwitchesAndCPUs(c)
	links, err := s.client.SwitchLinks()
	if err != nil {
		s.log.WithError(err).Warn("cannot list NvSwitch links; link fields are not sampled")
	}
	for _, l := range links {
		if !l.Up {
			continue
		}
		e := source.Entity{Kind: source.NVLink, GPU: -1, GPUInstanceID: -1, ComputeInstanceID: -1, Link: int(l.Index), Switch: int(l.Switch), CPU: -1, CPUCore: -1}
		c.add(EntityRef{EntityLink, l.ID}, &e)
		c.links = append(c.links, l)
	}
	s.discoverGPULinks(c)
	return c, nil
}

// discoverMIG adds the GPU and compute instances of the GPUs.
func (s *Source) discoverMIG(c *connState) {
	migs, err := s.client.MIGHierarchy()
	if err != nil {
		// GPUs without MIG are still worth serving; the instances are
		// missing until the next reconnect.
		s.log.WithError(err).Warn("cannot read the MIG hierarchy; MIG instances are not sampled")
		migs = nil
	}
	// GPU instances first, so that compute instances find their parent.
	slices.SortStableFunc(migs, func(a, b MIGInfo) int { return int(a.Entity.Group) - int(b.Entity.Group) })
	for _, m := range migs {
		parent := c.gpuEnt[m.GPU]
		if parent == nil {
			continue
		}
		e := *parent
		e.MIGUUID = m.MIGUUID
		switch m.Entity.Group {
		case EntityGPUInstance:
			e.Kind = source.GPUInstance
			e.GPUInstanceID = int(m.InstanceID)
			e.GPUInstanceProfile = m.Profile
		case EntityComputeInstance:
			e.Kind = source.ComputeInstance
			gi := c.byRef[m.Parent]
			if gi == nil {
				continue
			}
			e.GPUInstanceID = gi.GPUInstanceID
			e.GPUInstanceProfile = gi.GPUInstanceProfile
			e.ComputeInstanceID = int(m.ComputeInstanceID)
		default:
			continue
		}
		c.add(m.Entity, &e)
		c.migs = append(c.migs, m)
		c.migOf[m.GPU] = append(c.migOf[m.GPU], m.Entity)
	}
}

// discoverSwitchesAndCPUs adds the NvSwitches, the CPUs and their cores.
func (s *Source) discoverSwitchesAndCPUs(c *connState) {
	var err error
	if c.switches, err = s.client.Switches(); err != nil {
		s.log.WithError(err).Warn("cannot list NvSwitches; NvSwitch fields are not sampled")
		c.switches = nil
	}
	for _, id := range c.switches {
		e := source.Entity{Kind: source.NvSwitch, GPU: -1, GPUInstanceID: -1, ComputeInstanceID: -1, Link: -1, Switch: int(id), CPU: -1, CPUCore: -1}
		c.add(EntityRef{EntitySwitch, id}, &e)
	}
	cpus, err := s.client.CPUs()
	if err != nil {
		s.log.WithError(err).Warn("cannot read the CPU hierarchy; CPU fields are not sampled")
		cpus = nil
	}
	for _, cpu := range cpus {
		e := source.NewCPU(int(cpu.ID), -1)
		c.add(EntityRef{EntityCPU, cpu.ID}, &e)
		for _, core := range cpu.Cores {
			ce := source.NewCPU(int(cpu.ID), int(core))
			c.add(EntityRef{EntityCPUCore, core}, &ce)
		}
	}
	c.cpus = cpus
}

// discoverGPULinks adds the NVLinks of each GPU that are up as link entities
// with the GPU's identity, which dcgm-exporter's link template shows
// (internal/pkg/deviceinfo/device_info.go fills each GPU's NvLinks from
// GetNvLinkLinkStatus; internal/pkg/devicemonitoring/device_monitoring.go,
// monitorAllGPUNvLinks, monitors only those in state LS_UP). The link
// keeps DCGM's own index as its nvlink label: see docs/metrics.md for how
// dcgm-exporter numbers them.
func (s *Source) discoverGPULinks(c *connState) {
	links, err := s.client.GPULinks()
	if err != nil {
		s.log.WithError(err).Warn("cannot list GPU NVLinks; per-link fields are not sampled on GPUs")
		return
	}
	for _, l := range links {
		gpu := c.gpuEnt[l.GPU]
		if !l.Up || gpu == nil {
			continue
		}
		e := *gpu
		e.Kind = source.NVLink
		e.Link = int(l.Index)
		c.add(EntityRef{EntityLink, l.ID}, &e)
		c.gpuLinks = append(c.gpuLinks, l)
	}
}

func (c *connState) add(r EntityRef, e *source.Entity) {
	c.byRef[r] = e
	c.all = append(c.all, e)
}

// Entities implements source.Source: GPUs and MIG instances always, NvSwitches
// and the links of GPUs and NvSwitches only while a watched field asks for
// them.
func (s *Source) Entities() []*source.Entity {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return nil
	}
	out := make([]*source.Entity, 0, len(s.conn.all))
	for _, e := range s.conn.all {
		switch e.Kind {
		case source.NvSwitch:
			if !s.conn.wantLevels[levelSwitch] {
				continue
			}
		case source.NVLink:
			if !s.conn.wantLevels[levelLink] {
				continue
			}
		case source.CPU:
			if !s.conn.wantLevels[levelCPU] {
				continue
			}
		case source.CPUCore:
			if !s.conn.wantLevels[levelCPUCore] {
				continue
			}
		}
		out = append(out, e)
	}
	return out
}

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
