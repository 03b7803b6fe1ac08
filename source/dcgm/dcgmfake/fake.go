// Package dcgmfake is an in-memory DCGM host engine behind the dcgm.Client
// interface. It samples watched fields on a clock like the real host engine,
// keeps them for maxKeepAge/maxKeepSamples, and can refuse connections, drop
// them, be killed and restarted, return blanks, refuse profiling on some
// GPUs and present a MIG hierarchy, so that the DCGM source can be tested
// without a GPU.
package dcgmfake

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/clock"
	"github.com/gpuscope/gpuscope/source/dcgm"
)

// GenFunc makes the value of the seq-th sample (from 1) of a field on an
// entity; ok false means the host engine has no sample for it.
type GenFunc func(e dcgm.EntityRef, field uint16, seq int64) (v dcgm.Value, ok bool)

// DefaultGen numbers the samples of each series 1, 2, 3, ... so that tests
// can tell a lost or repeated sample. The XID errors field has samples only when
// injected, as on a healthy GPU.
func DefaultGen(_ dcgm.EntityRef, field uint16, seq int64) (dcgm.Value, bool) {
	if field == fieldid.XIDErrors {
		return dcgm.Value{}, false
	}
	return dcgm.Value{Kind: dcgm.KindInt64, Int: seq}, true
}

// Fake is a fake host engine and the client connected to it.
type Fake struct {
	mu sync.Mutex

	valueLimit int

	gpus     []dcgm.GPUInfo
	migs     []dcgm.MIGInfo
	switches []uint
	cpus     []dcgm.CPUInfo
	links    []dcgm.LinkInfo
	gpuLinks []dcgm.GPULinkInfo
	// profFields lists the profiling fields each GPU supports; a GPU
	// missing from the map supports none.
	profFields map[uint][]uint16
	profErr    error
	pauseErr   error
	incidents  []dcgm.HealthIncident
	p2p        [][]int
	p2pErr     error
	gen        GenFunc
	clock      clock.Clock
	// fabric is what each GPU's fabric fields answer, by GPU ID. A GPU
	// missing from it has a healthy fabric (HealthyFabric), unless a test
	// set its own generator (genSet), which then answers them.
	fabric map[uint]Fabric
	genSet bool
	// version is the release the fake claims; "" is DefaultVersion.
	version string

	// refused holds the (entity, field) pairs the host engine answers
	// with an error status, and that status.
	refused map[seriesKey]int
	// Widest reads, for tests: the most pairs one LatestValues call asked
	// for and the most values one ValuesSince call returned.
	maxLatestPairs, maxSinceValues int

	running   bool
	connected bool
	refuse    error
	// hang, while set, holds every client call until it is closed: a host
	// engine that accepted the connection and stopped answering.
	hang    chan struct{}
	hanging int // calls held by hang now

	next        dcgm.Handle
	groups      map[dcgm.Handle][]dcgm.EntityRef
	fieldGroups map[dcgm.Handle][]uint16
	watches     []*watch
	series      map[seriesKey]*series
	healthOn    map[dcgm.Handle]bool
	paused      bool

	// Stats, for tests.
	connects          int
	gpuCalls          int
	fieldGroupsMade   int
	watchCalls        []WatchCall
	lastConnectParams dcgm.ConnectParams
}

// WatchCall records one WatchFields call.
type WatchCall struct {
	Fields         []uint16
	Entities       []dcgm.EntityRef
	UpdateFreq     time.Duration
	MaxKeepAge     time.Duration
	MaxKeepSamples int
}

type watch struct {
	group, fieldGroup dcgm.Handle
	freq, keepAge     time.Duration
	keepSamples       int
	// last is the time of the latest generated sample, Unix microseconds.
	last int64
}

type seriesKey struct {
	e     dcgm.EntityRef
	field uint16
}

type series struct {
	seq     int64
	samples []dcgm.Value
	keepAge time.Duration
	keep    int
}

// Option configures a Fake.
type Option func(*Fake)

// WithGPUs sets the GPUs; by default there are two.
func WithGPUs(g ...dcgm.GPUInfo) Option { return func(f *Fake) { f.gpus = g } }

