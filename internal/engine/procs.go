package engine

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/source"
)

// This file keeps the per-process series (Options.Processes): the compute
// processes the source lists on each GPU and MIG GPU instance, read from the
// source's process list (source.ProcessLister, which every source refreshes
// in the background) by a loop of their own, capped per GPU, and stored as
// label strings and values that a render writes from memory. A process that
// the list no longer holds has no series from the next refresh on, as in
// dcgm-exporter (internal/pkg/transformation/process_metrics.go: the
// per-process values are read afresh at every collection) and in
// nvidia_gpu_exporter (internal/exporter/exporter.go, renderApps: the
// series of each collection's process list).

// ProcessOptions configure the per-process series.
type ProcessOptions struct {
	// Enabled exports them; off by default, as they cost series per
	// process.
	Enabled bool
	// MaxPerGPU caps the processes exported per GPU, its MIG instances'
	// together; DefaultMaxProcessesPerGPU when 0.
	MaxPerGPU int
}

// DefaultMaxProcessesPerGPU is the default cap: more than the 48 clients an
// MPS server admits on a GPU, so that a busy MPS GPU is exported whole,
// and few enough that a runaway of processes costs a bounded number of
// series.
const DefaultMaxProcessesPerGPU = 64

// ProcessInterval is how often the engine reads the source's process list.
// The read is from memory: the NVML source and NVML beside DCGM renew
// their lists every 5 s, the sim computes its own.
const ProcessInterval = time.Second

// MaxProcessNameBytes bounds the process_name label: a longer name is cut
// at a character boundary and ends in "...". The name comes from the
// process itself (its command line), so it can be anything.
const MaxProcessNameBytes = 128

// maxDroppedTracked bounds the PIDs of one GPU remembered as left out at
// the last refresh; one left out past it counts again at each refresh.
const maxDroppedTracked = 4096

// check refuses a negative cap and puts the default in for none.
func (o *ProcessOptions) check() error {
	if o.MaxPerGPU < 0 {
		return fmt.Errorf("engine: a cap of %d processes per GPU: use 1 or more", o.MaxPerGPU)
	}
	if o.MaxPerGPU == 0 {
		o.MaxPerGPU = DefaultMaxProcessesPerGPU
	}
	return nil
}

// procState is the engine's state of the process list.
type procState struct {
	// mu serialises refreshes. seen says the list has been read, listed
	// that the source could list it then; both are guarded by Engine.mu.
	mu           sync.Mutex
	seen, listed bool
}

// procSeries is one process's series on one GPU or MIG GPU instance.
type procSeries struct {
	pid  uint32
	name string
	pod  [3]string
	// base is the device's label set the strings were built from.
	base string
	// labels is the label set of gpuscope's families: the device's
	// identity, host and label-type fields, pid, and the process's pod
	// labels; infoTail adds process_name to it.
	labels, infoTail string
	// nvgpuExporter is nvidia_gpu_exporter's label set: uuid, pid, process_name.
	// nvgpuExporterDup marks a second listing of a process under the same GPU
	// (two MIG instances), whose memory the first one's nvgpuExporterMem holds.
	nvgpuExporter       string
	nvgpuExporterDup    bool
	nvgpuExporterMem    float64
	nvgpuExporterHasMem bool
	mem                 float64
	hasMem              bool
	sm                  float64
	hasSM               bool
}

// procEntity is what the engine knows of the processes on one entity.
type procEntity struct {
	// series are the exported processes on this GPU or MIG GPU instance.
	series []procSeries
	// listed counts the processes the source lists on the entity, those
	// past the cap included; total, on a GPU, those on the GPU and its
	// MIG instances.
	listed, total int
	// dropped counts, on a GPU, the processes left out at the cap since
	// start, each once for every stretch of refreshes it is left out;
	// droppedPIDs are those left out at the last refresh.
	dropped     uint64
	droppedPIDs map[uint32]struct{}
	// droppedLabels is the GPU's label set of the dropped counter.
	droppedLabels string
}

