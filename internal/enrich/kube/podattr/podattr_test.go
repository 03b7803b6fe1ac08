package podattr

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/testkit/kubelettest"
	"github.com/gpuscope/gpuscope/source"
)

const (
	uuid0 = "GPU-3f9a1c2e-7b4d-4e8a-9c1f-2a6b8d0e4f17"
	uuid1 = "GPU-8c2d4e6f-0a1b-4c3d-8e5f-6a7b8c9d0e1f"
	uuid2 = "GPU-1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"
	mig0  = "MIG-a1b2c3d4-e5f6-5789-9abc-def012345678"
)

func gpuEntity(idx int, uuid string) *source.Entity {
	e := source.NewGPU(idx, uuid, fmt.Sprintf("00000000:%02X:00.0", idx+7), "NVIDIA H100 80GB HBM3")
	return &e
}

func migEntity(idx int, uuid, migUUID string, gi int) *source.Entity {
	e := source.NewGPU(idx, uuid, "00000000:07:00.0", "NVIDIA H100 80GB HBM3")
	e.Kind, e.MIGUUID, e.GPUInstanceID, e.GPUInstanceProfile = source.GPUInstance, migUUID, gi, "1g.10gb"
	return &e
}

func gpuPod(ns, name, container, resource string, ids ...string) kubelettest.Pod {
	return kubelettest.Pod{Name: name, Namespace: ns, Containers: []kubelettest.Container{{
		Name: container, Devices: []kubelettest.Device{{Resource: resource, IDs: ids}},
	}}}
}

// startKubelet serves pods on a socket in a short temporary directory (unix
// socket paths are limited to about 100 bytes).
func startKubelet(t *testing.T, pods []kubelettest.Pod) *kubelettest.Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "kubelet")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	srv, err := kubelettest.Start(filepath.Join(dir, "kubelet.sock"), pods)
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	return srv
}

func newEnricher(t *testing.T, cfg Config) (*Enricher, *logtest.Hook) {
	t.Helper()
	logger, hook := logtest.NewNullLogger()
	logger.SetLevel(logrus.DebugLevel)
	cfg.Logger = logger
	e, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(e.closeConn)
	return e, hook
}

// metricValue gathers the enricher's metrics and returns the value of the
// series of name whose labels include want.
func metricValue(t *testing.T, c prometheus.Collector, name string, want map[string]string) (float64, bool) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue next
				}
			}
			return value(m), true
		}
	}
	return 0, false
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	}
	return 0
}

func TestValuesPerIDForm(t *testing.T) {
	pods := []kubelettest.Pod{
		gpuPod("ml", "exclusive", "trainer", "nvidia.com/gpu", uuid0),
		gpuPod("ml", "mig", "infer", "nvidia.com/mig-1g.10gb", mig0),
		gpuPod("ml", "sliced", "notebook", "nvidia.com/gpu", uuid1+"::2"),
		gpuPod("batch", "gke", "job", "nvidia.com/gpu", "nvidia2"),
		gpuPod("batch", "gke-mig", "job", "nvidia.com/gpu", "nvidia3/gi5/vgpu0"),
		gpuPod("other", "custom", "c", "example.com/gpu", "nvidia4"),
		gpuPod("other", "cpu-only", "c", "cpu", "0"),
	}
	srv := startKubelet(t, pods)
	e, _ := newEnricher(t, Config{Socket: srv.Socket(), ResourceNames: []string{"example.com/*"}})
	require.NoError(t, e.Refresh(context.Background()))

	mig := migEntity(0, uuid2, mig0, 7)
	gkeMIG := migEntity(3, "GPU-00000000-0000-4000-8000-000000000003", "MIG-00000000-0000-4000-8000-0000000000aa", 5)
	nvlink := gpuEntity(0, uuid0)
	nvlink.Kind, nvlink.Link = source.NVLink, 2
	tests := []struct {
		name string
		ent  *source.Entity
		want []string
	}{
		{"exclusive GPU by UUID", gpuEntity(0, uuid0), []string{"exclusive", "ml", "trainer"}},
		{"NVLink of an owned GPU", nvlink, []string{"exclusive", "ml", "trainer"}},
		{"MIG instance by MIG UUID", mig, []string{"mig", "ml", "infer"}},
		{"parent of a MIG instance is not owned", gpuEntity(0, uuid2), nil},
		{"time-sliced, one pod", gpuEntity(1, uuid1), []string{"sliced", "ml", "notebook"}},
		{"GKE nvidiaN", gpuEntity(2, "GPU-00000000-0000-4000-8000-000000000002"), []string{"gke", "batch", "job"}},
		{"GKE nvidiaN/giM/vgpuZ", gkeMIG, []string{"gke-mig", "batch", "job"}},
		{"extra resource name", gpuEntity(4, "GPU-00000000-0000-4000-8000-000000000004"), []string{"custom", "other", "c"}},
		{"unknown GPU", gpuEntity(5, "GPU-00000000-0000-4000-8000-000000000005"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, e.Values(tt.ent))
		})
	}
	assert.Equal(t, []string{"pod", "namespace", "container"}, e.LabelNames())
	v, ok := metricValue(t, e, "gpuscope_kubernetes_gpu_pods", nil)
	require.True(t, ok)
	assert.Equal(t, 6.0, v)
}