// WithMIG sets the MIG hierarchy. The MIG UUIDs are dropped: go-dcgm's
// MIG entity info has none (MigEntityInfo, pkg/dcgm/mig.go); the adapter
// reads them through NVML (godcgm.WithMIGUUIDs).
func WithMIG(m ...dcgm.MIGInfo) Option {
	return func(f *Fake) {
		f.migs = slices.Clone(m)
		for i := range f.migs {
			f.migs[i].MIGUUID = ""
		}
	}
}

// WithCPUs sets the CPU hierarchy; by default there is none.
func WithCPUs(c ...dcgm.CPUInfo) Option { return func(f *Fake) { f.cpus = c } }

// WithSwitches sets NvSwitches and their links.
func WithSwitches(ids []uint, links []dcgm.LinkInfo) Option {
	return func(f *Fake) { f.switches, f.links = ids, links }
}

// WithGPULinks sets the GPUs' NVLinks.
func WithGPULinks(l ...dcgm.GPULinkInfo) Option { return func(f *Fake) { f.gpuLinks = l } }

// WithProfiling sets the profiling fields each GPU supports.
func WithProfiling(m map[uint][]uint16) Option { return func(f *Fake) { f.profFields = m } }

// WithClock sets the clock the fake host engine samples on; the wall clock
// by default. Give the source the same clock, and a test decides when
// samples are taken by moving it.
func WithClock(c clock.Clock) Option { return func(f *Fake) { f.clock = clock.Or(c) } }

// WithGen sets the value generator.
func WithGen(g GenFunc) Option { return func(f *Fake) { f.gen, f.genSet = g, true } }

// New returns a running fake host engine.
func New(opts ...Option) *Fake {
	f := &Fake{
		gpus: []dcgm.GPUInfo{
			{ID: 0, UUID: "GPU-00000000-0000-0000-0000-000000000000", PCIBusID: "00000000:07:00.0", Model: "NVIDIA H100 80GB HBM3"},
			{ID: 1, UUID: "GPU-11111111-1111-1111-1111-111111111111", PCIBusID: "00000000:0F:00.0", Model: "NVIDIA H100 80GB HBM3"},
		},
		profFields: map[uint][]uint16{},
		refused:    map[seriesKey]int{},
		fabric:     map[uint]Fabric{},
		gen:        DefaultGen,
		clock:      clock.Real,
		running:    true,
		next:       1,
	}
	f.reset()
	for _, o := range opts {
		o(f)
	}
	return f
}

// reset forgets everything a host engine keeps in memory.
func (f *Fake) reset() {
	f.groups = map[dcgm.Handle][]dcgm.EntityRef{}
	f.fieldGroups = map[dcgm.Handle][]uint16{}
	f.watches = nil
	f.series = map[seriesKey]*series{}
	f.healthOn = map[dcgm.Handle]bool{}
	f.paused = false
	f.connected = false
}

// Kill stops the host engine: the connection drops and new ones are refused
// until Restart.
func (f *Fake) Kill() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running = false
	f.reset()
}

// Restart starts a killed host engine, empty as after a real restart.
func (f *Fake) Restart() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running = true
}

// DropConnection breaks the current connection; the host engine keeps
// running and accepts a new one.
func (f *Fake) DropConnection() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reset()
}

// Refuse makes Connect fail with err (nil accepts again).
func (f *Fake) Refuse(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refuse = err
}

// SetProfilingError makes SupportedProfilingFields fail with err.
func (f *Fake) SetProfilingError(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.profErr = err
}

// SetPauseError makes PauseProfiling and ResumeProfiling fail with err.
func (f *Fake) SetPauseError(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pauseErr = err
}

// SetHealth sets what HealthCheck reports.
func (f *Fake) SetHealth(in ...dcgm.HealthIncident) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.incidents = in
}

// SetP2P sets what NvLinkP2PStatus reports: row i, column j is GPU i's
// status towards GPU j; err, when not nil, is returned instead.
func (f *Fake) SetP2P(matrix [][]int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.p2p, f.p2pErr = matrix, err
}