// procUpdate is what one refresh found for one entity.
type procUpdate struct {
	series        []procSeries
	listed, total int
	newlyDropped  int
	droppedPIDs   map[uint32]struct{}
}

// procCand is one listed process on its entity.
type procCand struct {
	p      source.Process
	target *entityState
	prev   *procSeries
}

// startProcesses starts the process loop when per-process series are on.
func (e *Engine) startProcesses(ctx context.Context) {
	if e.opts.Processes.Enabled {
		e.loops.Add(1)
		go e.runProcesses(ctx)
	}
}

// runProcesses reads the source's process list every ProcessInterval on
// the engine's clock, arming one timer while it waits (Loops counts it).
func (e *Engine) runProcesses(ctx context.Context) {
	defer e.loops.Done()
	clk := e.opts.Clock
	next := clk.Now()
	for {
		e.refreshProcesses()
		now := clk.Now()
		for !next.After(now) {
			next = next.Add(ProcessInterval)
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

// refreshProcesses reads the process list and replaces the per-process
// series with it. A source that cannot list processes now (nil) has none,
// and nvidia_gpu_exporter's success family says so.
func (e *Engine) refreshProcesses() {
	e.proc.mu.Lock()
	defer e.proc.mu.Unlock()
	var list []source.Process
	if pl, ok := e.src.(source.ProcessLister); ok {
		list = pl.Processes()
	}
	listed := list != nil
	e.mu.RLock()
	updates := e.buildProcesses(list)
	e.mu.RUnlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, es := range e.order {
		u := updates[es]
		pe := &es.proc
		pe.series, pe.listed, pe.total = u.series, u.listed, u.total
		if es.ent.Kind != source.GPU {
			continue
		}
		if pe.droppedLabels == "" {
			pe.droppedLabels = renderLabels([]labelPair{{gpuLabel.name, gpuLabel.value(&es.ent, &e.opts)}, {uuidLabel.name, es.ent.UUID}})
		}
		pe.dropped += uint64(u.newlyDropped)
		pe.droppedPIDs = u.droppedPIDs
	}
	e.proc.listed, e.proc.seen = listed, true
}

// buildProcesses places each listed process on its GPU or MIG GPU
// instance, keeps at most the cap per GPU, and builds the series of those
// kept, reusing the strings of the last refresh where nothing changed.
// Called with mu held for reading.
func (e *Engine) buildProcesses(list []source.Process) map[*entityState]procUpdate {
	byGPU := e.placeProcesses(list)
	out := make(map[*entityState]procUpdate, len(byGPU))
	bases := map[*entityState]string{}
	limit := e.opts.Processes.MaxPerGPU
	for gpu, cands := range byGPU {
		sort.Slice(cands, func(i, j int) bool { return candLess(&cands[i], &cands[j]) })
		g := &procUpdate{total: len(cands), droppedPIDs: map[uint32]struct{}{}}
		ups := map[*entityState]*procUpdate{gpu: g}
		for i := range cands {
			c := &cands[i]
			u := ups[c.target]
			if u == nil {
				u = &procUpdate{}
				ups[c.target] = u
			}
			u.listed++
			if i < limit {
				u.series = append(u.series, e.procSeriesOf(c, bases))
				continue
			}
			// Left out: counted when it was not left out at the last
			// refresh (or could not be remembered then).
			if _, was := gpu.proc.droppedPIDs[c.p.PID]; !was {
				g.newlyDropped++
			}
			if len(g.droppedPIDs) < maxDroppedTracked {
				g.droppedPIDs[c.p.PID] = struct{}{}
			}
		}
		markNvidiaGPUExporterDuplicates(ups)
		for es, u := range ups {
			sort.Slice(u.series, func(i, j int) bool { return u.series[i].pid < u.series[j].pid })
			out[es] = *u
		}
	}
	return out
}

// markNvidiaGPUExporterDuplicates gives a process that runs in two MIG instances
// of one GPU one series under nvidia_gpu_exporter's labels, which name the
// GPU alone, with the memory of both.
func markNvidiaGPUExporterDuplicates(ups map[*entityState]*procUpdate) {
	if len(ups) < 2 {
		return
	}
	first := map[uint32]*procSeries{}
	for _, u := range ups {
		for i := range u.series {
			ps := &u.series[i]
			f, dup := first[ps.pid]
			if !dup {
				first[ps.pid] = ps
				continue
			}
			ps.nvgpuExporterDup = true
			f.nvgpuExporterMem += ps.nvgpuExporterMem
			f.nvgpuExporterHasMem = f.nvgpuExporterHasMem && ps.nvgpuExporterHasMem
		}
	}
}

// candLess orders the processes of one GPU for the cap: those exported at
// the last refresh first, so that a process keeps its series while it
// runs, then the largest memory first, then the lowest PID.
func candLess(a, b *procCand) bool {
	if (a.prev != nil) != (b.prev != nil) {
		return a.prev != nil
	}
	if a.p.UsedMemoryBytes != b.p.UsedMemoryBytes {
		return a.p.UsedMemoryBytes > b.p.UsedMemoryBytes
	}
	return a.p.PID < b.p.PID
}

// placeProcesses groups the listed processes by the GPU they run on, each
// on its entity: the MIG GPU instance it runs in, or the GPU. A process on
// a GPU or instance the engine does not export (-d) is left out; a
// process listed twice on one entity is one, with the memory of both.
func (e *Engine) placeProcesses(list []source.Process) map[*entityState][]procCand {
	gpus := map[string]*entityState{}
	type giKey struct {
		uuid string
		gi   int
	}
	gis := map[giKey]*entityState{}
	prev := map[*entityState]map[uint32]*procSeries{}
	for _, es := range e.order {
		switch es.ent.Kind {
		case source.GPU:
			gpus[es.ent.UUID] = es
		case source.GPUInstance:
			gis[giKey{es.ent.UUID, es.ent.GPUInstanceID}] = es
		default:
			continue
		}
		for i := range es.proc.series {
			if prev[es] == nil {
				prev[es] = map[uint32]*procSeries{}
			}
			prev[es][es.proc.series[i].pid] = &es.proc.series[i]
		}
	}
	byGPU := map[*entityState][]procCand{}
	type seenKey struct {
		es  *entityState
		pid uint32
	}
	seen := map[seenKey]int{}
	for _, p := range list {
		gpu := gpus[p.UUID]
		if gpu == nil {
			continue
		}
		target := gpu
		if p.GPUInstanceID >= 0 {
			if target = gis[giKey{p.UUID, p.GPUInstanceID}]; target == nil {
				continue
			}
		}
		if i, dup := seen[seenKey{target, p.PID}]; dup {
			c := &byGPU[gpu][i]
			c.p.UsedMemoryBytes = addMemory(c.p.UsedMemoryBytes, p.UsedMemoryBytes)
			continue
		}
		seen[seenKey{target, p.PID}] = len(byGPU[gpu])
		byGPU[gpu] = append(byGPU[gpu], procCand{p: p, target: target, prev: prev[target][p.PID]})
	}
	return byGPU
}

// unknownMemory is NVML's used memory of a process it cannot measure
// (Windows WDDM): the whole range.
const unknownMemory = math.MaxUint64

func addMemory(a, b uint64) uint64 {
	if a == unknownMemory || b == unknownMemory || a+b < a {
		return unknownMemory
	}
	return a + b
}

// procSeriesOf builds the series of one kept process.
func (e *Engine) procSeriesOf(c *procCand, bases map[*entityState]string) procSeries {
	base, ok := bases[c.target]
	if !ok {
		base = renderLabels(baseLabels(c.target, c.target.parent, e.plan, &e.opts))
		bases[c.target] = base
	}
	name := processNameLabel(c.p.Name)
	pod := e.processPod(c)
	var ps procSeries
	if pr := c.prev; pr != nil && pr.base == base && pr.name == name && pr.pod == pod {
		ps = *pr
	} else {
		ps = e.newProcSeries(c, base, name, pod)
	}
	ps.hasMem = c.p.UsedMemoryBytes != unknownMemory
	ps.nvgpuExporterHasMem, ps.nvgpuExporterDup = ps.hasMem, false
	ps.mem, ps.nvgpuExporterMem = 0, 0
	if ps.hasMem {
		ps.mem = float64(c.p.UsedMemoryBytes)
		// nvidia-smi prints MiB, rounded up (nvidia_gpu_exporter's
		// internal/nvmlnative/format.go, mib), which that exporter turns
		// into bytes.
		ps.nvgpuExporterMem = math.Ceil(ps.mem/(1<<20)) * (1 << 20)
	}
	// The driver gives no per-process SM share inside a MIG instance
	// (NVML answers -1 there): no series rather than a guess.
	ps.hasSM = c.p.SMUtil >= 0 && c.p.GPUInstanceID < 0 && c.target.ent.Kind == source.GPU && !math.IsInf(c.p.SMUtil, 0)
	ps.sm = 0
	if ps.hasSM {
		ps.sm = c.p.SMUtil / 100
	}
	return ps
}

// newProcSeries builds the label strings of a process.
func (e *Engine) newProcSeries(c *procCand, base, name string, pod [3]string) procSeries {
	ps := procSeries{pid: c.p.PID, name: name, pod: pod, base: base}
	pid := strconv.FormatUint(uint64(c.p.PID), 10)
	pairs := []labelPair{{labelPID, pid}}
	for i, n := range processPodLabels(e.opts.OldNamespace) {
		if pod[i] != "" {
			pairs = append(pairs, labelPair{n, pod[i]})
		}
	}
	ps.labels = appendLabels(base, pairs)
	ps.infoTail = "} "
	if name != "" {
		ps.infoTail = `,` + labelProcessName + `="` + escapeLabel(name) + `"} `
	}
	nv := []labelPair{{"uuid", nvidiaGPUExporterUUID(c.target.ent.UUID)}, {labelPID, pid}}
	if name != "" {
		nv = append(nv, labelPair{labelProcessName, name})
	}
	ps.nvgpuExporter = renderLabels(nv)
	return ps
}

// processPod is the pod, namespace and container of a process, from the
// first enricher that knows it.
func (e *Engine) processPod(c *procCand) [3]string {
	for _, el := range e.enr {
		if po, ok := el.e.(enrich.ProcessOwner); ok {
			if pod, ns, ctr, known := po.ProcessPod(&c.target.ent, c.p.PID); known {
				return [3]string{pod, ns, ctr}
			}
		}
	}
	return [3]string{}
}

// processPodLabels are the names of a process's pod labels: the pod
// enrichers', dcgm-exporter 1.x's under OldNamespace.
func processPodLabels(old bool) [3]string {
	names := [3]string{"pod", "namespace", "container"}
	if old {
		for i, n := range names {
			names[i] = oldNamespaceLabels[n]
		}
	}
	return names
}

// appendLabels appends pairs to a rendered label set (without its closing
// brace).
func appendLabels(set string, pairs []labelPair) string {
	var b strings.Builder
	b.WriteString(set)
	for _, l := range pairs {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(l.name)
		b.WriteString(`="`)
		b.WriteString(escapeLabel(l.value))
		b.WriteByte('"')
	}
	return b.String()
}

// processNameLabel is a process name as the process_name label carries
// it: valid UTF-8, control characters as '?', at most MaxProcessNameBytes
// bytes (a longer one is cut at a character boundary and ends in "...").
func processNameLabel(s string) string {
	if !utf8.ValidString(s) {
		invalidUTF8Labels.Add(1)
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	clean := true
	for _, r := range s {
		if unicode.IsControl(r) {
			clean = false
			break
		}
	}
	if clean && len(s) <= MaxProcessNameBytes {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			r = '?'
		}
		if b.Len()+utf8.RuneLen(r) > MaxProcessNameBytes {
			return cutName(b.String())
		}
		b.WriteRune(r)
	}
	return b.String()
}

// cutName ends a name that was too long in "...", within
// MaxProcessNameBytes.
func cutName(s string) string {
	for len(s) > MaxProcessNameBytes-3 {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s + "..."
}