func TestSharedGPUGetsNoPodLabels(t *testing.T) {
	pods := []kubelettest.Pod{
		gpuPod("ml", "a", "c", "nvidia.com/gpu", uuid0+"::0"),
		gpuPod("ml", "b", "c", "nvidia.com/gpu", uuid0+"::1"),
		{Name: "two-containers", Namespace: "ml", Containers: []kubelettest.Container{
			{Name: "x", Devices: []kubelettest.Device{{Resource: "nvidia.com/gpu", IDs: []string{uuid1 + "-0"}}}},
			{Name: "y", Devices: []kubelettest.Device{{Resource: "nvidia.com/gpu", IDs: []string{uuid1 + "-1"}}}},
		}},
	}
	srv := startKubelet(t, pods)
	e, _ := newEnricher(t, Config{Socket: srv.Socket()})
	require.NoError(t, e.Refresh(context.Background()))

	assert.Nil(t, e.Values(gpuEntity(0, uuid0)), "a GPU shared by two pods must not carry either pod's labels")
	assert.Equal(t, []string{"two-containers", "ml", ""}, e.Values(gpuEntity(1, uuid1)),
		"two containers of one pod: the pod is known, the container is not")
	v, ok := metricValue(t, e, "gpuscope_kubernetes_shared_devices", nil)
	require.True(t, ok)
	assert.Equal(t, 1.0, v)
}

// TestLargeResponse: an answer past gRPC's 4 MB default is read: 4,000
// pods (within podresources.DefaultLimits) with names of the longest a
// pod may have and long device IDs.
func TestLargeResponse(t *testing.T) {
	pods := make([]kubelettest.Pod, 4000)
	for i := range pods {
		pods[i] = kubelettest.Pod{
			Name: fmt.Sprintf("worker-%05d-%s", i, strings.Repeat("x", 240)), Namespace: "big",
			Containers: []kubelettest.Container{{Name: "main", Devices: []kubelettest.Device{
				{Resource: "example.com/nic", IDs: []string{strings.Repeat("n", 800)}},
			}}},
		}
	}
	pods[3999] = gpuPod("big", "the-gpu-pod", "main", "nvidia.com/gpu", uuid0)
	require.Greater(t, proto.Size(kubelettest.ToResponse(pods)), 4<<20, "the answer must exceed gRPC's 4 MB default")

	srv := startKubelet(t, pods)
	e, _ := newEnricher(t, Config{Socket: srv.Socket()})
	require.NoError(t, e.Refresh(context.Background()))
	assert.Equal(t, []string{"the-gpu-pod", "big", "main"}, e.Values(gpuEntity(0, uuid0)))
}

