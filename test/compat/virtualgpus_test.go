package compat

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/internal/enrich/kube/podattr"
	"github.com/gpuscope/gpuscope/internal/testkit/kubelettest"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

// node is a fake node for the pod mapper: a /proc tree whose GPU processes
// sit in pod cgroups, and the kubelet's log directories that name pods and
// containers.
type node struct{ proc, logs string }

func newNode(t *testing.T) node {
	root := t.TempDir()
	n := node{proc: filepath.Join(root, "proc"), logs: filepath.Join(root, "log")}
	require.NoError(t, os.MkdirAll(filepath.Join(n.logs, "containers"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(n.logs, "pods"), 0o755))
	return n
}

// container adds a pod's container and the processes it runs.
func (n node) container(t *testing.T, ns, pod, uid, name, cid string, pids ...int) {
	require.NoError(t, os.MkdirAll(filepath.Join(n.logs, "pods", ns+"_"+pod+"_"+uid), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(n.logs, "containers", pod+"_"+ns+"_"+name+"-"+cid+".log"), nil, 0o644))
	for _, pid := range pids {
		dir := filepath.Join(n.proc, strconv.Itoa(pid))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		cg := "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/cri-containerd-" + cid + ".scope\n"
		require.NoError(t, os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cg), 0o644))
	}
}

// Under --kubernetes-virtual-gpus dcgm-exporter gives each pod of a device
// its own processes' DCGM_FI_DEV_GPU_UTIL and DCGM_FI_DEV_FB_USED
// (internal/pkg/transformation/kubernetes.go, Process and
// createPerProcessMetrics; process_metrics.go): the sum of its processes'
// SM utilisation in percent and of their memory in MiB, 0 for a pod with
// no process, always with pod_uid; the device's own series stays beside
// them without pod labels. Every other field is copied once per pod, with
// pod_uid only under --kubernetes-enable-pod-uid, and without a device
// series; a GPU no pod holds keeps its one series.
func TestVirtualGPUsGiveEachPodItsOwnUtilAndMemory(t *testing.T) {
	const (
		uidA = "11111111-2222-4333-8444-555555555555"
		uidB = "66666666-7777-4888-9999-aaaaaaaaaaaa"
		uidS = "bbbbbbbb-cccc-4ddd-8eee-ffffffffffff"
	)
	src := sourcetest.NewGPUs(3, func(_ *source.Entity, f uint16, _ time.Time) (float64, bool) {
		switch f {
		case fieldid.GPUUtil:
			return 87, true
		case fieldid.FBUsed:
			return 9000, true
		}
		return 40, true
	})
	uuid := func(i int) string { return src.Ents[i].UUID }
	n := newNode(t)
	n.container(t, "ml", "a", uidA, "c", strings.Repeat("a", 64), 100, 101)
	n.container(t, "ml", "b", uidB, "c", strings.Repeat("b", 64))
	n.container(t, "ml", "solo", uidS, "main", strings.Repeat("c", 64), 300)
	procs := []source.Process{
		{PID: 100, UUID: uuid(0), GPUInstanceID: -1, UsedMemoryBytes: 3 << 30, SMUtil: 30},
		{PID: 101, UUID: uuid(0), GPUInstanceID: -1, UsedMemoryBytes: 1<<30 + 5<<19, SMUtil: 10},
		{PID: 300, UUID: uuid(1), GPUInstanceID: -1, UsedMemoryBytes: 2 << 30, SMUtil: 50},
	}
	dir, err := os.MkdirTemp("", "kubelet")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	pod := func(name, container, id string) kubelettest.Pod {
		return kubelettest.Pod{Name: name, Namespace: "ml", Containers: []kubelettest.Container{{
			Name: container, Devices: []kubelettest.Device{{Resource: "nvidia.com/gpu", IDs: []string{id}}}}}}
	}
	srv, err := kubelettest.Start(filepath.Join(dir, "kubelet.sock"), []kubelettest.Pod{
		pod("a", "c", uuid(0)+"::0"), pod("b", "c", uuid(0)+"::1"), pod("solo", "main", uuid(1)),
	})
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	pa, err := podattr.New(podattr.Config{Socket: srv.Socket(), VirtualGPUs: true, ProcRoot: n.proc, LogRoot: n.logs,
		Processes: func() []source.Process { return procs }, Entities: src.Entities, Logger: quietLog()})
	require.NoError(t, err)
	require.NoError(t, pa.Refresh(t.Context()))

	clk := sourcetest.NewClock(time.Unix(1_750_000_000, 0))
	src.Now = clk.Now
	set, err := counters.Parse("compat.csv", strings.NewReader("DCGM_FI_DEV_GPU_UTIL, gauge, u\nDCGM_FI_DEV_FB_USED, gauge, f\nDCGM_FI_DEV_GPU_TEMP, gauge, t\n"))
	require.NoError(t, err)
	e, err := engine.New(engine.Options{Source: src, Counters: set, DefaultInterval: time.Second, Hostname: "node-1",
		Now: clk.Now, Log: quietLog(), Enrichers: []enrich.Enricher{pa}})
	require.NoError(t, err)
	require.NoError(t, e.Open())
	clk.Add(time.Second)
	require.NoError(t, e.CollectAll(t.Context()))
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(bytes.NewReader(e.Render(nil)))
	require.NoError(t, err)

	type series struct{ gpu, pod, uid, vgpu string }
	read := func(name string) map[series]float64 {
		out := map[series]float64{}
		for _, m := range mfs[name].Metric {
			out[series{labelOf(m, "gpu"), labelOf(m, "pod"), labelOf(m, "pod_uid"), labelOf(m, "vgpu")}] = metricValue(m)
		}
		return out
	}
	assert.Equal(t, map[series]float64{
		{"0", "", "", ""}: 87, {"0", "a", uidA, "0"}: 40, {"0", "b", uidB, "1"}: 0,
		{"1", "", "", ""}: 87, {"1", "solo", uidS, ""}: 50,
		{"2", "", "", ""}: 87,
	}, read("DCGM_FI_DEV_GPU_UTIL"))
	assert.Equal(t, map[series]float64{
		{"0", "", "", ""}: 9000, {"0", "a", uidA, "0"}: 4098, {"0", "b", uidB, "1"}: 0,
		{"1", "", "", ""}: 9000, {"1", "solo", uidS, ""}: 2048,
		{"2", "", "", ""}: 9000,
	}, read("DCGM_FI_DEV_FB_USED"))
	assert.Equal(t, map[series]float64{
		{"0", "a", "", "0"}: 40, {"0", "b", "", "1"}: 40,
		{"1", "solo", "", ""}: 40,
		{"2", "", "", ""}:     40,
	}, read("DCGM_FI_DEV_GPU_TEMP"))
}

func metricValue(m *dto.Metric) float64 {
	if m.Gauge != nil {
		return m.GetGauge().GetValue()
	}
	return m.GetCounter().GetValue()
}
