package dcgm

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
)

// keepSamplesSlack is added to keepAge/interval so that jitter in the host
// engine's sampling never evicts a sample younger than keepAge.
const keepSamplesSlack = 16

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

// watchedGroup is one (entity group, field group) pair watched at one
// interval.
type watchedGroup struct {
	interval   time.Duration
	group      Handle
	fieldGroup Handle
}

// groupCursor is a watched group with the time of the newest sample
// already handed to the sink.
type groupCursor struct {
	g     *watchedGroup
	since int64
}

type pendingUnsupported struct {
	e      *source.Entity
	field  uint16
	reason string
}

// groupPlan is how one engine group is read.
type groupPlan struct {
	interval time.Duration
	// fields are the DCGM field IDs whose samples go to the sink.
	fields  map[uint16]bool
	cursors []groupCursor
	// health runs DCGM's health checks (source.Group.Health).
	health  bool
	p2p     bool
	pending []pendingUnsupported
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

// Watch implements source.Source. While the host engine is down the groups
// are kept and applied when it is back.
func (s *Source) Watch(groups []source.Group) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errors.New("dcgm: source is closed")
	}
	s.groups = slices.Clone(groups)
	s.watchSeq++
	gen, up := s.gen, s.up
	s.mu.Unlock()
	if !up {
		return nil
	}

	s.clientMu.Lock()
	defer s.clientMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen || !s.up {
		// A reconnect happened meanwhile; it applied s.groups.
		return nil
	}
	s.teardown(s.conn)
	plans, err := s.plan(s.conn, s.groups)
	if err != nil {
		s.handleErr(err)
		return fmt.Errorf("dcgm: watching fields: %w", err)
	}
	s.plans = plans
	return nil
}

// teardown destroys what the previous watch created. Failures only mean the
// host engine already forgot the handles.
func (s *Source) teardown(c *connState) {
	for _, h := range c.fieldGroups {
		if err := s.client.DestroyFieldGroup(h); err != nil {
			s.log.WithError(err).Debug("destroying field group")
		}
	}
	for _, h := range c.entityGroups {
		if err := s.client.DestroyGroup(h); err != nil {
			s.log.WithError(err).Debug("destroying entity group")
		}
	}
	c.fieldGroups, c.entityGroups = nil, nil
	c.healthGroup, c.healthSet = 0, false
}

// plan creates the field groups and watches for groups: one DCGM field group
// per distinct interval and entity level, watched on the entities the
// fields apply to. On a node whose GPUs support different profiling
// fields, GPUs with the same support share an extra field group, because
// DCGM refuses a watch that includes a profiling field one GPU of the
// group cannot sample.
func (s *Source) plan(c *connState, groups []source.Group) ([]*groupPlan, error) {
	plans := make([]*groupPlan, len(groups))
	byInterval := map[time.Duration][]uint16{}
	var order []time.Duration
	var wantProf bool
	clear(c.wantLevels)
	for i, g := range groups {
		iv := g.Interval
		if iv <= 0 {
			iv = s.cfg.DefaultInterval
		}
		p := &groupPlan{interval: iv, fields: map[uint16]bool{}, health: g.Health}
		for _, f := range g.Fields {
			if f.ID == fieldid.ExpP2PStatus {
				p.p2p = true
				continue
			}
			if fieldLevel(f.ID) == levelExporter {
				for _, gpu := range c.gpus {
					p.pending = append(p.pending, pendingUnsupported{c.gpuEnt[gpu.ID], f.ID, "not read by the dcgm source"})
				}
				continue
			}
			p.fields[f.ID] = true
		}
		if _, ok := byInterval[iv]; !ok {
			order = append(order, iv)
		}
		for id := range p.fields {
			if !slices.Contains(byInterval[iv], id) {
				byInterval[iv] = append(byInterval[iv], id)
			}
			c.wantLevels[fieldLevel(id)] = true
			wantProf = wantProf || fieldid.IsProfiling(id)
		}
		plans[i] = p
	}
	if wantProf {
		if err := s.readProfSupport(c); err != nil {
			return nil, err
		}
	}

	watched := map[time.Duration][]*watchedGroup{}
	for _, iv := range order {
		ids := byInterval[iv]
		slices.Sort(ids)
		gs, err := s.watchInterval(c, iv, ids)
		if err != nil {
			return nil, err
		}
		watched[iv] = gs
	}

	for _, p := range plans {
		for _, g := range watched[p.interval] {
			p.cursors = append(p.cursors, groupCursor{g: g, since: s.since[p.interval]})
		}
		if p.health && !c.healthSet {
			if err := s.setHealth(c); err != nil {
				return nil, err
			}
		}
		p.pending = append(p.pending, unsupportedProfiling(c, p.fields)...)
	}
	return plans, nil
}