func TestKubeletRestartAndMissingSocket(t *testing.T) {
	srv := startKubelet(t, []kubelettest.Pod{gpuPod("ml", "p", "c", "nvidia.com/gpu", uuid0)})
	now := time.Unix(1_700_000_000, 0)
	e, hook := newEnricher(t, Config{Socket: srv.Socket(), Now: func() time.Time { return now }})
	ctx := context.Background()
	gpu := gpuEntity(0, uuid0)

	require.NoError(t, e.Refresh(ctx))
	require.Equal(t, []string{"p", "ml", "c"}, e.Values(gpu))
	gen := e.Generation()

	srv.Stop()
	now = now.Add(time.Minute) // past the grace period
	for range 3 {
		err := e.Refresh(ctx)
		require.Error(t, err)
		assert.Contains(t, err.Error(), srv.Socket())
	}
	assert.Nil(t, e.Values(gpu), "served without pod labels while the kubelet is away")
	assert.NotEqual(t, gen, e.Generation())
	up, _ := metricValue(t, e, "gpuscope_kubernetes_up", nil)
	assert.Equal(t, 0.0, up)
	errs, _ := metricValue(t, e, "gpuscope_kubernetes_refresh_errors_total", nil)
	assert.Equal(t, 3.0, errs)
	warnings := 0
	for _, en := range hook.AllEntries() {
		if en.Level == logrus.WarnLevel && strings.Contains(en.Message, "unavailable") {
			warnings++
		}
	}
	assert.Equal(t, 1, warnings, "an outage is logged once")

	require.NoError(t, srv.Restart())
	require.NoError(t, e.Refresh(ctx))
	assert.Equal(t, []string{"p", "ml", "c"}, e.Values(gpu), "labels return with the kubelet")
	up, _ = metricValue(t, e, "gpuscope_kubernetes_up", nil)
	assert.Equal(t, 1.0, up)
}

func TestRunRefreshesInBackground(t *testing.T) {
	srv := startKubelet(t, nil)
	e, _ := newEnricher(t, Config{Socket: srv.Socket(), RefreshInterval: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.Run(ctx) }()

	srv.SetPods([]kubelettest.Pod{gpuPod("ml", "late", "c", "nvidia.com/gpu", uuid0)})
	e.RequestRefresh()
	require.Eventually(t, func() bool { return e.Values(gpuEntity(0, uuid0)) != nil }, 5*time.Second, 20*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
}

func TestMalformedAndUnknownIDs(t *testing.T) {
	srv := startKubelet(t, nil)
	srv.SetResponse(&podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{
		{Name: "", Namespace: "ml"},
		{Name: "p", Namespace: "ml", Containers: []*podresourcesv1.ContainerResources{
			{Name: ""},
			{Name: "c", Devices: []*podresourcesv1.ContainerDevices{
				{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"gpu-zero", "GPU-12", uuid0}},
			}},
		}},
	}})
	e, hook := newEnricher(t, Config{Socket: srv.Socket()})
	for range 3 {
		require.NoError(t, e.Refresh(context.Background()))
	}
	assert.Equal(t, []string{"p", "ml", "c"}, e.Values(gpuEntity(0, uuid0)), "good IDs beside bad ones still map")
	unknown, _ := metricValue(t, e, "gpuscope_kubernetes_unknown_device_ids", nil)
	assert.Equal(t, 2.0, unknown)
	malformed, _ := metricValue(t, e, "gpuscope_kubernetes_malformed_entries", nil)
	assert.Equal(t, 2.0, malformed)
	var idLogs []string
	for _, en := range hook.AllEntries() {
		if strings.Contains(en.Message, "cannot map device ID") {
			idLogs = append(idLogs, en.Data["error"].(error).Error())
		}
	}
	assert.Len(t, idLogs, 2, "each unknown ID is logged once over three refreshes")
}

func TestPodChurnStaysBounded(t *testing.T) {
	srv := startKubelet(t, nil)
	e, _ := newEnricher(t, Config{Socket: srv.Socket(), MaxDevices: 1000})
	for round := range 5 {
		pods := make([]kubelettest.Pod, 4000)
		for i := range pods {
			id := fmt.Sprintf("GPU-%08x-0000-4000-8000-%012x", round, i)
			if i%2 == 1 {
				id = fmt.Sprintf("bogus-%d-%d", round, i)
			}
			pods[i] = gpuPod("churn", fmt.Sprintf("pod-%d-%d", round, i), "c", "nvidia.com/gpu", id)
		}
		srv.SetPods(pods)
		require.NoError(t, e.Refresh(context.Background()))
		assert.Len(t, e.snap.Load().values, 1000, "round %d: the device map is capped", round)
		assert.LessOrEqual(t, e.logged.Len(), maxLogged, "round %d: the logged-once set is capped", round)
	}
	srv.SetPods(nil)
	require.NoError(t, e.Refresh(context.Background()))
	assert.Empty(t, e.snap.Load().values, "pods that left leave nothing behind")
}