// Inject adds one sample of field on e, stamped now, to every watch that
// covers it, as if the host engine had just sampled it (an XID event, a
// blank). It has an effect only while the field is watched on e.
func (f *Fake) Inject(e dcgm.EntityRef, field uint16, v dcgm.Value) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.series[seriesKey{e, field}]
	if s == nil {
		return
	}
	// Samples due before now come first, as the host engine takes them.
	f.sample()
	ts := f.clock.Now().UnixMicro()
	if n := len(s.samples); n > 0 && s.samples[n-1].TS >= ts {
		ts = s.samples[n-1].TS + 1
	}
	v.Entity, v.FieldID, v.TS = e, field, ts
	s.append(v, ts)
}

// Clock returns the clock the fake samples on.
func (f *Fake) Clock() clock.Clock { return f.clock }

// Paused reports whether profiling is paused.
func (f *Fake) Paused() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.paused
}

// Connects counts successful connections.
func (f *Fake) Connects() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.connects
}

// FieldGroupsCreated counts CreateFieldGroup calls since the fake started.
func (f *Fake) FieldGroupsCreated() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fieldGroupsMade
}

// LiveFieldGroups returns the fields of each field group that exists now.
func (f *Fake) LiveFieldGroups() [][]uint16 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([][]uint16, 0, len(f.fieldGroups))
	for _, fs := range f.fieldGroups {
		out = append(out, slices.Clone(fs))
	}
	return out
}

// LiveGroups counts the entity groups that exist now.
func (f *Fake) LiveGroups() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.groups)
}

// WatchCalls returns every WatchFields call so far.
func (f *Fake) WatchCalls() []WatchCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.watchCalls)
}

// LastConnectParams returns what the last Connect was asked for.
func (f *Fake) LastConnectParams() dcgm.ConnectParams {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastConnectParams
}

// Hang makes every client call from now on block, as a host engine that
// hangs rather than refusing; Unhang releases them.
func (f *Fake) Hang() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hang == nil {
		f.hang = make(chan struct{})
	}
}

// Unhang releases the calls Hang holds, and answers again.
func (f *Fake) Unhang() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hang != nil {
		close(f.hang)
		f.hang = nil
	}
}

// wait blocks while the fake hangs.
func (f *Fake) wait() {
	f.mu.Lock()
	h := f.hang
	if h != nil {
		f.hanging++
	}
	f.mu.Unlock()
	if h != nil {
		<-h
		f.mu.Lock()
		f.hanging--
		f.mu.Unlock()
	}
}

// Hanging is the number of client calls Hang holds now.
func (f *Fake) Hanging() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hanging
}

// check fails when there is no live connection.
func (f *Fake) check() error {
	if !f.connected {
		return fmt.Errorf("fake host engine: %w", dcgm.ErrConnectionLost)
	}
	return nil
}

// Connect implements dcgm.Client.
func (f *Fake) Connect(p dcgm.ConnectParams) error {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastConnectParams = p
	switch {
	case f.refuse != nil:
		return f.refuse
	case !f.running:
		return fmt.Errorf("%w at %s", dcgm.ErrNotListening, p.Address)
	}
	f.reset()
	f.connected = true
	f.connects++
	return nil
}

// Disconnect implements dcgm.Client.
func (f *Fake) Disconnect() error {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.connected {
		f.reset()
	}
	return nil
}

// SetGPUs changes the GPUs the host engine lists from now on, as a GPU
// bound to or unbound from the driver does. Samples already kept stay.
func (f *Fake) SetGPUs(g ...dcgm.GPUInfo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gpus = slices.Clone(g)
}

// GPUCalls counts the calls of GPUs.
func (f *Fake) GPUCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gpuCalls
}

// GPUs implements dcgm.Client.
func (f *Fake) GPUs() ([]dcgm.GPUInfo, error) {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gpuCalls++
	if err := f.check(); err != nil {
		return nil, err
	}
	return slices.Clone(f.gpus), nil
}

// MIGHierarchy implements dcgm.Client.
func (f *Fake) MIGHierarchy() ([]dcgm.MIGInfo, error) {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(); err != nil {
		return nil, err
	}
	return slices.Clone(f.migs), nil
}