// unsupportedProfiling lists the profiling fields of a group that a GPU
// cannot sample, on the GPU and each of its MIG instances, with the reason.
func unsupportedProfiling(c *connState, fields map[uint16]bool) []pendingUnsupported {
	var out []pendingUnsupported
	for id := range fields {
		if !fieldid.IsProfiling(id) {
			continue
		}
		for _, g := range c.gpus {
			sup := c.prof[g.ID]
			if sup.fields[id] {
				continue
			}
			reason := sup.reason
			if reason == "" {
				reason = "profiling metric not supported by this GPU"
			}
			out = append(out, pendingUnsupported{c.gpuEnt[g.ID], id, reason})
			for _, r := range c.migOf[g.ID] {
				out = append(out, pendingUnsupported{c.byRef[r], id, reason})
			}
		}
	}
	return out
}

// watchInterval watches the fields of one interval on the entities each
// field's level applies to: GPUs (with their MIG instances) grouped by the
// profiling fields they support, NvSwitches, links, CPUs and CPU cores.
func (s *Source) watchInterval(c *connState, iv time.Duration, ids []uint16) ([]*watchedGroup, error) {
	byLevel := map[level][]uint16{}
	for _, id := range ids {
		byLevel[fieldLevel(id)] = append(byLevel[fieldLevel(id)], id)
	}
	w := &intervalWatch{s: s, c: c, iv: iv, fgByKey: map[string]Handle{}}
	for _, p := range gpuParts(c, byLevel[levelGPU]) {
		if err := w.add(p.fields, p.members); err != nil {
			return nil, err
		}
	}
	sw, ln, cpus, cores := nonGPUMembers(c)
	for _, p := range []watchPart{
		{byLevel[levelSwitch], sw}, {byLevel[levelLink], ln}, {byLevel[levelCPU], cpus}, {byLevel[levelCPUCore], cores},
	} {
		if err := w.add(p.fields, p.members); err != nil {
			return nil, err
		}
	}
	return w.watched, nil
}

// watchPart is fields watched together on a set of entities.
type watchPart struct {
	fields  []uint16
	members []EntityRef
}

// gpuParts groups the GPUs, each with its MIG instances, by the GPU-level
// fields they can sample: GPUs with the same profiling support share one
// field group, as DCGM refuses a watch with a profiling field one member
// cannot sample.
func gpuParts(c *connState, gpuIDs []uint16) []*watchPart {
	var parts []*watchPart
	byKey := map[string]*watchPart{}
	for _, g := range c.gpus {
		fields := make([]uint16, 0, len(gpuIDs))
		for _, id := range gpuIDs {
			if !fieldid.IsProfiling(id) || c.prof[g.ID].fields[id] {
				fields = append(fields, id)
			}
		}
		key := fieldsKey(fields)
		p := byKey[key]
		if p == nil {
			p = &watchPart{fields: fields}
			byKey[key] = p
			parts = append(parts, p)
		}
		p.members = append(p.members, EntityRef{EntityGPU, g.ID})
		p.members = append(p.members, c.migOf[g.ID]...)
	}
	return parts
}

