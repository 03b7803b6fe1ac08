// Package sim is a source of simulated GPUs for demos, tests and benchmarks.
//
// A simulated node runs one data-parallel training job across its GPUs (or
// one job per MIG instance): steps of 1-2 s with a compute phase (high SM,
// tensor and DRAM activity) and an all-reduce phase (NVLink traffic),
// data-loader stalls of 0.5-2 s, framebuffer use ramping up over the first
// minutes, power following activity, temperatures lagging power, and rare
// faults (ECC errors, XIDs, PCIe replays, NVLink errors, hardware slowdowns).
//
// Every value is a function of the seed and the sample time (the workload
// starts at the first Collect), plus state (temperatures, energy, error
// counters) integrated on a fixed 100 ms grid of absolute time. So two sources
// with the same seed sampled at the same times give the same values, whatever
// order their field groups are collected in.
//
// Units are DCGM's: ratios 0..1 for DCGM_FI_PROF_*, percent for *_UTIL, MiB
// for framebuffer, MHz, W, mJ, C, bytes/s for the PROF PCIe and NVLink
// fields, ns for violations. DCGM_FI_DEV_NVLINK_BANDWIDTH_* are rates in MB/s
// (tx+rx), as DCGM reports them, although dcgm-exporter's CSV calls them
// counters.
package sim

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
)

const (
	tickNS  = int64(100_000_000) // the integration grid: 100 ms
	tickSec = 0.1
	mib     = 1 << 20
	xidRing = 32
	// contextMiB is the framebuffer a CUDA context holds with nothing loaded.
	contextMiB = 514
	maxCatch   = 36_000 // ticks integrated after a gap (1 h); older time is skipped
)

// Source is a simulated node. It implements source.Source and
// source.ProcessLister.
type Source struct {
	mu   sync.Mutex
	cfg  *resolved
	seed uint64
	job  job // the node-wide job, when MIG is off
	gpus []*gpuSim
	// fabricCluster is the NVLink fabric cluster UUID of the node's GPUs.
	fabricCluster string

	entities []*source.Entity
	groups   []groupPlan
	// xidWatched says whether XID events are recorded for the sink.
	xidWatched bool
	// watched are the groups of the last Watch, planned again when the
	// listed GPUs change; nextList is when Collect next compares them.
	watched []source.Group
	// derive turns the legacy fields read for base-unit fields back into
	// both (source.DeriveBaseUnits).
	derive   *source.BaseUnits
	nextList time.Time

	started  bool
	t0, last int64 // ticks
	nowTick  int64
	evCum    [numEvents]float64
}

type gpuSim struct {
	idx  int
	ent  *source.Entity
	idle bool // allocated, running nothing
	free bool // no pod holds it: no process at all
	// light is a GPU an interactive pod holds: memory held, little work.
	light bool
	// unplugged GPUs give no samples; listed ones are among the entities.
	unplugged, listed bool
	// p2p is the NVLink P2P status towards every other listed GPU, built
	// when DCGM_EXP_P2P_STATUS is watched and handed to the sink as is.
	p2p []source.P2PLink
	// kind is the GPU's workload when it runs one of Kinds, nil for the
	// node-wide job.
	kind *kindJob
	// plan is the GPU's part in a scenario; nil without one.
	plan *gpuPlan
	// sinkExcess is how much warmer (C) the heat sink runs than with its
	// fan working; reset says the scenario's GPU reset has happened, and
	// fabricDegraded that the GPU's NVLink fabric lost bandwidth.
	sinkExcess     float64
	reset          bool
	fabricDegraded bool
	gis            []*giSim
	serial         string
	pids           [2]uint32

	memFrac, ambient float64

	temp, memTemp, powerAvg, energy float64
	viol                            [numViol]float64
	eccSBEVol, eccDBEVol            float64
	eccSBEAgg, eccDBEAgg            float64
	pcieReplay                      float64
	remapCorr, remapUncorr          float64
	nvlErr                          [4][maxLinks]float64
	lastXID                         float64
	health                          float64
	healthUntil                     int64
	slowUntil, thermUntil           int64
	ring                            [xidRing]xidEvent
	ringStart, ringLen              int

	// The instant of the last Collect.
	act       activity
	powerInst float64
	capped    bool
	fbUsed    int64
	reasons   uint64
}

