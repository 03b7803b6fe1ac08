// Package charttest renders the gpuscope Helm chart with the helm CLI and
// decodes every object strictly into the Kubernetes API types, so an unknown
// or misplaced field fails. It is its own module, so Helm and the Kubernetes
// API machinery never reach the exporter binary.
package charttest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

const (
	repoRoot = "../../.."
	chartDir = "../gpuscope"
)

// helmBin finds the helm CLI that scripts/install-helm.sh installs.
func helmBin(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	out, err := exec.Command("go", "env", "GOPATH").Output()
	if err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "helm")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("helm not found: run scripts/install-helm.sh")
	}
	t.Skip("helm not found: run scripts/install-helm.sh")
	return ""
}

func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// rendered holds the chart's objects by kind and name.
type rendered struct {
	daemonSet       *appsv1.DaemonSet
	configMaps      map[string]*corev1.ConfigMap
	secrets         map[string]*corev1.Secret
	services        []*corev1.Service
	serviceAccounts []*corev1.ServiceAccount
	serviceMonitor  *monitoringv1.ServiceMonitor
	podMonitor      *monitoringv1.PodMonitor
	prometheusRule  *monitoringv1.PrometheusRule
	networkPolicy   *networkingv1.NetworkPolicy
	clusterRoles    []*rbacv1.ClusterRole
	roleBindings    []*rbacv1.ClusterRoleBinding
	kinds           []string
}

func render(t *testing.T, sets ...string) rendered {
	t.Helper()
	return renderOn(t, nil, sets...)
}

