// Package attribution checks that every backend attributes shared GPUs to
// pods alike: the same node (a time-sliced GPU two pods share, a GPU one
// pod holds, a MIG GPU whose instances two pods hold) gives the same
// per-pod memory and SM share on DCGM (the fake host engine, with its
// processes listed by NVML beside it, as in production), on NVML (go-nvml's
// mocks) and on the sim.
//
// The sim makes the node: its process list at a fixed time is the truth
// every backend is scripted with, by GPU index and MIG instance order, so
// the cases follow whatever the sim's shared and MIG GPUs do.
package attribution

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/enrich/kube/podattr"
	"github.com/gpuscope/gpuscope/internal/testkit/kubelettest"
	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/sim"
)

// epoch is when the sim's processes are read; the sim's workload starts at
// its first collection, two minutes earlier, so memory has ramped up.
var epoch = time.Unix(1_750_000_000, 0)

// proc is one process of the node, by GPU index and MIG instance order
// (-1 outside MIG), so that each backend can place it on its own GPU.
type proc struct {
	gpu, inst int
	pid       uint32
	mem       uint64
	sm        float64 // -1: the driver gives none
	name      string
}

// holder is a pod holding one device: a whole GPU (inst -1, replica -1),
// a time-sliced replica of one, or a MIG instance.
type holder struct {
	pod            string
	gpu, inst, rep int
	pids           []uint32
}

// scenario is one node: its processes and the pods that hold its devices.
type scenario struct {
	name  string
	gpus  int
	mig   int
	procs []proc
	pods  []holder
}

// podShare is what attribution gives one pod: its memory in bytes and SM
// share (0..1, absent where no process has an SM utilisation) from
// --kubernetes-shared-gpu-attribution, and its DCGM_FI_DEV_GPU_UTIL and
// DCGM_FI_DEV_FB_USED rows from --kubernetes-virtual-gpus.
type podShare struct {
	gpu                 string
	mem                 float64
	sm                  float64
	hasSM               bool
	splitUtil, splitMiB float64
}

// fromSim reads the node's processes from the sim at epoch and gives each
// process its pod: on a time-sliced GPU one pod per process (replicas 0,
// 1), on a MIG GPU one pod per instance, on an exclusive GPU one pod.
func fromSim(t *testing.T, name string, cfg sim.Config) scenario {
	t.Helper()
	s := newSim(t, cfg)
	inst := instanceOrder(s.Entities())
	sc := scenario{name: name, gpus: cfg.GPUs, mig: len(inst[0])}
	for _, p := range s.Processes() {
		gpu := gpuIndexOf(t, s.Entities(), p.UUID)
		ord := -1
		if p.GPUInstanceID >= 0 {
			ord = inst[gpu][p.GPUInstanceID]
		}
		sc.procs = append(sc.procs, proc{gpu: gpu, inst: ord, pid: p.PID, mem: p.UsedMemoryBytes, sm: p.SMUtil, name: p.Name})
	}
	perDevice := map[[2]int][]proc{}
	for _, p := range sc.procs {
		k := [2]int{p.gpu, p.inst}
		perDevice[k] = append(perDevice[k], p)
	}
	keys := make([][2]int, 0, len(perDevice))
	for k := range perDevice {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]*100+keys[i][1] < keys[j][0]*100+keys[j][1] })
	for _, k := range keys {
		ps := perDevice[k]
		for i, p := range ps {
			rep := -1
			if len(ps) > 1 {
				rep = i
			}
			sc.pods = append(sc.pods, holder{pod: fmt.Sprintf("pod-%d-%d-%d", k[0], k[1]+1, i), gpu: k[0], inst: k[1], rep: rep, pids: []uint32{p.pid}})
		}
	}
	return sc
}

// newSim runs a sim node from two minutes before epoch to epoch.
func newSim(t *testing.T, cfg sim.Config) *sim.Source {
	t.Helper()
	now := epoch.Add(-2 * time.Minute)
	cfg.Now = func() time.Time { return now }
	cfg.EventRate = 0
	s, err := sim.New(cfg)
	require.NoError(t, err)
	require.NoError(t, s.Watch(watched()))
	for ; !now.After(epoch); now = now.Add(5 * time.Second) {
		require.NoError(t, s.Collect(context.Background(), 0, discard{}))
	}
	now = epoch
	return s
}

