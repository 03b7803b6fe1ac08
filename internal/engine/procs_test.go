package engine

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

// procOwner is a pod enricher that also knows the pods of processes: the
// pod of each PID in pods, none for the others.
type procOwner struct {
	prometheus.Collector
	pods map[uint32][3]string
}

func (p *procOwner) LabelNames() []string             { return []string{"pod", "namespace", "container"} }
func (p *procOwner) Values(*source.Entity) []string   { return nil }
func (p *procOwner) Generation() uint64               { return 1 }
func (p *procOwner) Describe(chan<- *prometheus.Desc) {}
func (p *procOwner) Collect(chan<- prometheus.Metric) {}
func (p *procOwner) ProcessPod(_ *source.Entity, pid uint32) (string, string, string, bool) {
	v, ok := p.pods[pid]
	return v[0], v[1], v[2], ok
}

var _ enrich.ProcessOwner = (*procOwner)(nil)

// procNode is a scripted node of two GPUs, the second with MIG GPU
// instance 3, whose processes a test sets in src.Procs.
type procNode struct {
	src *sourcetest.Source
	clk *sourcetest.Clock
	e   *Engine
	gi  *source.Entity
}

func newProcNode(t *testing.T, csv string, opts Options) *procNode {
	t.Helper()
	clk := newClock()
	src := sourcetest.NewGPUs(2, func(*source.Entity, uint16, time.Time) (float64, bool) { return 1, true })
	src.Now = clk.Now
	gi := *src.Ents[1]
	gi.Kind, gi.GPUInstanceID, gi.GPUInstanceProfile = source.GPUInstance, 3, "3g.40gb"
	src.Ents = append(src.Ents, &gi)
	src.Procs = []source.Process{}
	opts.Source, opts.Counters, opts.DefaultInterval, opts.Window = src, parseSet(t, csv), time.Second, 10*time.Second
	opts.Hostname, opts.Now, opts.Log = "node-1", clk.Now, quietLog()
	e, err := New(opts)
	require.NoError(t, err)
	require.NoError(t, e.Open())
	return &procNode{src: src, clk: clk, e: e, gi: &gi}
}

// list sets the processes and lets the engine read them, as its loop does.
func (n *procNode) list(t *testing.T, procs []source.Process) map[string]*dto.MetricFamily {
	t.Helper()
	n.src.Lock()
	n.src.Procs = procs
	n.src.Unlock()
	n.clk.Add(time.Second)
	require.NoError(t, n.e.CollectAll(t.Context()))
	return scrape(t, n.e)
}

func (n *procNode) uuid(gpu int) string { return n.src.Ents[gpu].UUID }

// proc is a process on GPU gpu (gi -1) or its MIG instance gi.
func (n *procNode) proc(pid uint32, gpu, gi int, mib uint64, sm float64, name string) source.Process {
	return source.Process{PID: pid, UUID: n.uuid(gpu), GPUInstanceID: gi, UsedMemoryBytes: mib << 20, SMUtil: sm, Name: name}
}

// procValues is a family's value by pid label.
func procValues(mfs map[string]*dto.MetricFamily, name string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range mfs[name].GetMetric() {
		out[metricLabels(m)["pid"]] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
	}
	return out
}

func metricLabels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

const procCSV = "DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DRIVER_VERSION, label, d\n"