// SwitchLinks implements dcgm.Client.
func (f *Fake) SwitchLinks() ([]dcgm.LinkInfo, error) {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(); err != nil {
		return nil, err
	}
	return slices.Clone(f.links), nil
}

// GPULinks implements dcgm.Client.
func (f *Fake) GPULinks() ([]dcgm.GPULinkInfo, error) {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(); err != nil {
		return nil, err
	}
	return slices.Clone(f.gpuLinks), nil
}

// Switches implements dcgm.Client.
func (f *Fake) Switches() ([]uint, error) {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(); err != nil {
		return nil, err
	}
	return slices.Clone(f.switches), nil
}

// CPUs implements dcgm.Client.
func (f *Fake) CPUs() ([]dcgm.CPUInfo, error) {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(); err != nil {
		return nil, err
	}
	return slices.Clone(f.cpus), nil
}

// CreateGroup implements dcgm.Client.
func (f *Fake) CreateGroup(_ string, entities []dcgm.EntityRef) (dcgm.Handle, error) {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(); err != nil {
		return 0, err
	}
	h := f.next
	f.next++
	f.groups[h] = slices.Clone(entities)
	return h, nil
}

// DestroyGroup implements dcgm.Client.
func (f *Fake) DestroyGroup(h dcgm.Handle) error {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(); err != nil {
		return err
	}
	if _, ok := f.groups[h]; !ok {
		return fmt.Errorf("fake host engine: no group %d", h)
	}
	delete(f.groups, h)
	f.watches = slices.DeleteFunc(f.watches, func(w *watch) bool { return w.group == h })
	return nil
}

// CreateFieldGroup implements dcgm.Client.
func (f *Fake) CreateFieldGroup(_ string, fields []uint16) (dcgm.Handle, error) {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(); err != nil {
		return 0, err
	}
	if len(fields) == 0 {
		return 0, fmt.Errorf("fake host engine: empty field group")
	}
	if err := f.knowsFields(fields); err != nil {
		return 0, err
	}
	if len(fields) > dcgm.MaxFieldsPerGroup {
		// DCGM refuses it with DCGM_ST_MAX_LIMIT.
		return 0, fmt.Errorf("fake host engine: %d fields in one field group, the most is %d", len(fields), dcgm.MaxFieldsPerGroup)
	}
	h := f.next
	f.next++
	f.fieldGroups[h] = slices.Clone(fields)
	f.fieldGroupsMade++
	return h, nil
}

// DestroyFieldGroup implements dcgm.Client.
func (f *Fake) DestroyFieldGroup(h dcgm.Handle) error {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(); err != nil {
		return err
	}
	if _, ok := f.fieldGroups[h]; !ok {
		return fmt.Errorf("fake host engine: no field group %d", h)
	}
	delete(f.fieldGroups, h)
	f.watches = slices.DeleteFunc(f.watches, func(w *watch) bool { return w.fieldGroup == h })
	return nil
}

