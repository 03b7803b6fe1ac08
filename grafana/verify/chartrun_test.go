package verify

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

const chartDir = repoRoot + "/deploy/helm/gpuscope"

// helmBin finds the helm CLI that scripts/install-helm.sh installs.
func helmBin(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "helm")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	skipOrFail(t, "helm not found: run scripts/install-helm.sh")
	return ""
}

// k8sObject holds the parts of the chart's objects the live check reads.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Template struct {
			Spec struct {
				Containers []k8sContainer `yaml:"containers"`
				Volumes    []struct {
					Name      string `yaml:"name"`
					ConfigMap *struct {
						Name string `yaml:"name"`
					} `yaml:"configMap"`
					HostPath *struct {
						Path string `yaml:"path"`
					} `yaml:"hostPath"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type k8sContainer struct {
	Name string   `yaml:"name"`
	Args []string `yaml:"args"`
	Env  []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			FieldRef *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
	} `yaml:"volumeMounts"`
	SecurityContext struct {
		Capabilities struct {
			Add []string `yaml:"add"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
}

// renderedChart is the chart as helm template renders it.
type renderedChart struct {
	daemonSet  *k8sObject
	configMaps map[string]*k8sObject
	kinds      []string
}

// renderChart renders the chart with the values given (none: its
// defaults), as `helm install` on a cluster without the Prometheus
// Operator would.
func renderChart(t *testing.T, sets ...string) renderedChart {
	t.Helper()
	args := []string{"template", "gpuscope", chartDir, "--namespace", "gpuscope"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(helmBin(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "helm %s: %s", strings.Join(args, " "), stderr.String())
	r := renderedChart{configMaps: map[string]*k8sObject{}}
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var o k8sObject
		err := dec.Decode(&o)
		if err != nil {
			require.ErrorContains(t, err, "EOF")
			break
		}
		if o.Kind == "" {
			continue
		}
		r.kinds = append(r.kinds, o.Kind)
		switch o.Kind {
		case "DaemonSet":
			r.daemonSet = &o
		case "ConfigMap":
			r.configMaps[o.Metadata.Name] = &o
		}
	}
	sort.Strings(r.kinds)
	require.NotNil(t, r.daemonSet, "the chart renders no DaemonSet")
	return r
}

func (r renderedChart) container(t *testing.T, name string) k8sContainer {
	t.Helper()
	for _, c := range r.daemonSet.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("the DaemonSet has no container %q", name)
	return k8sContainer{}
}

// exporterCommand turns the rendered gpuscope container into a command
// line for this machine: the DaemonSet's arguments exactly, with the source
// replaced by the sim and the listen address by a free loopback port, and
// every path under a volume's mount replaced by a folder that stands for
// it: a mounted ConfigMap's folder holds its keys, a host path's is empty
// (the node here has nothing). The environment is the container's, with
// spec.nodeName as sim-node. hostDirs maps the host-path mounts to their
// folders.
func (r renderedChart) exporterCommand(t *testing.T, addr string) (args, env []string, hostDirs map[string]string) {
	t.Helper()
	c := r.container(t, "gpuscope")
	mounts, hostDirs := map[string]string{}, map[string]string{}
	for _, m := range c.VolumeMounts {
		for _, v := range r.daemonSet.Spec.Template.Spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			require.Empty(t, m.SubPath, "mount %s", m.Name)
			dir := t.TempDir()
			mounts[m.MountPath] = dir
			switch {
			case v.ConfigMap != nil:
				cm := r.configMaps[v.ConfigMap.Name]
				require.NotNil(t, cm, "volume %s mounts ConfigMap %s, which the chart does not render", v.Name, v.ConfigMap.Name)
				for k, data := range cm.Data {
					require.NoError(t, os.WriteFile(filepath.Join(dir, k), []byte(data), 0o600))
				}
			case v.HostPath != nil:
				hostDirs[m.MountPath] = dir
			}
		}
	}
	// One pass, longest mount path first, so that a replaced path is never
	// replaced again (the folders lie under /tmp, itself a mount).
	paths := make([]string, 0, len(mounts))
	for p := range mounts {
		paths = append(paths, p)
	}
	sort.Slice(paths, func(i, j int) bool { return len(paths[i]) > len(paths[j]) })
	var pairs []string
	for _, p := range paths {
		pairs = append(pairs, p+"/", mounts[p]+"/")
	}
	repl := strings.NewReplacer(pairs...)
	var sawSource, sawAddress bool
	for _, a := range c.Args {
		switch {
		case strings.HasPrefix(a, "--source="):
			a, sawSource = "--source=sim", true
		case strings.HasPrefix(a, "--address="):
			a, sawAddress = "--address="+addr, true
		}
		args = append(args, repl.Replace(a))
	}
	require.True(t, sawSource && sawAddress, "the chart's arguments name no --source or --address: %v", c.Args)
	env = os.Environ()
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName":
			env = append(env, e.Name+"=sim-node")
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		}
	}
	return args, env, hostDirs
}