// The per-process families: each process's info (with its name), memory
// and SM share under its device's identity, its pid and its pod where an
// enricher knows it; no SM share inside a MIG instance or where the
// driver sampled none; each device's count; nothing with the option off.
func TestProcessFamiliesFromAScriptedSource(t *testing.T) {
	owner := &procOwner{pods: map[uint32][3]string{101: {"train-0", "ml", "trainer"}}}
	n := newProcNode(t, procCSV, Options{Processes: ProcessOptions{Enabled: true}, Enrichers: []enrich.Enricher{owner}})
	mfs := n.list(t, []source.Process{
		n.proc(101, 0, -1, 2048, 37, "/usr/bin/python3"),
		n.proc(102, 0, -1, 512, -1, "python"),
		n.proc(201, 1, 3, 1024, 55, "/opt/infer"),
	})
	assert.Equal(t, map[string]float64{"101": 1, "102": 1, "201": 1}, procValues(mfs, procInfoName))
	assert.Equal(t, map[string]float64{"101": 2048 << 20, "102": 512 << 20, "201": 1024 << 20}, procValues(mfs, procMemName))
	assert.Equal(t, map[string]float64{"101": 0.37}, procValues(mfs, procSMName),
		"an SM share where the driver gives one: none without a sample, none inside a MIG instance")

	info := series(mfs, procInfoName, map[string]string{"pid": "101"})
	require.Len(t, info, 1)
	assert.Equal(t, map[string]string{"gpu": "0", "UUID": n.uuid(0), "pci_bus_id": "00000000:01:00.0", "device": "nvidia0",
		"modelName": "NVIDIA H100 80GB HBM3", "Hostname": "node-1", "pid": "101", "process_name": "/usr/bin/python3",
		"pod": "train-0", "namespace": "ml", "container": "trainer"}, metricLabels(info[0]))
	mig := series(mfs, procMemName, map[string]string{"pid": "201"})
	require.Len(t, mig, 1)
	assert.Equal(t, "3", metricLabels(mig[0])["GPU_I_ID"], "a MIG process is on its GPU instance")
	assert.NotContains(t, metricLabels(mig[0]), "pod", "no pod where none is known")
	assert.NotContains(t, metricLabels(mig[0]), "process_name", "the name labels the info alone")

	counts := map[string]float64{}
	for _, m := range mfs[procCountName].GetMetric() {
		l := metricLabels(m)
		counts[l["gpu"]+"/"+l["GPU_I_ID"]] = m.GetGauge().GetValue()
	}
	assert.Equal(t, map[string]float64{"0/": 2, "1/3": 1}, counts, "a count per device: the GPU, or a MIG GPU's instances")
	dropped := mfs[procDroppedName].GetMetric()
	require.Len(t, dropped, 2, "a dropped counter per GPU")
	for _, m := range dropped {
		assert.Zero(t, m.GetCounter().GetValue(), "nothing dropped under the cap")
	}

	off := newProcNode(t, procCSV, Options{})
	mfs = off.list(t, []source.Process{off.proc(101, 0, -1, 2048, 37, "python")})
	for name := range mfs {
		assert.NotContains(t, name, "process", "per-process families are off by default")
	}
	assert.Zero(t, off.src.ProcessCalls, "nor is the process list read")
}

// droppedOn is GPU gpu's count of processes left out at the cap.
func droppedOn(t *testing.T, mfs map[string]*dto.MetricFamily, gpu string) float64 {
	t.Helper()
	m := series(mfs, procDroppedName, map[string]string{"gpu": gpu})
	require.Len(t, m, 1)
	return m[0].GetCounter().GetValue()
}