// want is what attribution must give each pod of the scenario.
func (sc scenario) want() map[string]podShare {
	byPID := map[uint32]proc{}
	for _, p := range sc.procs {
		byPID[p.pid] = p
	}
	out := map[string]podShare{}
	for _, h := range sc.pods {
		ps := podShare{gpu: strconv.Itoa(h.gpu)}
		for _, pid := range h.pids {
			p := byPID[pid]
			ps.mem += float64(p.mem)
			ps.splitMiB += math.Floor(float64(p.mem) / (1 << 20))
			if p.sm >= 0 {
				ps.hasSM = true
				ps.sm += p.sm / 100
				ps.splitUtil += math.Floor(p.sm)
			}
		}
		out[h.pod] = ps
	}
	return out
}

// node is the host side of a scenario: a /proc tree whose processes sit in
// the pods' cgroups, and the kubelet's log directories naming the pods.
type node struct{ proc, logs string }

func newNode(t *testing.T, sc scenario) node {
	t.Helper()
	root := t.TempDir()
	n := node{proc: filepath.Join(root, "proc"), logs: filepath.Join(root, "log")}
	for i, h := range sc.pods {
		uid := fmt.Sprintf("%08x-0000-4000-8000-%012x", i+1, i+1)
		cid := strings.Repeat(strconv.Itoa(i%10), 64)
		mkdir(t, filepath.Join(n.logs, "pods", "ml_"+h.pod+"_"+uid))
		mkdir(t, filepath.Join(n.logs, "containers"))
		write(t, filepath.Join(n.logs, "containers", h.pod+"_ml_main-"+cid+".log"), "")
		for _, pid := range h.pids {
			dir := filepath.Join(n.proc, strconv.Itoa(int(pid)))
			mkdir(t, dir)
			write(t, filepath.Join(dir, "cgroup"), "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"+
				strings.ReplaceAll(uid, "-", "_")+".slice/cri-containerd-"+cid+".scope\n")
		}
	}
	return n
}

// backendSource is one backend's source over the scenario.
type backendSource struct {
	src       source.Source
	processes func() []source.Process
	// resample, where set, gives every process a utilisation sample newer
	// than those read, as a driver does between two reads.
	resample func()
}

// attribute runs pod attribution over a backend's source and reads what
// it gives each pod.
func attribute(t *testing.T, sc scenario, n node, b backendSource) map[string]podShare {
	t.Helper()
	pa := podAttribution(t, sc, n, b)
	ents := b.src.Entities()
	out := map[string]podShare{}
	for _, m := range gather(t, pa, "gpuscope_pod_gpu_memory_used_bytes") {
		ps := out[m.labels["pod"]]
		ps.gpu, ps.mem = m.labels["gpu"], m.value
		out[m.labels["pod"]] = ps
	}
	for _, m := range gather(t, pa, "gpuscope_pod_gpu_sm_utilization") {
		ps := out[m.labels["pod"]]
		ps.sm, ps.hasSM = m.value, true
		out[m.labels["pod"]] = ps
	}
	for _, e := range ents {
		rows := pa.SplitRows(e)
		util, mem := pa.SplitValues(e, fieldid.GPUUtil), pa.SplitValues(e, fieldid.FBUsed)
		for i, r := range rows {
			ps := out[r[0]]
			ps.splitUtil, ps.splitMiB = util[i], mem[i]
			out[r[0]] = ps
		}
	}
	return out
}

// podAttribution is pod attribution over a backend's source, through a
// kubelet that gives each pod its device and the node's cgroups, refreshed
// once.
func podAttribution(t *testing.T, sc scenario, n node, b backendSource) *podattr.Enricher {
	t.Helper()
	ents := b.src.Entities()
	inst := instanceOrder(ents)
	var pods []kubelettest.Pod
	for _, h := range sc.pods {
		pods = append(pods, kubelettest.Pod{Name: h.pod, Namespace: "ml", Containers: []kubelettest.Container{{
			Name: "main", Devices: []kubelettest.Device{deviceOf(t, ents, inst, h)}}}})
	}
	dir, err := os.MkdirTemp("", "kubelet")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	srv, err := kubelettest.Start(filepath.Join(dir, "kubelet.sock"), pods)
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	l, _ := test.NewNullLogger()
	pa, err := podattr.New(podattr.Config{Socket: srv.Socket(), SharedGPUAttribution: true, VirtualGPUs: true,
		ProcRoot: n.proc, LogRoot: n.logs, Processes: b.processes, Entities: b.src.Entities, Logger: l})
	require.NoError(t, err)
	require.NoError(t, pa.Refresh(context.Background()))
	return pa
}