// ruleFilesFrom writes the rule files of the rendered rules ConfigMap into
// dir, as a Prometheus that mounts it reads them.
func (r renderedChart) ruleFilesFrom(t *testing.T, name, dir string) []string {
	t.Helper()
	cm := r.configMaps[name]
	require.NotNil(t, cm, "the chart renders no ConfigMap %s", name)
	var files []string
	for k, data := range cm.Data {
		p := filepath.Join(dir, k)
		require.NoError(t, os.WriteFile(p, []byte(data), 0o600))
		files = append(files, p)
	}
	sort.Strings(files)
	require.NotEmpty(t, files)
	return files
}

// simPods are the pods the fake kubelet says hold the simulated GPUs, by
// GPU index; the rest are free. The sim's default workloads (mixed) make
// GPUs 0 to 3 compute-, memory-, communication- and input-bound and GPU 4
// idle: a training job that shows every bound class, and a notebook that
// holds an idle GPU, the waste the cluster dashboard looks for.
var simPods = []struct{ namespace, pod, container string }{
	{"ml-training", "llama-train-0", "trainer"}, {"ml-training", "llama-train-0", "trainer"},
	{"ml-training", "llama-train-0", "trainer"}, {"ml-training", "llama-train-0", "trainer"},
	{"research", "notebook-7f9c", "jupyter"},
}

// startExporter runs the real binary as the rendered DaemonSet would, with
// simFlags after its arguments (the sim's GPU model, for one). When
// the chart has pod attribution on, the kubelet's PodResources API is served
// on the socket the arguments name by the fake kubelet of the main module
// (internal/testkit/kubelettest), with simPods holding the sim's GPUs.
func startExporter(t *testing.T, r renderedChart, simFlags ...string) string {
	t.Helper()
	addr := freePort(t)
	args, env, _ := r.exporterCommand(t, addr)
	args = append(args, simFlags...)
	var kubelet *os.Process
	podsFile := filepath.Join(t.TempDir(), "pods.json")
	for _, a := range args {
		if socket, ok := strings.CutPrefix(a, "--kubernetes-pod-resources-socket="); ok {
			require.NoError(t, os.WriteFile(podsFile, []byte("[]"), 0o600))
			kubelet = startWithEnv(t, buildMain(t, "./internal/testkit/kubelettest/fakekubelet"), t.TempDir(), nil,
				"-socket", socket, "-pods", podsFile)
		}
	}
	t.Logf("gpuscope %s", strings.Join(args, " "))
	startWithEnv(t, gpuscopeBinary(t), t.TempDir(), env, args...)
	waitHTTP(t, "http://"+addr+"/metrics", 30*time.Second)
	if kubelet != nil {
		writeSimPods(t, addr, podsFile)
		require.NoError(t, kubelet.Signal(syscall.SIGHUP), "reloading the fake kubelet's pods")
		ok := pollUntil(30*time.Second, 250*time.Millisecond, func() bool {
			return strings.Contains(scrape(t, addr), `pod="llama-train-0"`)
		})
		require.True(t, ok, "the pods of the fake kubelet did not reach the series within 30s")
	}
	return addr
}

var gpuUUID = regexp.MustCompile(`^DCGM_FI_DEV_GPU_TEMP\{.*\bgpu="(\d+)".*\bUUID="([^"]+)"`)

// writeSimPods writes the fake kubelet's pods file with simPods on the
// GPUs the exporter serves.
func writeSimPods(t *testing.T, addr, path string) {
	t.Helper()
	uuids := map[int]string{}
	for _, line := range strings.Split(scrape(t, addr), "\n") {
		if m := gpuUUID.FindStringSubmatch(line); m != nil {
			i, _ := strconv.Atoi(m[1])
			uuids[i] = m[2]
		}
	}
	require.Greater(t, len(uuids), len(simPods), "the sim serves fewer GPUs than simPods holds")
	type device struct {
		Resource string   `json:"resource"`
		IDs      []string `json:"ids"`
	}
	type container struct {
		Name    string   `json:"name"`
		Devices []device `json:"devices"`
	}
	type pod struct {
		Name       string      `json:"name"`
		Namespace  string      `json:"namespace"`
		Containers []container `json:"containers"`
	}
	var pods []pod
	for i, p := range simPods {
		if len(pods) == 0 || pods[len(pods)-1].Name != p.pod {
			pods = append(pods, pod{Name: p.pod, Namespace: p.namespace,
				Containers: []container{{Name: p.container, Devices: []device{{Resource: "nvidia.com/gpu"}}}}})
		}
		d := &pods[len(pods)-1].Containers[0].Devices[0]
		d.IDs = append(d.IDs, uuids[i])
	}
	b, err := json.Marshal(pods)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o600))
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// dashboards are the dashboards of the rendered dashboards ConfigMap.
func (r renderedChart) dashboards(t *testing.T) map[string][]byte {
	t.Helper()
	cm := r.configMaps["gpuscope-dashboards"]
	require.NotNil(t, cm, "the chart renders no dashboards ConfigMap")
	out := map[string][]byte{}
	for k, v := range cm.Data {
		out[k] = []byte(v)
	}
	return out
}
