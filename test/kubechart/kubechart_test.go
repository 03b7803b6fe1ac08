// Package kubechart installs the gpuscope chart on a real kube-apiserver
// (internal/testkit/kubetest): every object must pass the server's
// validation, strict field validation and the Prometheus Operator's CRD
// schemas included; helm upgrade and uninstall must be clean; and the
// service account the chart creates must be allowed exactly what the
// exporter reads, as the server's authorizer answers.
package kubechart

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/compattest"
	"github.com/gpuscope/gpuscope/internal/testkit/kubetest"
)

// withOperator has the Prometheus Operator's CRDs; bare has none, as a
// cluster without the operator.
var withOperator, bare kubetest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	withOperator.Stop()
	bare.Stop()
	os.Exit(code)
}

var crdsOnce sync.Once

// operatorCRDs are the Prometheus Operator's CRDs of the kinds the chart
// creates.
var operatorCRDs = []string{
	"monitoring.coreos.com_servicemonitors.yaml",
	"monitoring.coreos.com_podmonitors.yaml",
	"monitoring.coreos.com_prometheusrules.yaml",
}

// serverWithOperator is the control plane with the operator's CRDs.
func serverWithOperator(t *testing.T) *kubetest.ControlPlane {
	t.Helper()
	cp := withOperator.Get(t)
	var err error
	crdsOnce.Do(func() {
		var dir string
		if dir, err = kubetest.PrometheusOperatorCRDs(); err != nil {
			return
		}
		var files []string
		for _, f := range operatorCRDs {
			files = append(files, filepath.Join(dir, f))
		}
		err = cp.InstallCRDs(context.Background(), files...)
	})
	require.NoError(t, err, "installing the Prometheus Operator's CRDs")
	return cp
}

// release is one install of the chart in a namespace of its own.
type release struct {
	cp        *kubetest.ControlPlane
	name, ns  string
	args      []string
	installed []kubetest.Object
}

var nsSeq struct {
	sync.Mutex
	n int
}

func newRelease(t *testing.T, cp *kubetest.ControlPlane, args ...string) *release {
	t.Helper()
	nsSeq.Lock()
	defer nsSeq.Unlock()
	nsSeq.n++
	ns := fmt.Sprintf("chart-%d", nsSeq.n)
	require.NoError(t, cp.CreateNamespace(context.Background(), ns))
	// Release names differ too: the chart's ClusterRoles are named after
	// the release, and cluster-wide.
	return &release{cp: cp, name: fmt.Sprintf("gs%d", nsSeq.n), ns: ns, args: args}
}

// validate renders the release as helm would install it on this server and
// asks the server to validate every object strictly, without storing it.
func (r *release) validate(t *testing.T) []kubetest.Object {
	t.Helper()
	objs, err := r.cp.RenderForServer(t, r.name, r.ns, kubetest.ChartDir(), r.args...)
	require.NoError(t, err)
	require.NotEmpty(t, objs)
	admin, err := r.cp.Admin()
	require.NoError(t, err)
	for _, o := range objs {
		assert.NoError(t, admin.ValidateStrict(context.Background(), o, r.ns), "%s %s", o["kind"], name(o))
	}
	return objs
}

// install runs helm install and checks that every object of the release is
// on the server, and that helm printed no warning of the server.
func (r *release) install(t *testing.T) {
	t.Helper()
	res, err := r.cp.Helm(t, append([]string{"install", r.name, kubetest.ChartDir(), "--namespace", r.ns}, r.args...)...)
	require.NoError(t, err)
	assert.NotContains(t, strings.ToLower(res.Stderr), "warning", "helm install printed the server's warnings")
	r.installed = r.manifest(t)
	r.requirePresent(t, true)
}

// manifest is the release's objects as helm recorded them.
func (r *release) manifest(t *testing.T) []kubetest.Object {
	t.Helper()
	res, err := r.cp.Helm(t, "get", "manifest", r.name, "--namespace", r.ns)
	require.NoError(t, err)
	objs, err := kubetest.DecodeYAML(strings.NewReader(res.Stdout))
	require.NoError(t, err)
	return objs
}