func TestConfigErrors(t *testing.T) {
	_, err := New(Config{ResourceNames: []string{"nvidia.com/*gpu"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `resource names: "nvidia.com/*gpu" is not a resource name`)
	_, err = New(Config{RefreshInterval: time.Millisecond})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "refresh interval 1ms is below the minimum of 100ms")
}

// TestPodLabelsChurnOnOneFailedKubeletCall: a failed List keeps the last
// good pod labels (and the generation, so no series is rebuilt) for the
// grace period, with gpuscope_kubernetes_up at 0; past it they go, and an
// answer brings them back.
func TestPodLabelsChurnOnOneFailedKubeletCall(t *testing.T) {
	srv := startKubelet(t, []kubelettest.Pod{gpuPod("ml", "p", "c", "nvidia.com/gpu", uuid0)})
	now := time.Unix(1_700_000_000, 0)
	e, _ := newEnricher(t, Config{Socket: srv.Socket(), RefreshInterval: 5 * time.Second, Now: func() time.Time { return now }})
	ctx := context.Background()
	gpu := gpuEntity(0, uuid0)
	require.NoError(t, e.Refresh(ctx))
	gen := e.Generation()

	srv.Stop()
	for _, step := range []time.Duration{0, 5 * time.Second, 9*time.Second + 999*time.Millisecond} {
		now = now.Add(step)
		require.Error(t, e.Refresh(ctx))
		assert.Equal(t, []string{"p", "ml", "c"}, e.Values(gpu), "labels kept %s into the outage", step)
		assert.Equal(t, gen, e.Generation(), "no series is rebuilt")
		up, _ := metricValue(t, e, "gpuscope_kubernetes_up", nil)
		assert.Equal(t, 0.0, up)
	}
	now = now.Add(time.Millisecond) // 15 s: three refresh intervals
	require.Error(t, e.Refresh(ctx))
	assert.Nil(t, e.Values(gpu), "dropped after the grace period")
	assert.NotEqual(t, gen, e.Generation())

	require.NoError(t, srv.Restart())
	require.NoError(t, e.Refresh(ctx))
	assert.Equal(t, []string{"p", "ml", "c"}, e.Values(gpu))
}

// A time-sliced GPU has no pod on its device series, so the allocation
// family shows every holder of every GPU and MIG instance, one series per
// container with value 1, to join on UUID (and GPU_I_ID).
func TestAllocationShowsEveryHolderOfSharedGPUs(t *testing.T) {
	pods := []kubelettest.Pod{
		gpuPod("ml", "a", "c", "nvidia.com/gpu", uuid0+"::0"),
		gpuPod("ml", "b", "c", "nvidia.com/gpu", uuid0+"::1"),
		gpuPod("ml", "solo", "main", "nvidia.com/gpu", uuid1),
		gpuPod("inf", "small", "srv", "nvidia.com/mig-1g.10gb", mig0),
	}
	srv := startKubelet(t, pods)
	ents := []*source.Entity{gpuEntity(0, uuid0), gpuEntity(1, uuid1), gpuEntity(2, uuid2), migEntity(2, uuid2, mig0, 3)}
	e, _ := newEnricher(t, Config{Socket: srv.Socket(), Entities: func() []*source.Entity { return ents }})
	require.NoError(t, e.Refresh(context.Background()))

	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(e))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var got []string
	for _, mf := range mfs {
		if mf.GetName() != "gpuscope_pod_gpu_allocation" {
			continue
		}
		for _, m := range mf.Metric {
			l := map[string]string{}
			for _, p := range m.Label {
				l[p.GetName()] = p.GetValue()
			}
			assert.Equal(t, 1.0, m.GetGauge().GetValue())
			got = append(got, l["namespace"]+"/"+l["pod"]+"/"+l["container"]+" gpu="+l["gpu"]+" "+l["UUID"]+" gi="+l["GPU_I_ID"])
		}
	}
	assert.ElementsMatch(t, []string{
		"ml/a/c gpu=0 " + uuid0 + " gi=",
		"ml/b/c gpu=0 " + uuid0 + " gi=",
		"ml/solo/main gpu=1 " + uuid1 + " gi=",
		"inf/small/srv gpu=2 " + uuid2 + " gi=3",
	}, got)
	assert.Nil(t, e.Values(gpuEntity(0, uuid0)), "the shared GPU's own series still carry no pod")
}

