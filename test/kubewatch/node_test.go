// Package kubewatch runs the real gpuscope binary, on the sim source and a
// fake kubelet (internal/testkit/kubelettest) that gives its GPUs to pods,
// against a real kube-apiserver (internal/testkit/kubetest) with the token
// of the service account the chart creates, seen as a pod sees it: pod
// labels and DRA devices set through the API reach the exported series,
// through relabels, deletions, an API server restart and a watch that
// expires.
package kubewatch

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
	"github.com/gpuscope/gpuscope/internal/testkit/kubelettest"
	"github.com/gpuscope/gpuscope/internal/testkit/kubetest"
	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
)

var shared kubetest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Stop()
	os.Exit(code)
}

var seq struct {
	sync.Mutex
	n int
}

func next() int {
	seq.Lock()
	defer seq.Unlock()
	seq.n++
	return seq.n
}

// node is one GPU node: the chart installed in a namespace of its own, the
// exporter running with its service account's token, a fake kubelet, and
// a namespace for the workload pods.
type node struct {
	cp      *kubetest.ControlPlane
	admin   *kubetest.Client
	name    string // the Kubernetes node name, gpuscope's --hostname
	chartNS string
	podNS   string
	base    string // the exporter's URL
	socket  string // the kubelet's PodResources socket
	view    *kubetest.PodView
	args    []string // the exporter's arguments but its address
	proc    *e2etest.Process
	kubelet *kubelettest.Server
	uuids   map[string]string // GPU index -> UUID
}

// startNode installs the chart with chartArgs and runs the exporter as the
// chart's DaemonSet would with the pod-attribution arguments and extra.
func startNode(t *testing.T, chartArgs []string, extra ...string) *node {
	t.Helper()
	return startNodeOn(t, shared.Get(t), chartArgs, extra...)
}

// startNodeOn is startNode on another control plane.
func startNodeOn(t *testing.T, cp *kubetest.ControlPlane, chartArgs []string, extra ...string) *node {
	t.Helper()
	n := &node{cp: cp, name: fmt.Sprintf("gpu-node-%d", next())}
	n.chartNS, n.podNS = n.name+"-gpuscope", n.name+"-ml"
	ctx := context.Background()
	require.NoError(t, cp.CreateNamespace(ctx, n.chartNS))
	require.NoError(t, cp.CreateNamespace(ctx, n.podNS))
	var err error
	n.admin, err = cp.Admin()
	require.NoError(t, err)
	// The release is named after the node: the chart's ClusterRoles are
	// named after the release, and cluster-wide.
	// This server has no Prometheus Operator; scraping is not tested here.
	install := []string{"install", n.name, kubetest.ChartDir(), "--namespace", n.chartNS, "--set", "serviceMonitor.enabled=false"}
	_, err = cp.Helm(t, append(install, chartArgs...)...)
	require.NoError(t, err)
	token, err := cp.ServiceAccountToken(ctx, n.chartNS, n.name+"-gpuscope")
	require.NoError(t, err)
	n.view = cp.NewPodView(t, n.chartNS, token)

	// Unix socket paths are limited to about 100 bytes: a short folder.
	dir, err := os.MkdirTemp("", "kw")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	n.socket = filepath.Join(dir, "kubelet.sock")
	n.args = append([]string{"--hostname", n.name, "--source", "sim", "--sim-gpus", "2",
		"--kubernetes", "--kubernetes-pod-resources-socket", n.socket, "--kubernetes-refresh-interval", "200ms",
		"--log-level", "debug"}, extra...)
	n.startExporter(t)
	n.uuids = gpuUUIDs(t, n.base)
	require.Len(t, n.uuids, 2)
	return n
}

// startExporter runs the exporter as in the chart's pod, and waits until
// it is ready.
func (n *node) startExporter(t *testing.T) {
	t.Helper()
	addr := e2etest.FreePort(t)
	name, argv := n.view.Command(t, e2etest.Binary(t), append([]string{"--address", addr}, n.args...)...)
	n.proc = e2etest.Start(t, name, argv...)
	n.base = "http://" + addr
	e2etest.WaitHTTP(t, n.base+"/ready", 60*time.Second)
}

// restartExporter stops the exporter by its PID and starts it again, as a
// rollout of the DaemonSet does.
func (n *node) restartExporter(t *testing.T) {
	t.Helper()
	_ = n.proc.Cmd.Process.Signal(os.Interrupt)
	_ = n.proc.Cmd.Wait()
	n.startExporter(t)
}

// giveGPUs starts the fake kubelet with the pods given.
func (n *node) giveGPUs(t *testing.T, pods ...kubelettest.Pod) {
	t.Helper()
	var err error
	n.kubelet, err = kubelettest.Start(n.socket, pods)
	require.NoError(t, err)
	t.Cleanup(n.kubelet.Stop)
}

// gpuPod is a pod of the kubelet's answer holding GPU index gpu.
func (n *node) gpuPod(name, gpu string) kubelettest.Pod {
	return kubelettest.Pod{Name: name, Namespace: n.podNS, Containers: []kubelettest.Container{{Name: "main",
		Devices: []kubelettest.Device{{Resource: "nvidia.com/gpu", IDs: []string{n.uuids[gpu]}}}}}}
}

