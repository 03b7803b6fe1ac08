package dcgm

import (
	"fmt"
	"slices"

	"github.com/gpuscope/gpuscope/source"
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
	// version is the host engine's release; baseUnits says whether it
	// reads the base-unit fields itself (KnowsBaseUnits).
	version   string
	baseUnits bool
	// refused holds the pairs the host engine refused, with the reason,
	// left out of every watch of this connection (latest.go). Bounded by
	// the watched pairs.
	refused map[pairKey]string
}

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
	// Probed once per connection: a host engine older than 4.6.1 does not
	// know the base-unit fields, which are then derived from the legacy
	// ones (source.DeriveBaseUnits).
	version, err := s.client.HostEngineVersion()
	if err != nil {
		s.log.WithError(err).Warn("reading the host engine's version; deriving the base-unit fields from their legacy fields")
	}
	conn.version, conn.baseUnits = version, KnowsBaseUnits(version)
	how := "derived"
	if conn.baseUnits {
		how = "native"
	}
	s.log.WithField("version", version).WithField("base_unit_fields", how).Info("connected to the DCGM host engine")
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
		refused: map[pairKey]string{},
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