// requirePresent checks that each installed object is (or is not) on the
// server.
func (r *release) requirePresent(t *testing.T, present bool) {
	t.Helper()
	admin, err := r.cp.Admin()
	require.NoError(t, err)
	for _, o := range r.installed {
		p, err := admin.ObjectPath(context.Background(), o, r.ns)
		require.NoError(t, err)
		err = admin.Get(context.Background(), p, nil)
		if present {
			assert.NoError(t, err, "%s %s after install", o["kind"], name(o))
		} else {
			assert.True(t, kubetest.IsStatus(err, http.StatusNotFound), "%s %s after uninstall: %v", o["kind"], name(o), err)
		}
	}
}

// upgradeAndUninstall upgrades the release with one more value, then
// uninstalls it: nothing of it, its release records included, may remain.
func (r *release) upgradeAndUninstall(t *testing.T) {
	t.Helper()
	res, err := r.cp.Helm(t, append([]string{"upgrade", r.name, kubetest.ChartDir(), "--namespace", r.ns,
		"--set", "podAnnotations.upgraded=yes"}, r.args...)...)
	require.NoError(t, err)
	assert.NotContains(t, strings.ToLower(res.Stderr), "warning", "helm upgrade printed the server's warnings")
	r.installed = r.manifest(t)
	r.requirePresent(t, true)
	admin, err := r.cp.Admin()
	require.NoError(t, err)
	var ds kubetest.Object
	require.NoError(t, admin.Get(context.Background(), "/apis/apps/v1/namespaces/"+r.ns+"/daemonsets/"+daemonSetName(t, r.installed), &ds))
	ann := dig(ds, "spec", "template", "metadata", "annotations")
	assert.Equal(t, "yes", ann["upgraded"], "the upgrade reached the DaemonSet")

	_, err = r.cp.Helm(t, "uninstall", r.name, "--namespace", r.ns, "--wait")
	require.NoError(t, err)
	r.requirePresent(t, false)
	var secrets struct {
		Items []kubetest.Object `json:"items"`
	}
	require.NoError(t, admin.Get(context.Background(), "/api/v1/namespaces/"+r.ns+"/secrets?labelSelector=owner%3Dhelm", &secrets))
	assert.Empty(t, secrets.Items, "helm's release records remain after uninstall")
}

func name(o kubetest.Object) string {
	m, _ := o["metadata"].(kubetest.Object)
	n, _ := m["name"].(string)
	return n
}

func dig(o kubetest.Object, path ...string) kubetest.Object {
	for _, p := range path {
		next, _ := o[p].(kubetest.Object)
		o = next
	}
	return o
}

func daemonSetName(t *testing.T, objs []kubetest.Object) string {
	t.Helper()
	for _, o := range objs {
		if o["kind"] == "DaemonSet" {
			return name(o)
		}
	}
	t.Fatal("the release has no DaemonSet")
	return ""
}

func kinds(objs []kubetest.Object) map[string]int {
	out := map[string]int{}
	for _, o := range objs {
		out[o["kind"].(string)]++
	}
	return out
}

// allOptional turns on every object the chart can create.
var allOptional = []string{
	"--set", "serviceMonitor.enabled=true",
	"--set", "podMonitor.enabled=true",
	"--set", "prometheusRule.enabled=true",
	"--set", "dashboards.enabled=true",
	"--set", "tlsServerConfig.enabled=true",
	"--set", "basicAuth.users.prometheus=secret",
	"--set", "kubernetesDRA.enabled=true",
	"--set", "kubernetes.podLabels.allowlist=team|app\\.kubernetes\\.io/name",
	"--set", "kubernetes.sharedGPUAttribution=true",
	"--set", "kubernetes.podUIDLabel=true",
	"--set", "counters.profiling=true",
	"--set", "hpcJobMappingDir=/var/run/hpc-jobs",
}