// WatchFields implements dcgm.Client. Like DCGM, it refuses a watch that
// includes a profiling field one GPU of the group cannot sample.
func (f *Fake) WatchFields(group, fieldGroup dcgm.Handle, updateFreq, maxKeepAge time.Duration, maxKeepSamples int) error {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(); err != nil {
		return err
	}
	ents, ok := f.groups[group]
	fields, ok2 := f.fieldGroups[fieldGroup]
	if !ok || !ok2 {
		return fmt.Errorf("fake host engine: bad group %d or field group %d", group, fieldGroup)
	}
	if updateFreq <= 0 || maxKeepSamples <= 0 {
		return fmt.Errorf("fake host engine: bad watch parameters %s/%d", updateFreq, maxKeepSamples)
	}
	for _, e := range ents {
		if e.Group != dcgm.EntityGPU {
			continue
		}
		for _, id := range fields {
			if fieldid.IsProfiling(id) && !slices.Contains(f.profFields[e.ID], id) {
				return fmt.Errorf("fake host engine: GPU %d cannot watch profiling field %d: %w", e.ID, id, dcgm.ErrNotSupported)
			}
		}
	}
	f.watchCalls = append(f.watchCalls, WatchCall{
		Fields: slices.Clone(fields), Entities: slices.Clone(ents),
		UpdateFreq: updateFreq, MaxKeepAge: maxKeepAge, MaxKeepSamples: maxKeepSamples,
	})
	// DCGM takes the first sample as the watch starts (go-dcgm forces an
	// update after dcgmWatchFields), so the watch begins one period back.
	now := f.clock.Now().UnixMicro()
	f.watches = append(f.watches, &watch{group: group, fieldGroup: fieldGroup, freq: updateFreq, keepAge: maxKeepAge, keepSamples: maxKeepSamples, last: now - updateFreq.Microseconds()})
	for _, e := range ents {
		for _, id := range fields {
			k := seriesKey{e, id}
			s := f.series[k]
			if s == nil {
				s = &series{keepAge: maxKeepAge, keep: maxKeepSamples}
				f.series[k] = s
			}
			s.keepAge, s.keep = max(s.keepAge, maxKeepAge), max(s.keep, maxKeepSamples)
		}
	}
	return nil
}

// sample generates the samples every watch has taken up to now.
func (f *Fake) sample() {
	now := f.clock.Now().UnixMicro()
	for _, w := range f.watches {
		step := w.freq.Microseconds()
		if step <= 0 {
			step = 1
		}
		for w.last+step <= now {
			w.last += step
			for _, e := range f.groups[w.group] {
				for _, id := range f.fieldGroups[w.fieldGroup] {
					s := f.series[seriesKey{e, id}]
					v, ok := f.value(e, id, s.seq+1)
					if !ok {
						continue
					}
					s.seq++
					if f.paused && fieldid.IsProfiling(id) {
						// A paused profiling module gives blanks.
						v = dcgm.Value{Kind: dcgm.KindFloat64, Float: 140737488355328.0}
					}
					v.Entity, v.FieldID, v.TS = e, id, w.last
					s.append(v, w.last)
				}
			}
		}
	}
}

func (s *series) append(v dcgm.Value, now int64) {
	s.samples = append(s.samples, v)
	cut := 0
	for cut < len(s.samples) && (now-s.samples[cut].TS > s.keepAge.Microseconds() || len(s.samples)-cut > s.keep) {
		cut++
	}
	if cut > 0 {
		s.samples = append(s.samples[:0], s.samples[cut:]...)
	}
}

// RefuseField makes the host engine answer field on e with status (a
// dcgmReturn_t other than OK and NO_DATA), as DCGM does for a field the
// entity cannot give: NVLink bandwidth on a GPU without NVLink, vGPU and
// PID fields.
func (f *Fake) RefuseField(e dcgm.EntityRef, field uint16, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refused[seriesKey{e, field}] = status
}

// WidestReads returns the most (entity, field) pairs one LatestValues
// call asked for, and the most values one ValuesSince call returned.
func (f *Fake) WidestReads() (latestPairs, sinceValues int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.maxLatestPairs, f.maxSinceValues
}

// ValuesSince implements dcgm.Client. Like DCGM's dcgmGetValuesSince_v2
// (dcgmlib/src/DcgmApi.cpp, helperGetValuesSince), the whole call fails
// when any (entity, field) pair of the group has a status other than OK or
// NO_DATA.
func (f *Fake) ValuesSince(group, fieldGroup dcgm.Handle, since int64) ([]dcgm.Value, int64, error) {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(); err != nil {
		return nil, 0, err
	}
	ents, ok := f.groups[group]
	fields, ok2 := f.fieldGroups[fieldGroup]
	if !ok || !ok2 {
		return nil, 0, fmt.Errorf("fake host engine: bad group %d or field group %d", group, fieldGroup)
	}
	f.sample()
	next := since
	var out []dcgm.Value
	for _, e := range ents {
		for _, id := range fields {
			if st, ok := f.refused[seriesKey{e, id}]; ok {
				// go-dcgm's message (pkg/dcgm/field_values.go, GetValuesSince).
				return nil, 0, fmt.Errorf("dcgmGetValuesSince_v2 failed with error code %d", st)
			}
			s := f.series[seriesKey{e, id}]
			if s == nil {
				continue
			}
			for _, v := range s.samples {
				if v.TS >= since {
					out = append(out, v)
					next = max(next, v.TS+1)
				}
			}
		}
	}
	if f.valueLimit > 0 && len(out) > f.valueLimit {
		return nil, 0, fmt.Errorf("fake host engine: %d values: %w", len(out), dcgm.ErrTooManyValues)
	}
	f.maxSinceValues = max(f.maxSinceValues, len(out))
	return out, next, nil
}