// The cap keeps at most MaxPerGPU processes of a GPU, its MIG instances'
// together: the largest first, and a process keeps its series while it
// runs even when a larger one comes; each process left out counts once
// while it stays left out, and again when it is left out anew.
func TestProcessCapAndDroppedCount(t *testing.T) {
	n := newProcNode(t, procCSV, Options{Processes: ProcessOptions{Enabled: true, MaxPerGPU: 2}})
	a, b := n.proc(1, 0, -1, 100, 10, "a"), n.proc(2, 0, -1, 300, 10, "b")
	c, d := n.proc(3, 0, -1, 200, 10, "c"), n.proc(4, 0, -1, 50, 10, "d")
	mig1, mig2, mig3 := n.proc(11, 1, 3, 10, -1, "m"), n.proc(12, 1, 3, 20, -1, "m"), n.proc(13, 1, -1, 30, -1, "m")

	mfs := n.list(t, []source.Process{a, b, c, d, mig1, mig2, mig3})
	assert.ElementsMatch(t, []string{"2", "3", "12", "13"}, keysOf(procValues(mfs, procInfoName)),
		"the two largest of each GPU, a MIG GPU's instances and the GPU together")
	assert.Equal(t, 2.0, droppedOn(t, mfs, "0"))
	assert.Equal(t, 1.0, droppedOn(t, mfs, "1"))
	gpu0 := series(mfs, procCountName, map[string]string{"gpu": "0"})
	require.Len(t, gpu0, 1)
	assert.Equal(t, 4.0, gpu0[0].GetGauge().GetValue(), "the count holds the processes past the cap")

	mfs = n.list(t, []source.Process{a, b, c, d, mig1, mig2, mig3})
	assert.Equal(t, 2.0, droppedOn(t, mfs, "0"), "a process left out counts once while it stays left out")

	big := n.proc(5, 0, -1, 900, 10, "big")
	mfs = n.list(t, []source.Process{a, b, c, d, big})
	assert.ElementsMatch(t, []string{"2", "3"}, keysOf(procValues(mfs, procInfoName)),
		"processes keep their series when a larger one comes")
	assert.Equal(t, 3.0, droppedOn(t, mfs, "0"), "the newcomer left out counts")

	mfs = n.list(t, []source.Process{b, big, a})
	assert.ElementsMatch(t, []string{"2", "5"}, keysOf(procValues(mfs, procInfoName)), "a place freed goes to the largest left out")
	assert.Equal(t, 3.0, droppedOn(t, mfs, "0"), "a (still left out) counts no more")
	n.list(t, []source.Process{b, big}) // a leaves
	mfs = n.list(t, []source.Process{b, big, a})
	assert.Equal(t, 4.0, droppedOn(t, mfs, "0"), "a left out anew counts again")
}