// deviceOf is the kubelet's device ID of what a pod holds on a backend:
// the GPU's UUID (with the replica for a time-sliced one), or the MIG
// instance's UUID.
func deviceOf(t *testing.T, ents []*source.Entity, inst map[int]map[int]int, h holder) kubelettest.Device {
	t.Helper()
	if h.inst >= 0 {
		for _, e := range ents {
			if e.Kind == source.GPUInstance && e.GPU == h.gpu && inst[h.gpu][e.GPUInstanceID] == h.inst {
				return kubelettest.Device{Resource: "nvidia.com/mig-3g.40gb", IDs: []string{e.MIGUUID}}
			}
		}
		t.Fatalf("GPU %d has no MIG instance %d", h.gpu, h.inst)
	}
	for _, e := range ents {
		if e.Kind == source.GPU && e.GPU == h.gpu {
			id := e.UUID
			if h.rep >= 0 {
				id += "::" + strconv.Itoa(h.rep)
			}
			return kubelettest.Device{Resource: "nvidia.com/gpu", IDs: []string{id}}
		}
	}
	t.Fatalf("no GPU %d", h.gpu)
	return kubelettest.Device{}
}

// instanceOrder maps each GPU's MIG instance IDs to their order among the
// GPU's instances.
func instanceOrder(ents []*source.Entity) map[int]map[int]int {
	out := map[int]map[int]int{}
	for _, e := range ents {
		if e.Kind != source.GPUInstance {
			continue
		}
		if out[e.GPU] == nil {
			out[e.GPU] = map[int]int{}
		}
		out[e.GPU][e.GPUInstanceID] = len(out[e.GPU])
	}
	return out
}

func gpuIndexOf(t *testing.T, ents []*source.Entity, uuid string) int {
	t.Helper()
	for _, e := range ents {
		if e.Kind == source.GPU && e.UUID == uuid {
			return e.GPU
		}
	}
	t.Fatalf("no GPU %s", uuid)
	return -1
}

type sample struct {
	labels map[string]string
	value  float64
}

func gather(t *testing.T, c prometheus.Collector, name string) []sample {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var out []sample
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			s := sample{labels: map[string]string{}, value: m.GetGauge().GetValue()}
			for _, lp := range m.GetLabel() {
				s.labels[lp.GetName()] = lp.GetValue()
			}
			out = append(out, s)
		}
	}
	return out
}

func mkdir(t *testing.T, dir string) { require.NoError(t, os.MkdirAll(dir, 0o755)) }
func write(t *testing.T, path, s string) {
	require.NoError(t, os.WriteFile(path, []byte(s), 0o644))
}

// discard is a sink that keeps nothing.
type discard struct{}

func (discard) Value(*source.Entity, uint16, int64, float64)        {}
func (discard) Text(*source.Entity, uint16, string)                 {}
func (discard) Unsupported(*source.Entity, uint16, string)          {}
func (discard) Fail(*source.Entity, uint16, error)                  {}
func (discard) XID(*source.Entity, uint64, int64)                   {}
func (discard) Health(*source.Entity, int64, []source.HealthResult) {}
func (discard) P2P(*source.Entity, int64, []source.P2PLink)         {}

// watched is what every backend watches: a field of GPUs and MIG
// instances alike, so that the MIG instances are among the entities.
func watched() []source.Group {
	return []source.Group{source.GroupOf(time.Second, []counters.Field{source.FieldFor(nil, fieldid.FBUsed)})}
}

// firstProcesses collects once and waits until the source's process list,
// read during that collection, holds n processes. One read only: NVML
// gives a process an SM utilisation from the samples newer than the last
// read, and the fakes take no new ones.
func firstProcesses(t *testing.T, name string, list func() []source.Process, n int, collect func()) {
	t.Helper()
	collect()
	testwait.For(t, name+"'s process list", func() bool { return len(list()) == n })
}

func quietLogger() *logrus.Entry {
	l, _ := test.NewNullLogger()
	return logrus.NewEntry(l)
}