// --kubernetes-virtual-gpus: dcgm-exporter (internal/pkg/transformation/
// kubernetes.go) copies each series of a device once per pod holding it,
// shared devices included, with vgpu set to the replica the device ID names
// (<uuid>::N, or nvidiaX/vgpuN on GKE: getSharedGPU); a device no pod holds
// keeps its one series.
func TestVirtualGPUsGiveOneRowPerHolder(t *testing.T) {
	pods := []kubelettest.Pod{
		gpuPod("ml", "a", "c", "nvidia.com/gpu", uuid0+"::0"),
		gpuPod("ml", "b", "c", "nvidia.com/gpu", uuid0+"::1"),
		gpuPod("ml", "solo", "main", "nvidia.com/gpu", uuid1),
	}
	srv := startKubelet(t, pods)
	e, _ := newEnricher(t, Config{Socket: srv.Socket(), VirtualGPUs: true})
	require.NoError(t, e.Refresh(context.Background()))

	// pod_uid is among the names: the per-pod values of GPU_UTIL and FB_USED
	// always carry it (SplitRows); the copies carry it only with
	// --kubernetes-pod-uid-label.
	assert.Equal(t, []string{"pod", "namespace", "container", "pod_uid", "vgpu"}, e.LabelNames())
	assert.ElementsMatch(t, [][]string{{"a", "ml", "c", "", "0"}, {"b", "ml", "c", "", "1"}}, e.ValueRows(gpuEntity(0, uuid0)))
	assert.Equal(t, [][]string{{"solo", "ml", "main", "", ""}}, e.ValueRows(gpuEntity(1, uuid1)))
	assert.Nil(t, e.ValueRows(gpuEntity(2, uuid2)), "a GPU no pod holds keeps its one series")
	assert.Nil(t, e.Values(gpuEntity(0, uuid0)), "a shared GPU has no single owner")

	off, _ := newEnricher(t, Config{Socket: srv.Socket()})
	require.NoError(t, off.Refresh(context.Background()))
	assert.Nil(t, off.ValueRows(gpuEntity(0, uuid0)), "without the option, no copies")
	assert.Equal(t, []string{"pod", "namespace", "container"}, off.LabelNames())
}

func TestSharedReplica(t *testing.T) {
	for id, want := range map[string]string{
		uuid0 + "::3":       "3",
		"nvidia0/vgpu2":     "2",
		"nvidia0/gi1":       "",
		uuid0:               "",
		"nvidia1/gi0/vgpu5": "5",
	} {
		assert.Equal(t, want, sharedReplica(id), id)
	}
}

// A source that cannot list processes (auto on DCGM) hands nil: the
// per-pod values would all be 0, so the fields are copied instead, as
// dcgm-exporter does without per-process data
// (internal/pkg/transformation/kubernetes.go, createPerProcessMetrics
// returns nothing without device pods in its process data).
func TestVirtualGPUsWithoutProcessListDoNotSplit(t *testing.T) {
	srv := startKubelet(t, []kubelettest.Pod{gpuPod("ml", "a", "c", "nvidia.com/gpu", uuid0+"::0")})
	ent := gpuEntity(0, uuid0)
	for _, tc := range []struct {
		name  string
		procs []source.Process
		split bool
	}{{"cannot list", nil, false}, {"no process runs", []source.Process{}, true}} {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newEnricher(t, Config{Socket: srv.Socket(), VirtualGPUs: true,
				Processes: func() []source.Process { return tc.procs },
				Entities:  func() []*source.Entity { return []*source.Entity{ent} }})
			require.NoError(t, e.Refresh(context.Background()))
			if !tc.split {
				assert.Nil(t, e.SplitRows(ent))
				return
			}
			assert.Equal(t, [][]string{{"a", "ml", "c", "", "0"}}, e.SplitRows(ent))
			assert.Equal(t, []float64{0}, e.SplitValues(ent, fieldid.GPUUtil), "an idle pod has 0")
		})
	}
}
