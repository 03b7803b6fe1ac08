package dcgm

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
)

// keepSamplesSlack is added to keepAge/interval so that jitter in the host
// engine's sampling never evicts a sample younger than keepAge.
const keepSamplesSlack = 16

// watchedGroup is one (entity group, field group) pair watched at one
// interval.
type watchedGroup struct {
	interval   time.Duration
	group      Handle
	fieldGroup Handle
	// events says the fields are read with every sample since the last
	// read (isEvent); the others are read as latest values of members x
	// fields.
	events  bool
	members []EntityRef
	fields  []uint16
}

// groupCursor is a watched group with the time of the newest sample
// already handed to the sink.
type groupCursor struct {
	g     *watchedGroup
	since int64
}

// pendingUnsupported is a field an entity cannot sample, told to the sink
// at the group's next Collect.
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
	// derive turns legacy samples into the base-unit fields an older host
	// engine does not know.
	derive *source.BaseUnits
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
	groups, derive := source.DeriveBaseUnits(groups, func(id uint16) bool {
		// DCGM 4.7's IDs are documentation only: never asked for.
		return c.baseUnits && !fieldid.DerivedOnly(id)
	})
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
		p := &groupPlan{interval: iv, fields: map[uint16]bool{}, health: g.Health, derive: derive}
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
		p.pending = append(p.pending, c.refusedPending(p.fields)...)
	}
	s.pruneLatest(watched)
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

// add watches fields on members, leaving out the pairs the host engine
// refused: members that refuse different fields get entity groups of their
// own.
func (w *intervalWatch) add(fields []uint16, members []EntityRef) error {
	for _, p := range withoutRefused(w.c.refused, fields, members) {
		if err := w.addPart(p.fields, p.members); err != nil {
			return err
		}
	}
	return nil
}

// addPart watches fields on members, the event fields and the others
// through field groups of their own, and through several when there are
// more fields than one DCGM field group holds.
func (w *intervalWatch) addPart(fields []uint16, members []EntityRef) error {
	if len(fields) == 0 || len(members) == 0 {
		return nil
	}
	s, c, iv := w.s, w.c, w.iv
	eg, err := s.client.CreateGroup("gpuscope_"+iv.String()+"_e"+strconv.Itoa(len(c.entityGroups)), members)
	if err != nil {
		return fmt.Errorf("creating entity group for interval %s: %w", iv, err)
	}
	c.entityGroups = append(c.entityGroups, eg)
	events, others := splitEvents(fields)
	if err := w.watchChunks(eg, others, members, false); err != nil {
		return err
	}
	return w.watchChunks(eg, events, members, true)
}

// watchChunks watches fields on the entity group eg of members. A DCGM
// field group holds at most MaxFieldsPerGroup fields: more are watched
// through several field groups on the same entities.
func (w *intervalWatch) watchChunks(eg Handle, fields []uint16, members []EntityRef, events bool) error {
	s, c, iv := w.s, w.c, w.iv
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
		if events {
			keepSamples = min(keepSamples, max(2, MaxSinceValues/(len(members)*len(chunk))))
		}
		if err := s.client.WatchFields(eg, fg, iv, keepAge, keepSamples); err != nil {
			return fmt.Errorf("watching fields %v every %s: %w", chunk, iv, err)
		}
		w.watched = append(w.watched, &watchedGroup{interval: iv, group: eg, fieldGroup: fg,
			events: events, members: members, fields: chunk})
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

// setHealth creates the entity group of the GPUs and turns DCGM's health
// watches on for it.
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