// nonGPUMembers lists the NvSwitches, the links, the CPUs and the CPU
// cores of the connection.
func nonGPUMembers(c *connState) (sw, ln, cpus, cores []EntityRef) {
	for _, id := range c.switches {
		sw = append(sw, EntityRef{EntitySwitch, id})
	}
	// dcgm-exporter watches link-level fields on GPU links and NvSwitch
	// ports alike (internal/pkg/devicewatcher/device_watcher.go,
	// createNVLinkGroups).
	for _, l := range c.gpuLinks {
		ln = append(ln, EntityRef{EntityLink, l.ID})
	}
	for _, l := range c.links {
		ln = append(ln, EntityRef{EntityLink, l.ID})
	}
	for _, cpu := range c.cpus {
		cpus = append(cpus, EntityRef{EntityCPU, cpu.ID})
		for _, core := range cpu.Cores {
			cores = append(cores, EntityRef{EntityCPUCore, core})
		}
	}
	return sw, ln, cpus, cores
}

// intervalWatch creates the entity and field groups of one interval and
// watches them, sharing a field group between entity groups with the same
// fields.
type intervalWatch struct {
	s       *Source
	c       *connState
	iv      time.Duration
	fgByKey map[string]Handle
	watched []*watchedGroup
}

// add watches fields on members, through several field groups when there
// are more fields than one DCGM field group holds.
func (w *intervalWatch) add(fields []uint16, members []EntityRef) error {
	if len(fields) == 0 || len(members) == 0 {
		return nil
	}
	s, c, iv := w.s, w.c, w.iv
	eg, err := s.client.CreateGroup("gpuscope_"+iv.String()+"_e"+strconv.Itoa(len(c.entityGroups)), members)
	if err != nil {
		return fmt.Errorf("creating entity group for interval %s: %w", iv, err)
	}
	c.entityGroups = append(c.entityGroups, eg)
	// A DCGM field group holds at most MaxFieldsPerGroup fields: more
	// are watched through several field groups on the same entities.
	for chunk := range slices.Chunk(fields, MaxFieldsPerGroup) {
		key := fieldsKey(chunk)
		fg, ok := w.fgByKey[key]
		if !ok {
			name := "gpuscope_" + iv.String() + "_" + strconv.Itoa(len(c.fieldGroups))
			h, err := s.client.CreateFieldGroup(name, chunk)
			if err != nil {
				return fmt.Errorf("creating field group for interval %s: %w", iv, err)
			}
			c.fieldGroups = append(c.fieldGroups, h)
			w.fgByKey[key], fg = h, h
		}
		keepAge := s.cfg.keepAge(iv)
		keepSamples := int(keepAge/iv) + keepSamplesSlack
		if err := s.client.WatchFields(eg, fg, iv, keepAge, keepSamples); err != nil {
			return fmt.Errorf("watching fields %v every %s: %w", chunk, iv, err)
		}
		w.watched = append(w.watched, &watchedGroup{interval: iv, group: eg, fieldGroup: fg})
	}
	return nil
}

func fieldsKey(ids []uint16) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(strconv.Itoa(int(id)))
		b.WriteByte(',')
	}
	return b.String()
}

func (s *Source) setHealth(c *connState) error {
	refs := make([]EntityRef, 0, len(c.gpus))
	for _, g := range c.gpus {
		refs = append(refs, EntityRef{EntityGPU, g.ID})
	}
	h, err := s.client.CreateGroup("gpuscope_health", refs)
	if err != nil {
		return fmt.Errorf("creating health group: %w", err)
	}
	c.entityGroups = append(c.entityGroups, h)
	if err := s.client.HealthSet(h); err != nil {
		return fmt.Errorf("setting health watches: %w", err)
	}
	c.healthGroup, c.healthSet = h, true
	return nil
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