type giSim struct {
	idx  int
	ent  *source.Entity
	prof migProfile
	job  job
	// kind is the instance's workload when it runs one of MIGKinds, nil
	// for its training job.
	kind *kindJob
	// w is what runs on the instance in a scenario; nil runs nothing.
	w       work
	fbTotal int64
	memFrac float64
	pid     uint32

	act    activity
	fbUsed int64
}

type xidEvent struct {
	xid uint64
	ts  int64
}

type op struct {
	ent *source.Entity
	g   *gpuSim
	gi  *giSim
	f   *fieldInfo
}

type unsupported struct {
	ent    *source.Entity
	id     uint16
	reason string
}

type groupPlan struct {
	ops      []op
	unsup    []unsupported
	reported bool
	xid      bool
	// health runs the GPUs' health checks (source.Group.Health).
	health bool
}

// Violation counters.
const (
	violPower = iota
	violThermal
	violBoard
	violLowUtil
	numViol
)

// New builds a simulated node.
func New(cfg Config) (*Source, error) {
	r, err := resolve(cfg)
	if err != nil {
		return nil, err
	}
	s := &Source{cfg: r, seed: uint64(r.Seed)}
	// One NVLink domain: every GPU of the node is in the same cluster.
	s.fabricCluster = formatUUID("", hash4(s.seed, 0, tagFabric, 0), hash4(s.seed, 0, tagFabric, 1))
	s.job = newJob(s.seed, 0)
	s.setEventRates()
	usedPIDs := make(map[uint32]bool)
	pid := func(a, b uint64) uint32 {
		p := uint32(2000 + hash4(s.seed, a, tagPID, b)%900_000)
		for usedPIDs[p] {
			p++
		}
		usedPIDs[p] = true
		return p
	}
	m := r.model
	for i := 0; i < r.GPUs; i++ {
		h := hash4(s.seed, uint64(i), tagIdentity, 0)
		ent := source.NewGPU(i, formatUUID("GPU-", h, hash4(s.seed, uint64(i), tagIdentity, 1)), pciBusID(i), m.name)
		// A training job holds 78-88% of the memory: full, as jobs are, and
		// flat, far from the top at which GPUFramebufferRunningOut warns,
		// which a healthy fleet should not trip.
		g := &gpuSim{
			idx:     i,
			ent:     &ent,
			serial:  fmt.Sprintf("%013d", h%10_000_000_000_000),
			memFrac: 0.78 + 0.10*fraction(hash4(s.seed, uint64(i), tagMem, 0)),
			ambient: 24 + 8*fraction(hash4(s.seed, uint64(i), tagAmbient, 0)),
		}
		for _, k := range r.IdleGPUs {
			g.idle = g.idle || k == i
		}
		for _, k := range r.FreeGPUs {
			g.free = g.free || (k == i && !g.idle)
		}
		for _, k := range r.LightGPUs {
			g.light = g.light || (k == i && !g.idle && !g.free)
		}
		if r.plans != nil {
			g.plan = r.plans[i]
		}
		if !r.migOn[i] && len(r.Workloads) > 0 && r.Workloads[i] != DataParallel {
			kj := newKindJob(r.Workloads[i], s.seed, uint64(5000+i), r.StepJitter)
			g.kind = &kj
		}
		g.pids[0] = pid(uint64(i), 0)
		g.pids[1] = pid(uint64(i), 1)
		if r.migOn[i] {
			s.addInstances(g, pid)
		}
		s.gpus = append(s.gpus, g)
	}
	s.assignMIGKinds()
	for _, g := range s.gpus {
		g.listed = true
		s.entities = append(s.entities, g.ent)
	}
	return s, nil
}