// renderOn renders as helm install does on a cluster that serves apis
// besides the built-in ones (--api-versions).
func renderOn(t *testing.T, apis []string, sets ...string) rendered {
	t.Helper()
	args := []string{"template", "gpuscope", chartDir, "--namespace", "monitoring"}
	for _, a := range apis {
		args = append(args, "--api-versions", a)
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := helm(t, args...)
	require.NoError(t, err)
	return decode(t, out)
}

// decode splits a multi-document stream and decodes each document strictly
// into its API type.
func decode(t *testing.T, stream string) rendered {
	t.Helper()
	r := rendered{configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}}
	for i, doc := range strings.Split(stream, "\n---") {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		var head struct {
			Kind string `json:"kind"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &head), "document %d", i)
		var obj any
		switch head.Kind {
		case "DaemonSet":
			r.daemonSet = &appsv1.DaemonSet{}
			obj = r.daemonSet
		case "ConfigMap":
			cm := &corev1.ConfigMap{}
			defer func() { r.configMaps[cm.Name] = cm }()
			obj = cm
		case "Secret":
			s := &corev1.Secret{}
			defer func() { r.secrets[s.Name] = s }()
			obj = s
		case "Service":
			s := &corev1.Service{}
			r.services = append(r.services, s)
			obj = s
		case "ServiceAccount":
			s := &corev1.ServiceAccount{}
			r.serviceAccounts = append(r.serviceAccounts, s)
			obj = s
		case "ServiceMonitor":
			r.serviceMonitor = &monitoringv1.ServiceMonitor{}
			obj = r.serviceMonitor
		case "PodMonitor":
			r.podMonitor = &monitoringv1.PodMonitor{}
			obj = r.podMonitor
		case "PrometheusRule":
			r.prometheusRule = &monitoringv1.PrometheusRule{}
			obj = r.prometheusRule
		case "NetworkPolicy":
			r.networkPolicy = &networkingv1.NetworkPolicy{}
			obj = r.networkPolicy
		case "ClusterRole":
			cr := &rbacv1.ClusterRole{}
			r.clusterRoles = append(r.clusterRoles, cr)
			obj = cr
		case "ClusterRoleBinding":
			b := &rbacv1.ClusterRoleBinding{}
			r.roleBindings = append(r.roleBindings, b)
			obj = b
		default:
			t.Fatalf("document %d: kind %q is not expected from the chart", i, head.Kind)
		}
		require.NoError(t, yaml.UnmarshalStrict([]byte(doc), obj), "document %d (%s):\n%s", i, head.Kind, doc)
		r.kinds = append(r.kinds, head.Kind)
	}
	sort.Strings(r.kinds)
	return r
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func container(t *testing.T, ds *appsv1.DaemonSet, name string) corev1.Container {
	t.Helper()
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q", name)
	return corev1.Container{}
}

func caps(c corev1.Container) []corev1.Capability {
	if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil {
		return nil
	}
	return c.SecurityContext.Capabilities.Add
}

func volume(ds *appsv1.DaemonSet, name string) *corev1.Volume {
	for i, v := range ds.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return &ds.Spec.Template.Spec.Volumes[i]
		}
	}
	return nil
}

// TestDefaults renders the defaults as on a cluster without the Prometheus
// Operator: everything installs, the rules come as a ConfigMap, and the
// profiling fields, insight and the dashboards are on.
func TestDefaults(t *testing.T) {
	r := render(t)
	assert.Equal(t, []string{"ConfigMap", "ConfigMap", "ConfigMap", "DaemonSet", "Service", "ServiceAccount"}, r.kinds,
		"no ServiceMonitor or PrometheusRule where the cluster does not serve them")
	assert.Subset(t, keys(r.configMaps), []string{"gpuscope-rules", "gpuscope-dashboards"})
	ds := r.daemonSet
	require.NotNil(t, ds)
	pod := ds.Spec.Template.Spec
	c := container(t, ds, "gpuscope")

	// dcgm-exporter's chart defaults (deployment/values.yaml): no node
	// selector, the system-node-critical priority class.
	assert.Empty(t, pod.NodeSelector)
	assert.Equal(t, "system-node-critical", pod.PriorityClassName)
	require.Len(t, pod.Tolerations, 1)
	assert.Equal(t, "nvidia.com/gpu", pod.Tolerations[0].Key)
	assert.False(t, pod.HostPID, "hostPID only with shared-GPU attribution")
	assert.Nil(t, pod.RuntimeClassName)
	assert.Equal(t, "ghcr.io/gpuscope/gpuscope:0.1.0", c.Image)
	assert.Contains(t, c.Args, "--kubernetes")
	assert.Contains(t, c.Args, "--kubernetes-pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock")
	assert.Contains(t, c.Args, "--collectors=/etc/gpuscope/counters/counters.csv")
	assert.Contains(t, c.Args, "--dcgm-mode=embedded")
	assert.Contains(t, c.Args, "--insight")
	// The read API's bounds are the chart's defaults, kept within its
	// memory limit (docs/reliability.md).
	assert.Contains(t, c.Args, "--api-max-requests=4")
	assert.Contains(t, c.Args, "--api-max-bytes=16777216")
	assert.Contains(t, c.Args, "--api-max-streams=8")

	pr := volume(ds, "pod-resources")
	require.NotNil(t, pr)
	require.NotNil(t, pr.HostPath)
	assert.Equal(t, "/var/lib/kubelet/pod-resources", pr.HostPath.Path, "the directory, not the socket")
	assert.Equal(t, corev1.HostPathDirectory, *pr.HostPath.Type)
	counters := volume(ds, "counters")
	require.NotNil(t, counters)
	require.NotNil(t, counters.ConfigMap)
	for _, m := range c.VolumeMounts {
		assert.Empty(t, m.SubPath, "mount %s: subPath would stop ConfigMap updates", m.Name)
	}

	var nodeName *corev1.EnvVar
	for i := range c.Env {
		if c.Env[i].Name == "NODE_NAME" {
			nodeName = &c.Env[i]
		}
	}
	require.NotNil(t, nodeName)
	assert.Equal(t, "spec.nodeName", nodeName.ValueFrom.FieldRef.FieldPath)

	assert.Equal(t, "/health", c.LivenessProbe.HTTPGet.Path)
	assert.Equal(t, "/ready", c.ReadinessProbe.HTTPGet.Path)
	assert.False(t, c.Resources.Requests.Cpu().IsZero())
	assert.False(t, c.Resources.Limits.Memory().IsZero())
	sc := c.SecurityContext
	require.NotNil(t, sc)
	assert.True(t, *sc.ReadOnlyRootFilesystem)
	assert.False(t, *sc.AllowPrivilegeEscalation)
	assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
	// As dcgm-exporter's chart grants by default (deployment/values.yaml:
	// capabilities.add: ["SYS_ADMIN"], "Required for profiling metrics").
	assert.Equal(t, []corev1.Capability{"SYS_ADMIN"}, caps(c), "the profiling fields are on by default")

	cm := r.configMaps["gpuscope-counters"]
	require.NotNil(t, cm)
	assert.Contains(t, cm.Data["counters.csv"], "DCGM_FI_DEV_GPU_UTIL")
	assert.Contains(t, cm.Data["counters.csv"], "DCGM_FI_PROF_SM_ACTIVE")
	require.Len(t, r.services, 1)
	assert.Equal(t, int32(9400), r.services[0].Spec.Ports[0].Port)
	require.Len(t, r.serviceAccounts, 1)
	assert.False(t, *r.serviceAccounts[0].AutomountServiceAccountToken)
	assert.False(t, *pod.AutomountServiceAccountToken, "no API access without pod labels")
	assert.Empty(t, r.clusterRoles, "no RBAC without pod labels")
	assert.Empty(t, r.roleBindings, "no RBAC without pod labels")
	for _, a := range c.Args {
		assert.NotContains(t, a, "--kubernetes-pod-labels")
	}
}

func TestOptions(t *testing.T) {
	tests := []struct {
		name  string
		sets  []string
		check func(t *testing.T, r rendered)
	}{
		{"profiling embedded gives gpuscope SYS_ADMIN", []string{"counters.profiling=true"}, func(t *testing.T, r rendered) {
			assert.Equal(t, []corev1.Capability{"SYS_ADMIN"}, caps(container(t, r.daemonSet, "gpuscope")))
			assert.Contains(t, r.configMaps["gpuscope-counters"].Data["counters.csv"], "DCGM_FI_PROF_SM_ACTIVE")
		}},
		// One value for an operator who grants no capability: no
		// SYS_ADMIN, no profiling field the host engine could not read,
		// no insight that would watch them.
		{"profiling off: no capability, no profiling field, no insight", []string{"counters.profiling=false"}, func(t *testing.T, r rendered) {
			c := container(t, r.daemonSet, "gpuscope")
			assert.Empty(t, caps(c))
			assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
			assert.NotContains(t, c.Args, "--insight")
			csv := r.configMaps["gpuscope-counters"].Data["counters.csv"]
			assert.Contains(t, csv, "DCGM_FI_DEV_GPU_UTIL")
			for _, l := range strings.Split(csv, "\n") {
				assert.False(t, strings.HasPrefix(strings.TrimSpace(l), "DCGM_FI_PROF_"), "line %q", l)
			}
			def, err := os.ReadFile(filepath.Join(repoRoot, "etc/default-counters.csv"))
			require.NoError(t, err)
			for _, l := range strings.Split(string(def), "\n") {
				if !strings.HasPrefix(strings.TrimSpace(l), "DCGM_FI_PROF_") {
					assert.Contains(t, csv, l, "every other line of etc/default-counters.csv is kept")
				}
			}
		}},
		{"insight off", []string{"insight.enabled=false"}, func(t *testing.T, r rendered) {
			assert.NotContains(t, container(t, r.daemonSet, "gpuscope").Args, "--insight")
			assert.Equal(t, []corev1.Capability{"SYS_ADMIN"}, caps(container(t, r.daemonSet, "gpuscope")))
		}},
		{"profiling with sidecar gives the host engine SYS_ADMIN", []string{"counters.profiling=true", "dcgm.mode=sidecar"}, func(t *testing.T, r rendered) {
			require.Len(t, r.daemonSet.Spec.Template.Spec.Containers, 2)
			assert.Empty(t, caps(container(t, r.daemonSet, "gpuscope")))
			assert.Equal(t, []corev1.Capability{"SYS_ADMIN"}, caps(container(t, r.daemonSet, "nv-hostengine")))
			args := container(t, r.daemonSet, "gpuscope").Args
			assert.Contains(t, args, "--dcgm-mode=remote")
			assert.Contains(t, args, "--dcgm-remote-hostengine=127.0.0.1:5555")
		}},
		{"node host engine", []string{"dcgm.mode=node", "counters.profiling=true"}, func(t *testing.T, r rendered) {
			c := container(t, r.daemonSet, "gpuscope")
			assert.Contains(t, c.Args, "--dcgm-remote-hostengine=$(HOST_IP):5555")
			assert.Empty(t, caps(c), "the node's host engine profiles, not gpuscope")
			assert.Len(t, r.daemonSet.Spec.Template.Spec.Containers, 1)
		}},
		{"shared attribution runs in the host PID namespace", []string{"kubernetes.sharedGPUAttribution=true"}, func(t *testing.T, r rendered) {
			assert.True(t, r.daemonSet.Spec.Template.Spec.HostPID)
			assert.Contains(t, container(t, r.daemonSet, "gpuscope").Args, "--kubernetes-shared-gpu-attribution")
			assert.NotNil(t, volume(r.daemonSet, "pod-logs"))
			assert.NotNil(t, volume(r.daemonSet, "container-logs"))
		}},
		{"kubernetes off", []string{"kubernetes.enabled=false", "source=sim"}, func(t *testing.T, r rendered) {
			c := container(t, r.daemonSet, "gpuscope")
			assert.NotContains(t, c.Args, "--kubernetes")
			assert.Nil(t, volume(r.daemonSet, "pod-resources"))
			assert.True(t, *c.SecurityContext.RunAsNonRoot)
		}},
		{"pod labels bring read-only RBAC on pods and the token", []string{"kubernetes.podLabels.allowlist=team|app.kubernetes.io/.*"}, func(t *testing.T, r rendered) {
			pod := r.daemonSet.Spec.Template.Spec
			assert.Contains(t, container(t, r.daemonSet, "gpuscope").Args, "--kubernetes-pod-labels=team|app.kubernetes.io/.*")
			assert.True(t, *pod.AutomountServiceAccountToken)
			require.Len(t, r.clusterRoles, 1)
			assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}},
				r.clusterRoles[0].Rules)
			require.Len(t, r.roleBindings, 1)
			b := r.roleBindings[0]
			assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: r.clusterRoles[0].Name}, b.RoleRef)
			assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: pod.ServiceAccountName, Namespace: "monitoring"}}, b.Subjects)
		}},
		// dcgm-exporter's chart (deployment/templates/clusterrole.yaml,
		// daemonset.yaml): kubernetesDRA.enabled sets KUBERNETES_ENABLE_DRA,
		// mounts the token and grants get, list and watch on resourceslices.
		{"kubernetesDRA brings read-only RBAC on resourceslices and the token", []string{"kubernetesDRA.enabled=true"}, func(t *testing.T, r rendered) {
			pod := r.daemonSet.Spec.Template.Spec
			assert.Contains(t, container(t, r.daemonSet, "gpuscope").Env, corev1.EnvVar{Name: "KUBERNETES_ENABLE_DRA", Value: "true"})
			assert.True(t, *pod.AutomountServiceAccountToken)
			require.Len(t, r.clusterRoles, 1)
			assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceslices"}, Verbs: []string{"get", "list", "watch"}}},
				r.clusterRoles[0].Rules)
			require.Len(t, r.roleBindings, 1)
			assert.Equal(t, r.clusterRoles[0].Name, r.roleBindings[0].RoleRef.Name)
			assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: pod.ServiceAccountName, Namespace: "monitoring"}}, r.roleBindings[0].Subjects)
		}},
		{"kubernetesDRA off: no resourceslices access", nil, func(t *testing.T, r rendered) {
			assert.Empty(t, r.clusterRoles)
			assert.False(t, *r.daemonSet.Spec.Template.Spec.AutomountServiceAccountToken)
		}},
		{"pod labels with an existing service account", []string{"kubernetes.podLabels.allowlist=team", "serviceAccount.create=false", "serviceAccount.name=gpu-reader"}, func(t *testing.T, r rendered) {
			assert.Empty(t, r.serviceAccounts)
			assert.Equal(t, "gpu-reader", r.daemonSet.Spec.Template.Spec.ServiceAccountName)
			require.Len(t, r.roleBindings, 1)
			assert.Equal(t, "gpu-reader", r.roleBindings[0].Subjects[0].Name)
		}},
		{"extra resource names and pod UID", []string{"kubernetes.resourceNames={example.com/gpu,example.com/mig-*}", "kubernetes.podUIDLabel=true"}, func(t *testing.T, r rendered) {
			c := container(t, r.daemonSet, "gpuscope")
			assert.Contains(t, c.Args, "--kubernetes-resource-names=example.com/gpu,example.com/mig-*")
			assert.Contains(t, c.Args, "--kubernetes-pod-uid-label")
			assert.False(t, r.daemonSet.Spec.Template.Spec.HostPID)
		}},
		{"service monitor", []string{"serviceMonitor.enabled=true", "serviceMonitor.additionalLabels.release=kps"}, func(t *testing.T, r rendered) {
			require.NotNil(t, r.serviceMonitor)
			assert.Equal(t, "kps", r.serviceMonitor.Labels["release"])
			ep := r.serviceMonitor.Spec.Endpoints[0]
			assert.True(t, ep.HonorLabels)
			require.NotEmpty(t, ep.RelabelConfigs)
			assert.Equal(t, "(pod|namespace|container)", ep.RelabelConfigs[0].Regex)
		}},
		{"pod monitor", []string{"podMonitor.enabled=true"}, func(t *testing.T, r rendered) {
			require.NotNil(t, r.podMonitor)
			assert.Equal(t, "metrics", *r.podMonitor.Spec.PodMetricsEndpoints[0].Port)
		}},
		{"prometheus rule from deploy/prometheus", []string{"prometheusRule.enabled=true"}, func(t *testing.T, r rendered) {
			require.NotNil(t, r.prometheusRule)
			assert.Equal(t, shippedRuleGroups(t), r.prometheusRule.Spec.Groups)
			assert.NotContains(t, r.configMaps, "gpuscope-rules", "the PrometheusRule carries the rules")
		}},
		{"rules ConfigMap holds the rule files as they are", nil, func(t *testing.T, r rendered) {
			cm := r.configMaps["gpuscope-rules"]
			require.NotNil(t, cm)
			files, _ := filepath.Glob(filepath.Join(repoRoot, "deploy/prometheus/*.yml"))
			require.NotEmpty(t, files)
			assert.Len(t, cm.Data, len(files))
			for _, f := range files {
				b, err := os.ReadFile(f)
				require.NoError(t, err)
				assert.Equal(t, strings.TrimRight(string(b), "\n"), cm.Data[filepath.Base(f)], f)
			}
		}},
		{"rules ConfigMap forced beside the PrometheusRule", []string{"prometheusRule.enabled=true", "prometheusRule.configMap=true", "prometheusRule.additionalLabels.release=kps"}, func(t *testing.T, r rendered) {
			require.NotNil(t, r.prometheusRule)
			require.Contains(t, r.configMaps, "gpuscope-rules")
			assert.Equal(t, "kps", r.configMaps["gpuscope-rules"].Labels["release"])
			assert.Equal(t, "kps", r.prometheusRule.Labels["release"])
		}},
		{"no rules at all", []string{"prometheusRule.enabled=false"}, func(t *testing.T, r rendered) {
			assert.Nil(t, r.prometheusRule)
			assert.NotContains(t, r.configMaps, "gpuscope-rules")
		}},
		{"dashboards off", []string{"dashboards.enabled=false"}, func(t *testing.T, r rendered) {
			assert.NotContains(t, r.configMaps, "gpuscope-dashboards")
		}},
		{"dashboards from grafana/dashboards", []string{"dashboards.enabled=true"}, func(t *testing.T, r rendered) {
			cm := r.configMaps["gpuscope-dashboards"]
			require.NotNil(t, cm)
			assert.Equal(t, "1", cm.Labels["grafana_dashboard"])
			files, _ := filepath.Glob(filepath.Join(repoRoot, "grafana/dashboards/*.json"))
			assert.Len(t, cm.Data, len(files))
			for _, f := range files {
				assert.Contains(t, cm.Data, filepath.Base(f))
			}
		}},
		{"inline web config", []string{"webConfig.config=tls_server_config: {}", "serviceMonitor.enabled=true"}, func(t *testing.T, r rendered) {
			s := r.secrets["gpuscope-web-config"]
			require.NotNil(t, s)
			assert.Contains(t, s.StringData, "web-config.yml")
			c := container(t, r.daemonSet, "gpuscope")
			assert.Contains(t, c.Args, "--web-config-file=/etc/gpuscope/web/web-config.yml")
			assert.NotNil(t, c.LivenessProbe.TCPSocket, "basic auth would fail an HTTP probe")
			assert.Equal(t, "https", string(*r.serviceMonitor.Spec.Endpoints[0].Scheme))
		}},
		{"existing web config secret", []string{"webConfig.existingSecret=my-tls"}, func(t *testing.T, r rendered) {
			assert.Empty(t, r.secrets)
			assert.Equal(t, "my-tls", volume(r.daemonSet, "web-config").Secret.SecretName)
		}},
		{"runtime class and HPC jobs", []string{"runtimeClassName=nvidia", "hpcJobMappingDir=/var/run/hpc-jobs"}, func(t *testing.T, r rendered) {
			assert.Equal(t, "nvidia", *r.daemonSet.Spec.Template.Spec.RuntimeClassName)
			assert.Contains(t, container(t, r.daemonSet, "gpuscope").Args, "--hpc-job-mapping-dir=/var/run/hpc-jobs")
			assert.Equal(t, "/var/run/hpc-jobs", volume(r.daemonSet, "hpc-jobs").HostPath.Path)
		}},
		{"everything on", []string{"counters.profiling=true", "dcgm.mode=sidecar", "kubernetes.sharedGPUAttribution=true",
			"kubernetes.podUIDLabel=true", "serviceMonitor.enabled=true", "podMonitor.enabled=true", "prometheusRule.enabled=true",
			"dashboards.enabled=true", "webConfig.config=basic_auth_users: {}", "runtimeClassName=nvidia",
			"kubernetes.podLabels.allowlist=team"}, func(t *testing.T, r rendered) {
			assert.Equal(t, []string{"ClusterRole", "ClusterRoleBinding", "ConfigMap", "ConfigMap", "DaemonSet", "PodMonitor",
				"PrometheusRule", "Secret", "Service", "ServiceAccount", "ServiceMonitor"}, r.kinds)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, render(t, tt.sets...))
		})
	}
}

func TestLint(t *testing.T) {
	out, err := helm(t, "lint", "--strict", chartDir)
	require.NoError(t, err, out)
	assert.Contains(t, out, "0 chart(s) failed")
}

func TestSchemaRejectsBadValues(t *testing.T) {
	tests := []struct{ set, want string }{
		{"source=cuda", "/source"},
		{"dcgm.mode=remote", "/dcgm/mode"},
		{"kubernetes.refreshInterval=5", "/kubernetes/refreshInterval"},
		{"kubernetes.refreshInterval=soon", "/kubernetes/refreshInterval"},
		{"service.port=70000", "/service/port"},
		{"image.pullPolicy=Sometimes", "/image/pullPolicy"},
		{"kubernetes.podResourcesDir=relative/dir", "/kubernetes/podResourcesDir"},
		{"extraArgs={-v}", "/extraArgs/0"},
		{"kubernetes.sharedGPUattribution=true", "sharedGPUattribution"},
		{"serviceMonitor.honorLabels=yes", "/serviceMonitor/honorLabels"},
		{"kubernetes.podLabels.allowlist=true", "/kubernetes/podLabels/allowlist"},
		{"kubernetes.podLabels.allowList=team", "allowList"},
		{"serviceMonitor.enabled=maybe", "/serviceMonitor/enabled"},
		{"prometheusRule.configMap=yes", "/prometheusRule/configMap"},
		{"insight.enabled=auto", "/insight/enabled"},
		{"prometheusRule.pricePerGPUHour.H100=-2", "/prometheusRule/pricePerGPUHour/H100"},
		{"prometheusRule.pricePerGPUHour.H100=2.5USD", "/prometheusRule/pricePerGPUHour/H100"},
	}
	for _, tt := range tests {
		t.Run(tt.set, func(t *testing.T) {
			_, err := helm(t, "template", "gpuscope", chartDir, "--set", tt.set)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "schema")
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	_, err := helm(t, "template", "gpuscope", chartDir, "--set", "serviceMonitor.enabled=true", "--set", "service.enabled=false")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "serviceMonitor.enabled needs service.enabled")
	_, err = helm(t, "template", "gpuscope", chartDir, "--set", "kubernetes.podLabels.allowlist=team", "--set", "kubernetes.enabled=false", "--set", "source=sim")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "needs kubernetes.enabled")
}

// TestChartFilesAreLinks: the rules, dashboards and counters files that the
// chart ships live once in the repository (deploy/prometheus,
// grafana/dashboards, etc/), and the chart reaches them through links under
// files/, which helm follows (and `helm package` resolves into plain files).
// A copy put in a link's place would drift from its source unnoticed.
func TestChartFilesAreLinks(t *testing.T) {
	for _, tt := range []struct{ link, home string }{
		{"files/prometheus", "deploy/prometheus"},
		{"files/dashboards", "grafana/dashboards"},
		{"files/default-counters.csv", "etc/default-counters.csv"},
		{"files/dcp-metrics.csv", "etc/dcp-metrics.csv"},
	} {
		t.Run(tt.link, func(t *testing.T) {
			p := filepath.Join(chartDir, tt.link)
			st, err := os.Lstat(p)
			require.NoError(t, err)
			require.Equal(t, os.ModeSymlink, st.Mode().Type(), "%s is a link to %s, not a copy", p, tt.home)
			got, err := filepath.EvalSymlinks(p)
			require.NoError(t, err, "%s resolves", p)
			got, err = filepath.Abs(got)
			require.NoError(t, err)
			want, err := filepath.Abs(filepath.Join(repoRoot, tt.home))
			require.NoError(t, err)
			assert.Equal(t, want, got, "%s leads to %s", p, tt.home)
		})
	}
}

// renderManifests renders the plain manifests as `make release` does, with
// scripts/render-manifests.sh, and returns the file.
func renderManifests(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "gpuscope.yaml")
	cmd := exec.Command(filepath.Join(repoRoot, "scripts/render-manifests.sh"), out)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(helmBin(t))+string(os.PathListSeparator)+os.Getenv("PATH"))
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, string(b))
	assert.NotContains(t, string(b), "symbolic link", "the script keeps helm's notes on the chart's links to itself")
	return out
}

// TestPlainManifests: scripts/render-manifests.sh renders the chart's
// defaults into namespace gpuscope, without the Operator's objects.
func TestPlainManifests(t *testing.T) {
	got, err := os.ReadFile(renderManifests(t))
	require.NoError(t, err)
	r := decode(t, string(got))
	require.NotNil(t, r.daemonSet)
	assert.Equal(t, "gpuscope", r.daemonSet.Namespace)
	assert.Nil(t, r.serviceMonitor, "plain manifests apply on clusters without the Operator's CRDs")
	assert.Nil(t, r.prometheusRule, "plain manifests apply on clusters without the Operator's CRDs")
}

// TestScrapeExamples checks deploy/examples with promtool. Debian's
// Prometheus is built without Kubernetes service discovery, so that example
// is checked by the promtool 3 of scripts/build-promtool.sh, which
// scripts/test.sh names in GPUSCOPE_PROMTOOL3.
func TestScrapeExamples(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool not found (Debian package prometheus)")
		}
		t.Skip("promtool not found (Debian package prometheus)")
	}
	for _, f := range []string{"prometheus-static.yml", "prometheus-kubernetes.yml"} {
		t.Run(f, func(t *testing.T) {
			out, err := exec.Command(promtool, "check", "config", filepath.Join(repoRoot, "deploy/examples", f)).CombinedOutput()
			if err != nil && strings.Contains(string(out), "field kubernetes_sd_configs not found") {
				p3 := os.Getenv("GPUSCOPE_PROMTOOL3")
				if p3 == "" {
					t.Skip("this promtool has no Kubernetes service discovery; set GPUSCOPE_PROMTOOL3 to the promtool scripts/build-promtool.sh builds (make test does)")
				}
				promtool = p3
				out, err = exec.Command(promtool, "check", "config", filepath.Join(repoRoot, "deploy/examples", f)).CombinedOutput()
			}
			require.NoError(t, err, "%s: %s", promtool, out)
		})
	}
}