func keysOf(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A process's series end with the process, the next refresh after the
// driver stops listing it; a source that cannot list processes has no
// per-process series and no count, rather than a count of 0.
func TestProcessSeriesEndWithTheProcess(t *testing.T) {
	n := newProcNode(t, procCSV, Options{Processes: ProcessOptions{Enabled: true}})
	mfs := n.list(t, []source.Process{n.proc(1, 0, -1, 100, 10, "a"), n.proc(2, 0, -1, 200, 20, "b")})
	assert.ElementsMatch(t, []string{"1", "2"}, keysOf(procValues(mfs, procMemName)))

	mfs = n.list(t, []source.Process{n.proc(2, 0, -1, 250, 20, "b")})
	assert.Equal(t, map[string]float64{"2": 250 << 20}, procValues(mfs, procMemName), "the ended process is gone; the other's value moves")
	assert.Equal(t, map[string]float64{"2": 1}, procValues(mfs, procInfoName))
	assert.Equal(t, map[string]float64{"2": 0.2}, procValues(mfs, procSMName))

	mfs = n.list(t, []source.Process{})
	for _, name := range []string{procInfoName, procMemName, procSMName} {
		assert.NotContains(t, mfs, name, "no process, no series")
	}
	idle := series(mfs, procCountName, map[string]string{"gpu": "0"})
	require.Len(t, idle, 1)
	assert.Zero(t, idle[0].GetGauge().GetValue(), "an idle GPU counts 0")

	mfs = n.list(t, nil)
	for _, name := range []string{procInfoName, procMemName, procSMName, procCountName} {
		assert.NotContains(t, mfs, name, "a list that cannot be read is not an idle GPU")
	}
	assert.Contains(t, mfs, procDroppedName, "the dropped counters stay")

	unknown := n.proc(3, 0, -1, 0, 10, "wddm")
	unknown.UsedMemoryBytes = math.MaxUint64
	mfs = n.list(t, []source.Process{unknown})
	assert.Equal(t, map[string]float64{"3": 1}, procValues(mfs, procInfoName))
	assert.NotContains(t, mfs, procMemName, "memory the driver cannot measure is absent, not a huge number")
}

// A process names itself: a hostile name (quotes, backslashes, newlines,
// terminal escapes, invalid UTF-8, kilobytes of it) gives a process_name of
// at most MaxProcessNameBytes of valid UTF-8 without control characters,
// and an exposition Prometheus parses, in text and in protobuf.
func TestHostileProcessName(t *testing.T) {
	hostile := "\"}\n\\evil\x1b[31m\xff\xfe" + strings.Repeat("é\"", 600) + "\x00end"
	n := newProcNode(t, procCSV, Options{Processes: ProcessOptions{Enabled: true}})
	mfs := n.list(t, []source.Process{n.proc(7, 0, -1, 64, 5, hostile), n.proc(8, 0, -1, 64, 5, "ok")})

	info := series(mfs, procInfoName, map[string]string{"pid": "7"})
	require.Len(t, info, 1)
	name := metricLabels(info[0])["process_name"]
	assert.LessOrEqual(t, len(name), MaxProcessNameBytes)
	assert.True(t, utf8.ValidString(name))
	assert.True(t, strings.HasPrefix(name, "\"}?\\evil?[31m\uFFFDé\""), "the start of the name is kept: %q", name)
	assert.True(t, strings.HasSuffix(name, "..."), "a cut name says so: %q", name)
	for _, r := range name {
		assert.False(t, r < 0x20 || r == 0x7f, "control character %U in %q", r, name)
	}
	assert.Len(t, procValues(mfs, procMemName), 2, "the other series are whole")

	body, err := n.e.AppendProto(nil)
	require.NoError(t, err)
	assert.Equal(t, encodeWithExpfmt(t, decodeInOrder(t, body)), body, "the protobuf exposition is client_golang's encoding")
	got := decodeProto(t, body)
	for _, fam := range []string{procInfoName, procMemName, procSMName} {
		assert.Equal(t, seriesOf(mfs[fam]), seriesOf(got[fam]), "%s: protobuf and text hold the same series", fam)
	}

	short := "/usr/bin/python3"
	assert.Equal(t, short, processNameLabel(short), "a plain name stays as it is")
	assert.Equal(t, strings.Repeat("a", MaxProcessNameBytes), processNameLabel(strings.Repeat("a", MaxProcessNameBytes)))
	assert.Equal(t, strings.Repeat("a", MaxProcessNameBytes-3)+"...", processNameLabel(strings.Repeat("a", MaxProcessNameBytes+1)))
}

// nvidia_gpu_exporter's --collect.compute-apps families, as its
// internal/exporter/exporter.go writes them (newComputeAppDescs,
// renderApps, renderApp): compute_app_info and compute_app_used_memory_bytes
// labelled uuid (lower case, without "GPU-"; a MIG process's GPU's), pid
// and process_name, the memory in whole MiB (rounded up, as nvidia-smi
// prints it: internal/nvmlnative/format.go, mib) as bytes and absent where
// the driver cannot measure it; compute_apps per GPU, 0 included;
// compute_apps_last_collect_success without labels, 0 and nothing else
// while the list cannot be read.
func TestComputeAppsInNvidiaGPUExporterLayout(t *testing.T) {
	csv := "nvidia_smi_compute_app_info, gauge, i\nnvidia_smi_compute_app_used_memory_bytes, gauge, m\n" +
		"nvidia_smi_compute_apps, gauge, n\nnvidia_smi_compute_apps_last_collect_success, gauge, s\n" +
		"nvidia_smi_temperature_gpu, gauge, t\n"
	n := newProcNode(t, csv, Options{Processes: ProcessOptions{Enabled: true}})
	gi4 := *n.gi
	gi4.GPUInstanceID = 4
	n.src.Ents = append(n.src.Ents, &gi4)
	require.NoError(t, n.e.Open())
	inMIG := n.proc(9, 1, 3, 10, -1, "/opt/infer")
	inMIG.UsedMemoryBytes = 10<<20 + 1
	alsoIn4 := n.proc(9, 1, 4, 5, -1, "/opt/infer")
	wddm := n.proc(8, 0, -1, 0, -1, "game.exe")
	wddm.UsedMemoryBytes = math.MaxUint64
	mfs := n.list(t, []source.Process{n.proc(7, 0, -1, 2048, 40, "/usr/bin/python3"), wddm, inMIG, alsoIn4})

	u0, u1 := nvidiaGPUExporterUUID(n.uuid(0)), nvidiaGPUExporterUUID(n.uuid(1))
	info := map[string]map[string]string{}
	for _, m := range mfs["nvidia_smi_compute_app_info"].GetMetric() {
		l := metricLabels(m)
		info[l["pid"]] = l
		assert.Equal(t, 1.0, m.GetGauge().GetValue())
	}
	assert.Equal(t, map[string]map[string]string{
		"7": {"uuid": u0, "pid": "7", "process_name": "/usr/bin/python3"},
		"8": {"uuid": u0, "pid": "8", "process_name": "game.exe"},
		"9": {"uuid": u1, "pid": "9", "process_name": "/opt/infer"},
	}, info, "one series per process and GPU: a process in two MIG instances of a GPU is one")
	assert.Equal(t, map[string]float64{"7": 2048 << 20, "9": 16 << 20}, procValues(mfs, "nvidia_smi_compute_app_used_memory_bytes"),
		"whole MiB rounded up, as bytes; the two instances' memory together; none where the driver cannot measure it")
	apps := map[string]float64{}
	for _, m := range mfs["nvidia_smi_compute_apps"].GetMetric() {
		apps[metricLabels(m)["uuid"]] = m.GetGauge().GetValue()
	}
	assert.Equal(t, map[string]float64{u0: 2, u1: 2}, apps)
	success := mfs["nvidia_smi_compute_apps_last_collect_success"].GetMetric()
	require.Len(t, success, 1)
	assert.Empty(t, success[0].GetLabel())
	assert.Equal(t, 1.0, success[0].GetGauge().GetValue())
	assert.NotContains(t, mfs, procInfoName, "gpuscope's own names are dcgm-exporter's layout's")

	mfs = n.list(t, []source.Process{})
	apps = map[string]float64{}
	for _, m := range mfs["nvidia_smi_compute_apps"].GetMetric() {
		apps[metricLabels(m)["uuid"]] = m.GetGauge().GetValue()
	}
	assert.Equal(t, map[string]float64{u0: 0, u1: 0}, apps, "an idle GPU counts 0")

	mfs = n.list(t, nil)
	assert.Equal(t, 0.0, mfs["nvidia_smi_compute_apps_last_collect_success"].GetMetric()[0].GetGauge().GetValue())
	for _, name := range []string{"nvidia_smi_compute_app_info", "nvidia_smi_compute_app_used_memory_bytes", "nvidia_smi_compute_apps"} {
		assert.NotContains(t, mfs, name, "a failed listing suppresses every per-process series")
	}

	off := newProcNode(t, csv, Options{})
	mfs = off.list(t, []source.Process{off.proc(7, 0, -1, 1, 1, "x")})
	for name := range mfs {
		assert.NotContains(t, name, "compute_app", "served with the per-process series only")
	}
}

// The process list is read in a loop of its own, once a second on the
// engine's clock (counted in Loops, as the manual clock waits for it),
// never by a scrape.
func TestProcessesAreReadInTheBackground(t *testing.T) {
	src := sourcetest.NewGPUs(1, constValues(map[uint16]float64{fieldid.GPUTemp: 40}))
	src.Procs = []source.Process{{PID: 5, UUID: src.Ents[0].UUID, GPUInstanceID: -1, UsedMemoryBytes: 1 << 20, SMUtil: 3, Name: "p"}}
	clk := newClock()
	e, err := New(Options{Source: src, Counters: parseSet(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t, 1s\n"), DefaultInterval: time.Second,
		Log: quietLog(), Now: clk.Now, Clock: clk, Processes: ProcessOptions{Enabled: true}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, e.Start(ctx))
	require.Equal(t, 2, e.Loops(), "the 1 s group and the process list")
	calls := func() int {
		src.Lock()
		defer src.Unlock()
		return src.ProcessCalls
	}
	for range 3 {
		require.True(t, clk.WaitForTimers(2, testwait.Timeout), "both loops wait for their next turn")
		clk.Add(ProcessInterval)
	}
	require.True(t, clk.WaitForTimers(2, testwait.Timeout))
	assert.Equal(t, 4, calls(), "read as the loop starts and once a second")
	for range 5 {
		assert.Contains(t, string(e.Render(nil)), `gpuscope_process_info{`)
	}
	assert.Equal(t, 4, calls(), "scrapes read memory only")
	e.Stop()
	assert.Zero(t, clk.Timers(), "no loop waits after Stop")
}