// addInstances gives a GPU in MIG mode its GPU instances, in the order of
// the layout, each with what its scenario runs on it, if any.
func (s *Source) addInstances(g *gpuSim, pid func(a, b uint64) uint32) {
	r, i := s.cfg, g.idx
	usable := r.model.fbTotal - r.model.fbReserved
	for k, p := range r.mig {
		e := *g.ent
		e.Kind = source.GPUInstance
		e.GPUInstanceID = k + 1
		if len(r.mig) == 1 && p.compute == migComputeSlices {
			e.GPUInstanceID = 0
		}
		e.GPUInstanceProfile = p.name
		e.MIGUUID = formatUUID("MIG-", hash4(s.seed, uint64(i), tagIdentity, uint64(100+k)), hash4(s.seed, uint64(i), tagIdentity, uint64(200+k)))
		key := uint64(1000 + i*16 + k)
		gi := &giSim{
			idx: k, ent: &e, prof: p, job: newJob(s.seed, key),
			fbTotal: instanceMemory(p, usable),
			memFrac: 0.75 + 0.13*fraction(hash4(s.seed, key, tagMem, 0)),
			pid:     pid(uint64(i), uint64(10+k)),
		}
		if g.plan != nil && k < len(g.plan.instances) {
			gi.w = g.plan.instances[k].w
		}
		g.gis = append(g.gis, gi)
	}
}

// dgxBusIDs are the PCI buses of the GPUs of a DGX H100, in index order.
var dgxBusIDs = [MaxGPUs]int{0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb, 0x19, 0x2b, 0x3b, 0x5e, 0x9b, 0xac, 0xbb, 0xdc}

func pciBusID(i int) string { return fmt.Sprintf("00000000:%02X:00.0", dgxBusIDs[i]) }

func formatUUID(prefix string, a, b uint64) string {
	return fmt.Sprintf("%s%08x-%04x-%04x-%04x-%012x", prefix, uint32(a>>32), uint16(a>>16), uint16(a), uint16(b>>48), b&0xffffffffffff)
}

// Name is the source label.
func (s *Source) Name() string { return Name }

// Hostname is the simulated node's name.
func (s *Source) Hostname() string { return s.cfg.Hostname }

// Status is always up; GPUs unplugged but still listed are lost.
func (s *Source) Status() source.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := source.Status{Up: true}
	for _, g := range s.gpus {
		if g.unplugged && g.listed {
			st.Lost = append(st.Lost, g.ent.Key())
		}
	}
	return st
}

// Unplug takes GPU gpu off the simulated bus, as unbinding it from the
// driver does: it gives no samples from now on, and leaves the entities at
// the next bind/unbind poll.
func (s *Source) Unplug(gpu int) error { return s.setPlugged(gpu, false) }

// Replug puts an unplugged GPU back, with its old identity; it joins the
// entities at the next bind/unbind poll.
func (s *Source) Replug(gpu int) error { return s.setPlugged(gpu, true) }

func (s *Source) setPlugged(gpu int, on bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if gpu < 0 || gpu >= len(s.gpus) {
		return fmt.Errorf("sim: GPU %d: the node has GPUs 0..%d", gpu, len(s.gpus)-1)
	}
	s.gpus[gpu].unplugged = !on
	return nil
}

// Close releases nothing; the simulator holds no outside resources.
func (s *Source) Close() error { return nil }

// Entities returns the GPUs, and their MIG instances when the watched
// fields are sampled on them, in a stable order.
func (s *Source) Entities() []*source.Entity {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*source.Entity, len(s.entities))
	copy(out, s.entities)
	return out
}

// Watch plans which (entity, field) pairs each group samples.
func (s *Source) Watch(groups []source.Group) error {
	groups, derive := source.DeriveBaseUnits(groups, func(id uint16) bool { return fieldsByID[id] != nil })
	s.mu.Lock()
	defer s.mu.Unlock()
	s.derive = derive
	s.watched = slices.Clone(groups)
	s.watchLocked(groups)
	return nil
}