// podOf is a pod bound to node, as the scheduler leaves it.
func podOf(node, name string, labels ...map[string]string) kubetest.Object {
	meta := kubetest.Object{"name": name}
	if len(labels) > 0 && labels[0] != nil {
		meta["labels"] = labels[0]
	}
	return kubetest.Object{"apiVersion": "v1", "kind": "Pod", "metadata": meta,
		"spec": kubetest.Object{"nodeName": node, "containers": []any{
			kubetest.Object{"name": "main", "image": "registry.invalid/train:1"},
		}}}
}

// createPod creates a pod bound to the node.
func (n *node) createPod(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	_, err := n.admin.Create(context.Background(), kubetest.PodPath(n.podNS, ""), podOf(n.name, name, labels))
	require.NoError(t, err)
}

func (n *node) relabel(t *testing.T, pod string, labels map[string]any) {
	t.Helper()
	_, err := n.admin.Patch(context.Background(), kubetest.PodPath(n.podNS, pod), kubetest.Object{"metadata": kubetest.Object{"labels": labels}})
	require.NoError(t, err)
}

// deletePod deletes a pod as it happens on a node: the API server marks it
// (graceful deletion, the pod is still there), then the kubelet, once the
// containers stopped, deletes it for good.
func (n *node) deletePod(t *testing.T, pod string) {
	t.Helper()
	require.NoError(t, n.admin.Delete(context.Background(), kubetest.PodPath(n.podNS, pod), -1))
	var p kubetest.Object
	require.NoError(t, n.admin.Get(context.Background(), kubetest.PodPath(n.podNS, pod), &p), "a bound pod stays until its kubelet confirms")
	require.NoError(t, n.admin.Delete(context.Background(), kubetest.PodPath(n.podNS, pod), 0))
}

// series is one GPU_TEMP series of a scrape, by its labels.
type series map[string]string

var (
	tempLine = regexp.MustCompile(`(?m)^DCGM_FI_DEV_GPU_TEMP\{(.*)\} `)
	labelRe  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// scrape returns the GPU_TEMP series of one scrape of the exporter, by GPU
// index (several for a GPU of several DRA claim holders), and the body.
func scrape(base string) (map[string][]series, string, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "", err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("/metrics: %s", resp.Status)
	}
	out := map[string][]series{}
	for _, m := range tempLine.FindAllStringSubmatch(string(b), -1) {
		s := series{}
		for _, l := range labelRe.FindAllStringSubmatch(m[1], -1) {
			s[l[1]] = l[2]
		}
		out[s["gpu"]] = append(out[s["gpu"]], s)
	}
	return out, string(b), nil
}

func gpuUUIDs(t *testing.T, base string) map[string]string {
	t.Helper()
	got, _, err := scrape(base)
	require.NoError(t, err)
	out := map[string]string{}
	for gpu, ss := range got {
		out[gpu] = ss[0]["UUID"]
	}
	return out
}

// waitSeries waits until the series of GPU gpu are as check wants.
func (n *node) waitSeries(t *testing.T, what, gpu string, check func([]series) error) {
	t.Helper()
	var last error
	ok := testwait.Every(60*time.Second, 50*time.Millisecond, func() bool {
		got, _, err := scrape(n.base)
		if err == nil {
			err = check(got[gpu])
		}
		last = err
		return err == nil
	})
	if !ok {
		t.Fatalf("GPU %s: %s: not within 60s: %v", gpu, what, last)
	}
}

// hasLabels wants one series with the labels given ("" for absent).
func hasLabels(want map[string]string) func([]series) error {
	return func(ss []series) error {
		if len(ss) != 1 {
			return fmt.Errorf("want one series, got %v", ss)
		}
		for k, v := range want {
			if ss[0][k] != v {
				return fmt.Errorf("%s=%q, want %q (series %v)", k, ss[0][k], v, ss[0])
			}
		}
		return nil
	}
}

// metric is the value of an unlabelled series of the exporter's own.
func (n *node) metric(name string) (string, error) {
	_, body, err := scrape(n.base)
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return "", fmt.Errorf("no %s in the scrape", name)
	}
	return m[1], nil
}

func (n *node) waitMetric(t *testing.T, name, want string) {
	t.Helper()
	var got string
	var err error
	ok := testwait.Every(90*time.Second, 50*time.Millisecond, func() bool {
		got, err = n.metric(name)
		return err == nil && got == want
	})
	if !ok {
		t.Fatalf("%s = %q (%v), want %s", name, got, err, want)
	}
}

// waitLog waits until the exporter's output has a line matching re.
func (n *node) waitLog(t *testing.T, re string) string {
	t.Helper()
	rx := regexp.MustCompile(re)
	var line string
	ok := testwait.Every(90*time.Second, 50*time.Millisecond, func() bool {
		line = rx.FindString(n.proc.Output())
		return line != ""
	})
	if !ok {
		t.Fatalf("no log line matches %q; the exporter said:\n%s", re, tail(n.proc.Output()))
	}
	return line
}

func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}