// LatestValues implements dcgm.Client: the latest kept sample of each
// pair, each with its own status, as dcgmEntitiesGetLatestValues gives them
// (DcgmApi.cpp, tsapiEntitiesGetLatestValues): a refused pair carries its
// status, one without a sample DCGM_ST_NO_DATA, and neither fails the call.
// A call for more than dcgm.MaxLatestValues pairs fails, so that a test
// sees a read that is not batched.
func (f *Fake) LatestValues(entities []dcgm.EntityRef, fields []uint16) ([]dcgm.Value, error) {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(); err != nil {
		return nil, err
	}
	n := len(entities) * len(fields)
	if n == 0 || n > dcgm.MaxLatestValues {
		return nil, fmt.Errorf("fake host engine: %d entities x %d fields: want 1 to %d values in one call", len(entities), len(fields), dcgm.MaxLatestValues)
	}
	f.maxLatestPairs = max(f.maxLatestPairs, n)
	f.sample()
	out := make([]dcgm.Value, 0, n)
	for _, e := range entities {
		for _, id := range fields {
			k := seriesKey{e, id}
			v := dcgm.Value{Entity: e, FieldID: id, Status: dcgm.StatusNoData}
			if st, ok := f.refused[k]; ok {
				v.Status = st
			} else if s := f.series[k]; s != nil && len(s.samples) > 0 {
				v = s.samples[len(s.samples)-1]
			}
			out = append(out, v)
		}
	}
	return out, nil
}

// SetValueLimit makes ValuesSince fail with dcgm.ErrTooManyValues when a
// read would return more than n values (0: no limit), as go-dcgm does past
// its limit.
func (f *Fake) SetValueLimit(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.valueLimit = n
}

// HealthSet implements dcgm.Client.
func (f *Fake) HealthSet(group dcgm.Handle) error {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(); err != nil {
		return err
	}
	f.healthOn[group] = true
	return nil
}

// HealthCheck implements dcgm.Client.
func (f *Fake) HealthCheck(group dcgm.Handle) ([]dcgm.HealthIncident, error) {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(); err != nil {
		return nil, err
	}
	if !f.healthOn[group] {
		return nil, fmt.Errorf("fake host engine: no health watches on group %d", group)
	}
	return slices.Clone(f.incidents), nil
}

// NvLinkP2PStatus implements dcgm.Client.
func (f *Fake) NvLinkP2PStatus() ([][]int, error) {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(); err != nil {
		return nil, err
	}
	if f.p2pErr != nil {
		return nil, f.p2pErr
	}
	out := make([][]int, len(f.p2p))
	for i, row := range f.p2p {
		out[i] = slices.Clone(row)
	}
	return out, nil
}

// SupportedProfilingFields implements dcgm.Client.
func (f *Fake) SupportedProfilingFields(gpu uint) ([]uint16, error) {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(); err != nil {
		return nil, err
	}
	if f.profErr != nil {
		return nil, f.profErr
	}
	return slices.Clone(f.profFields[gpu]), nil
}

// PauseProfiling implements dcgm.Client.
func (f *Fake) PauseProfiling() error { return f.setPaused(true) }

// ResumeProfiling implements dcgm.Client.
func (f *Fake) ResumeProfiling() error { return f.setPaused(false) }

func (f *Fake) setPaused(p bool) error {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(); err != nil {
		return err
	}
	if f.pauseErr != nil {
		return f.pauseErr
	}
	f.paused = p
	return nil
}

var _ dcgm.Client = (*Fake)(nil)