func (s *Source) watchLocked(groups []source.Group) {
	needMIG := false
	for _, gr := range groups {
		for _, f := range gr.Fields {
			info := fieldsByID[f.ID]
			if info == nil {
				continue
			}
			needMIG = needMIG || info.scope == scopeGPUAndMIG
		}
	}
	needMIG = needMIG && len(s.cfg.mig) > 0

	// A new slice: Entities handed out copies, but the engine may still
	// hold one taken before this change.
	s.entities = nil
	for _, g := range s.gpus {
		if !g.listed {
			continue
		}
		s.entities = append(s.entities, g.ent)
		if needMIG {
			for _, gi := range g.gis {
				s.entities = append(s.entities, gi.ent)
			}
		}
	}

	s.groups = make([]groupPlan, len(groups))
	s.xidWatched = false
	for i, gr := range groups {
		p := &s.groups[i]
		p.health = gr.Health
		for _, f := range gr.Fields {
			s.plan(p, f.ID, needMIG)
		}
		if p.xid {
			if s.xidWatched {
				p.xid = false // events are handed over once, by the first group
			}
			s.xidWatched = true
		}
	}
}

func (s *Source) plan(p *groupPlan, id uint16, needMIG bool) {
	info := fieldsByID[id]
	unsup := func(reason string) {
		for _, g := range s.gpus {
			if !g.listed {
				continue
			}
			p.unsup = append(p.unsup, unsupported{ent: g.ent, id: id, reason: reason})
		}
	}
	switch {
	case slices.Contains(s.cfg.model.notReported, id):
		unsup("a real " + s.cfg.model.name + " reports no value for it (nvidia-smi shows N/A)")
		return
	case id == fieldid.FanSpeed && !s.cfg.model.fan:
		unsup("the simulated " + s.cfg.model.key + " is a passively cooled data-center GPU; it has no fan")
		return
	case info == nil && fieldid.Of(id).Level == fieldid.LevelLink:
		unsup(linkFieldNote)
		return
	case info == nil:
		unsup("field not simulated")
		return
	case info.nvlink && s.cfg.links == 0:
		unsup("GPU model has no NVLink")
		return
	case isFabricField(id) && !s.cfg.model.fabric:
		unsup("GPU model joins no NVLink fabric")
		return
	case info.scope == scopeLink && info.link >= s.cfg.links:
		unsup("NVLink index beyond the GPU's links")
		return
	}
	if id == fieldid.XIDErrors {
		p.xid = true
	}
	if id == fieldid.ExpP2PStatus {
		s.buildP2P()
	}
	for _, g := range s.gpus {
		if !g.listed {
			continue
		}
		if len(g.gis) > 0 && migUnsupported(id) {
			p.unsup = append(p.unsup, unsupported{ent: g.ent, id: id, reason: migUtilNote})
			continue
		}
		// Per-link fields (..._L<n>) are GPU fields in DCGM, one per link
		// index, so they are sampled on the GPU as the DCGM source reads them.
		p.ops = append(p.ops, op{ent: g.ent, g: g, f: info})
		if needMIG && (info.scope == scopeGPUAndMIG || info.scope == scopeText) {
			for _, gi := range g.gis {
				p.ops = append(p.ops, op{ent: gi.ent, g: g, gi: gi, f: info})
			}
		}
	}
}