// TestInstallOnAServerWithThePrometheusOperator installs the chart with its
// defaults, with every optional object, and with dcgm-exporter's own values
// file, on a server with the Prometheus Operator's CRDs: the server accepts
// every object under strict validation, and helm upgrade and uninstall are
// clean.
func TestInstallOnAServerWithThePrometheusOperator(t *testing.T) {
	cp := serverWithOperator(t)
	cases := []struct {
		name  string
		args  func(t *testing.T) []string
		kinds []string
	}{
		{"defaults", func(*testing.T) []string { return nil }, []string{"DaemonSet", "ServiceAccount", "Service", "ConfigMap"}},
		{"every optional object", func(*testing.T) []string { return allOptional }, []string{"DaemonSet", "ServiceAccount", "Service",
			"ConfigMap", "ServiceMonitor", "PodMonitor", "PrometheusRule", "Secret", "ClusterRole", "ClusterRoleBinding"}},
		{"dcgm-exporter's values file", func(t *testing.T) []string {
			return []string{"-f", filepath.Join(compattest.Dir(t), "helm-values.yaml")}
		}, []string{"DaemonSet", "ServiceAccount", "Service", "ServiceMonitor", "ConfigMap"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRelease(t, cp, tc.args(t)...)
			objs := r.validate(t)
			got := kinds(objs)
			for _, k := range tc.kinds {
				assert.NotZero(t, got[k], "the release has no %s (it has %v)", k, got)
			}
			r.install(t)
			r.upgradeAndUninstall(t)
		})
	}
}

// TestDefaultInstallWithoutThePrometheusOperator installs the chart with its
// defaults on a cluster that does not serve the Prometheus Operator's API,
// as most clusters: it must succeed, without the operator's objects.
func TestDefaultInstallWithoutThePrometheusOperator(t *testing.T) {
	cp := bare.Get(t)
	r := newRelease(t, cp)
	objs := r.validate(t)
	for _, o := range objs {
		assert.NotContains(t, o["apiVersion"], "monitoring.coreos.com", "%s %s needs the Prometheus Operator", o["kind"], name(o))
	}
	r.install(t)
	r.upgradeAndUninstall(t)
}

// TestCRDSchemaRefusesAnUnknownField checks that the strict validation the
// install tests rely on catches what helm's own install lets through: a
// field the Prometheus Operator's schema does not have is pruned with a
// warning by a plain create, and refused here.
func TestCRDSchemaRefusesAnUnknownField(t *testing.T) {
	cp := serverWithOperator(t)
	r := newRelease(t, cp, "--set", "serviceMonitor.enabled=true")
	objs, err := cp.RenderForServer(t, r.name, r.ns, kubetest.ChartDir(), r.args...)
	require.NoError(t, err)
	admin, err := cp.Admin()
	require.NoError(t, err)
	var sm kubetest.Object
	for _, o := range objs {
		if o["kind"] == "ServiceMonitor" {
			sm = o
		}
	}
	require.NotNil(t, sm, "the release has no ServiceMonitor")
	require.NoError(t, admin.ValidateStrict(context.Background(), sm, r.ns))
	endpoints := dig(sm, "spec")["endpoints"].([]any)
	endpoints[0].(kubetest.Object)["scrapeIntervall"] = "15s"
	err = admin.ValidateStrict(context.Background(), sm, r.ns)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "scrapeIntervall")
}

// TestServerReportsItsRelease checks that the kube-apiserver build is
// stamped with its release, as charts that check kubeVersion need
// (dcgm-exporter's among them): an unstamped build reports v0.0.0-master.
func TestServerReportsItsRelease(t *testing.T) {
	cp := bare.Get(t)
	mod, err := os.ReadFile(filepath.Join("..", "..", "tools", "kube-apiserver", "go.mod"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s*k8s.io/kubernetes (v\S+)`).FindSubmatch(mod)
	require.NotNil(t, m, "tools/kube-apiserver/go.mod requires no k8s.io/kubernetes")
	admin, err := cp.Admin()
	require.NoError(t, err)
	var v struct {
		GitVersion, Major, Minor string
	}
	require.NoError(t, admin.Get(context.Background(), "/version", &v))
	assert.Equal(t, string(m[1]), v.GitVersion)
	assert.Equal(t, strings.Split(strings.TrimPrefix(v.GitVersion, "v"), ".")[:2], []string{v.Major, v.Minor})
}