// Collect samples every field of a group at the clock's current time.
func (s *Source) Collect(ctx context.Context, group int, sink source.Sink) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sim: collect group %d: %w", group, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if group < 0 || group >= len(s.groups) {
		return fmt.Errorf("sim: collect group %d: only %d groups are watched", group, len(s.groups))
	}
	now := s.cfg.Now()
	ns := now.UnixNano()
	tick := floorDiv(ns, tickNS)
	s.advance(tick)
	s.sample(ns, tick)
	changed := false
	if s.cfg.BindUnbindPoll > 0 && !now.Before(s.nextList) {
		s.nextList = now.Add(s.cfg.BindUnbindPoll)
		changed = s.relist()
	}

	sink = s.derive.Sink(group, sink)
	p := &s.groups[group]
	if !p.reported {
		for _, u := range p.unsup {
			sink.Unsupported(u.ent, u.id, u.reason)
		}
		p.reported = true
	}
	for i := range p.ops {
		o := &p.ops[i]
		if o.g.unplugged {
			continue
		}
		if o.f.scope == scopeText {
			sink.Text(o.ent, o.f.id, s.text(o.g, o.f.id))
			continue
		}
		if o.f.id == fieldid.ExpP2PStatus {
			sink.P2P(o.ent, ns, o.g.p2p)
			continue
		}
		sink.Value(o.ent, o.f.id, ns, s.value(o))
	}
	if p.health {
		for _, g := range s.gpus {
			if g.listed && !g.unplugged {
				sink.Health(g.ent, ns, s.healthOf(g))
			}
		}
	}
	if p.xid {
		for _, g := range s.gpus {
			if g.unplugged || !g.listed {
				continue
			}
			for ; g.ringLen > 0; g.ringLen-- {
				ev := g.ring[g.ringStart]
				g.ringStart = (g.ringStart + 1) % xidRing
				sink.XID(g.ent, ev.xid, ev.ts)
			}
		}
	}
	if changed {
		return fmt.Errorf("sim: GPUs unplugged or replugged: %w", source.ErrEntitiesChanged)
	}
	return nil
}

// relist makes the listed GPUs the plugged ones and plans the watched
// groups again when that changes them. It says whether it did.
func (s *Source) relist() bool {
	changed := false
	for _, g := range s.gpus {
		if g.listed == g.unplugged {
			g.listed = !g.unplugged
			changed = true
		}
	}
	if changed {
		s.watchLocked(s.watched)
	}
	return changed
}

// Health checks as DCGM reports them after the sim's faults, shared by every
// GPU and never changed: a double-bit ECC error warns on the memory watch,
// XID 79 fails the GPU under every watch at once.
var (
	healthPass    = source.PassingHealth()
	healthDBEWarn = healthWith(source.HealthResult{Watch: "MEM", ErrorCode: "DCGM_FR_VOLATILE_DBE_DETECTED", Result: 10})
	healthXIDFail = healthWith(source.HealthResult{Watch: "ALL", ErrorCode: "DCGM_FR_XID_ERROR", Result: 20})
)

func healthWith(r source.HealthResult) []source.HealthResult {
	h := source.PassingHealth()
	source.SetHealth(h, r)
	return h
}

// buildP2P gives every listed GPU its P2P status towards each other listed
// GPU: OK over NVLink, NotSupported on a model without it, as DCGM reports a
// PCIe-only node.
func (s *Source) buildP2P() {
	status := source.P2POK
	if s.cfg.links == 0 {
		status = source.P2PNotSupported
	}
	for _, g := range s.gpus {
		g.p2p = nil
		if !g.listed {
			continue
		}
		for _, peer := range s.gpus {
			if peer != g && peer.listed {
				g.p2p = append(g.p2p, source.P2PLink{Peer: peer.ent.GPU, Status: status})
			}
		}
	}
}

func (s *Source) healthOf(g *gpuSim) []source.HealthResult {
	if s.nowTick >= g.healthUntil {
		return healthPass
	}
	if g.health >= 20 {
		return healthXIDFail
	}
	return healthDBEWarn
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// instanceMemory is a MIG instance's framebuffer, MiB: what a real GPU
// shows for the profile where it is known, else its share of the usable
// framebuffer.
func instanceMemory(p migProfile, usable int64) int64 {
	if p.memMiB > 0 {
		return p.memMiB
	}
	return int64(p.memSlices) * (usable / migMemSlices)
}
