package charttest

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// dcgmExporterValues is dcgm-exporter's own chart values file, which lives
// in ../shared beside the checkout. Like internal/testkit/compattest in the main
// module (which this module cannot import): skipped where the folder is
// missing, failed in CI.
func dcgmExporterValues(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "shared", "compat", "dcgm-exporter", "helm-values.yaml"))
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing; CI must have dcgm-exporter's values file: %v", p, err)
		}
		t.Skipf("%s is missing (it sits beside the checkout, not in it): skipping", p)
	}
	return p
}

func renderFile(t *testing.T, file string, sets ...string) rendered {
	t.Helper()
	args := []string{"template", "gpuscope", chartDir, "--namespace", "monitoring", "-f", file}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := helm(t, args...)
	require.NoError(t, err)
	return decode(t, out)
}

func mount(c corev1.Container, name string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].Name == name {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func envValue(c corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// TestDCGMExporterValuesFile renders the chart with dcgm-exporter's values
// file unchanged and checks what an operator relies on. Expectations from
// dcgm-exporter's deployment/values.yaml and templates/daemonset.yaml,
// service-monitor.yaml and metrics-configmap.yaml (d5e5f51).
func TestDCGMExporterValuesFile(t *testing.T) {
	r := renderFile(t, dcgmExporterValues(t))
	ds := r.daemonSet
	require.NotNil(t, ds)
	pod := ds.Spec.Template.Spec
	c := container(t, ds, "gpuscope")

	// The image named in the file is dcgm-exporter's; gpuscope's runs.
	assert.Equal(t, "ghcr.io/gpuscope/gpuscope:0.1.0", c.Image)

	// arguments: ["-f", "/etc/dcgm-exporter/default-counters.csv"], passed
	// as they are and after the chart's own, so -f wins.
	require.GreaterOrEqual(t, len(c.Args), 2)
	assert.Equal(t, []string{"-f", "/etc/dcgm-exporter/default-counters.csv"}, c.Args[len(c.Args)-2:])

	// extraConfigMapVolumes and extraVolumeMounts: the counters ConfigMap
	// mounted over /etc/dcgm-exporter/default-counters.csv, and the ConfigMap
	// itself, which dcgm-exporter's chart creates.
	v := volume(ds, "exporter-metrics-volume")
	require.NotNil(t, v)
	require.NotNil(t, v.ConfigMap)
	assert.Equal(t, "exporter-metrics-config-map", v.ConfigMap.Name)
	assert.Equal(t, []corev1.KeyToPath{{Key: "metrics", Path: "default-counters.csv"}}, v.ConfigMap.Items)
	m := mount(c, "exporter-metrics-volume")
	require.NotNil(t, m)
	assert.Equal(t, "/etc/dcgm-exporter/default-counters.csv", m.MountPath)
	assert.Equal(t, "default-counters.csv", m.SubPath)
	cm := r.configMaps["exporter-metrics-config-map"]
	require.NotNil(t, cm, "the ConfigMap the values file mounts")
	// Without customMetrics, dcgm-exporter's templates/metrics-configmap.yaml
	// writes its own set: these 24 fields, in this order, with its help
	// texts. gpuscope's richer default would double the series a dashboard
	// budget was sized for.
	var names []string
	for _, l := range strings.Split(cm.Data["metrics"], "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			name, _, _ := strings.Cut(l, ",")
			names = append(names, strings.TrimSpace(name))
		}
	}
	assert.Equal(t, []string{
		"DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_GPU_TEMP",
		"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
		"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL",
		"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
		"DCGM_FI_DEV_VGPU_LICENSE_STATUS", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
		"DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
		"DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES",
	}, names)
	assert.Contains(t, cm.Data["metrics"], "DCGM_FI_DEV_VGPU_LICENSE_STATUS, gauge, vGPU License status")

	// kubeletPath: the pod-resources directory.
	pr := volume(ds, "pod-resources")
	require.NotNil(t, pr)
	assert.Equal(t, "/var/lib/kubelet/pod-resources", pr.HostPath.Path)
	assert.NotNil(t, mount(c, "pod-resources"))
	assert.Contains(t, c.Args, "--kubernetes")

	// serviceMonitor.enabled: true, honorLabels: false.
	require.NotNil(t, r.serviceMonitor, "ServiceMonitor present")
	require.Len(t, r.serviceMonitor.Spec.Endpoints, 1)
	assert.False(t, r.serviceMonitor.Spec.Endpoints[0].HonorLabels)
	assert.Equal(t, "15s", string(r.serviceMonitor.Spec.Endpoints[0].Interval))

	// service: enable, port 9400, internalTrafficPolicy Cluster.
	require.Len(t, r.services, 1)
	assert.Equal(t, int32(9400), r.services[0].Spec.Ports[0].Port)
	require.NotNil(t, r.services[0].Spec.InternalTrafficPolicy)
	assert.Equal(t, corev1.ServiceInternalTrafficPolicyCluster, *r.services[0].Spec.InternalTrafficPolicy)
	assert.Contains(t, c.Args, "--address=:9400", "service.address")
	assert.Equal(t, int32(9400), c.Ports[0].ContainerPort)

	// Pod scheduling and security.
	assert.Equal(t, "system-node-critical", pod.PriorityClassName)
	assert.Empty(t, pod.NodeSelector)
	require.Len(t, pod.Tolerations, 1)
	assert.Equal(t, "node-role.kubernetes.io/control-plane", pod.Tolerations[0].Key)
	sc := c.SecurityContext
	require.NotNil(t, sc)
	assert.Equal(t, int64(0), *sc.RunAsUser)
	assert.False(t, *sc.RunAsNonRoot)
	assert.Equal(t, []corev1.Capability{"SYS_ADMIN"}, sc.Capabilities.Add)
	assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
	assert.False(t, pod.HostNetwork)
	assert.False(t, pod.HostPID)

	// rollingUpdate: maxUnavailable 1, maxSurge 0.
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	require.NotNil(t, ru)
	assert.Equal(t, intstr.FromInt32(1), *ru.MaxUnavailable)
	assert.Equal(t, intstr.FromInt32(0), *ru.MaxSurge)

	// livenessProbe and readinessProbe timing.
	assert.Equal(t, int32(45), c.LivenessProbe.InitialDelaySeconds)
	assert.Equal(t, int32(5), c.LivenessProbe.PeriodSeconds)
	assert.Equal(t, int32(45), c.ReadinessProbe.InitialDelaySeconds)

	// NODE_NAME names the node in the Hostname label, as in dcgm-exporter.
	var nodeName bool
	for _, e := range c.Env {
		if e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName" {
			nodeName = true
		}
	}
	assert.True(t, nodeName)
	// Off in the file: no pod labels, no DRA, no web config.
	assert.Empty(t, r.clusterRoles)
	_, dra := envValue(c, "KUBERNETES_ENABLE_DRA")
	assert.False(t, dra)
	assert.Nil(t, volume(ds, "web-config"))
}

// TestDCGMExporterValueAliases sets dcgm-exporter's keys one by one.
func TestDCGMExporterValueAliases(t *testing.T) {
	tests := []struct {
		name  string
		sets  []string
		check func(t *testing.T, r rendered)
	}{
		{"namespaceOverride", []string{"namespaceOverride=gpu-monitoring", "serviceMonitor.enabled=true"}, func(t *testing.T, r rendered) {
			assert.Equal(t, "gpu-monitoring", r.daemonSet.Namespace)
			assert.Equal(t, "gpu-monitoring", r.services[0].Namespace)
			assert.Equal(t, "gpu-monitoring", r.configMaps["gpuscope-counters"].Namespace)
			assert.Equal(t, []string{"gpu-monitoring"}, r.serviceMonitor.Spec.NamespaceSelector.MatchNames)
		}},
		{"service.enable=false", []string{"service.enable=false", "serviceMonitor.enabled=false"}, func(t *testing.T, r rendered) {
			assert.Empty(t, r.services)
		}},
		{"hostNetwork", []string{"hostNetwork=true"}, func(t *testing.T, r rendered) {
			assert.True(t, r.daemonSet.Spec.Template.Spec.HostNetwork)
			assert.Equal(t, corev1.DNSClusterFirstWithHostNet, r.daemonSet.Spec.Template.Spec.DNSPolicy)
		}},
		{"hostPID", []string{"hostPID=true"}, func(t *testing.T, r rendered) {
			assert.True(t, r.daemonSet.Spec.Template.Spec.HostPID)
		}},
		{"kubeletPath", []string{"kubeletPath=/data/kubelet/pod-resources"}, func(t *testing.T, r rendered) {
			assert.Equal(t, "/data/kubelet/pod-resources", volume(r.daemonSet, "pod-resources").HostPath.Path)
			assert.Contains(t, container(t, r.daemonSet, "gpuscope").Args, "--kubernetes-pod-resources-socket=/data/kubelet/pod-resources/kubelet.sock")
		}},
		{"enablePodLabels copies every label", []string{"kubernetes.enablePodLabels=true"}, func(t *testing.T, r rendered) {
			assert.Contains(t, container(t, r.daemonSet, "gpuscope").Args, "--kubernetes-pod-labels=.*")
			assert.Len(t, r.clusterRoles, 1, "RBAC to read pods (kubernetes.rbac.create defaults to true)")
			assert.True(t, *r.daemonSet.Spec.Template.Spec.AutomountServiceAccountToken)
		}},
		{"enablePodLabels with the allowlist", []string{"kubernetes.enablePodLabels=true", "kubernetes.podLabelAllowlistRegex={^team$,app}"}, func(t *testing.T, r rendered) {
			assert.Contains(t, container(t, r.daemonSet, "gpuscope").Args, "--kubernetes-pod-labels=.*(?:^team$).*|.*(?:app).*")
		}},
		{"rbac.create=false", []string{"kubernetes.enablePodLabels=true", "kubernetes.rbac.create=false"}, func(t *testing.T, r rendered) {
			assert.Empty(t, r.clusterRoles)
			assert.Empty(t, r.roleBindings)
		}},
		{"enablePodUID", []string{"kubernetes.enablePodUID=true"}, func(t *testing.T, r rendered) {
			assert.Contains(t, container(t, r.daemonSet, "gpuscope").Args, "--kubernetes-pod-uid-label")
		}},
		{"arguments", []string{"arguments={-d,g:0\\,1,-o}"}, func(t *testing.T, r rendered) {
			args := container(t, r.daemonSet, "gpuscope").Args
			assert.Equal(t, []string{"-d", "g:0,1", "-o"}, args[len(args)-3:])
		}},
		{"debugDump", []string{"debugDump.enabled=true", "debugDump.directory=/var/tmp/d", "debugDump.retention=12", "debugDump.compression=false"}, func(t *testing.T, r rendered) {
			args := container(t, r.daemonSet, "gpuscope").Args
			for _, a := range []string{"--dump-enabled", "--dump-directory=/var/tmp/d", "--dump-retention=12", "--dump-compression=false"} {
				assert.Contains(t, args, a)
			}
		}},
		{"kubernetesDRA", []string{"kubernetesDRA.enabled=true"}, func(t *testing.T, r rendered) {
			v, ok := envValue(container(t, r.daemonSet, "gpuscope"), "KUBERNETES_ENABLE_DRA")
			assert.True(t, ok)
			assert.Equal(t, "true", v)
		}},
		{"extraHostVolumes", []string{"extraHostVolumes[0].name=jobs", "extraHostVolumes[0].hostPath=/run/jobs", "extraVolumeMounts[0].name=jobs", "extraVolumeMounts[0].mountPath=/run/jobs"}, func(t *testing.T, r rendered) {
			v := volume(r.daemonSet, "jobs")
			require.NotNil(t, v)
			assert.Equal(t, "/run/jobs", v.HostPath.Path)
			assert.NotNil(t, mount(container(t, r.daemonSet, "gpuscope"), "jobs"))
		}},
		{"podSecurityContext", []string{"podSecurityContext.fsGroup=1000"}, func(t *testing.T, r rendered) {
			require.NotNil(t, r.daemonSet.Spec.Template.Spec.SecurityContext)
			assert.Equal(t, int64(1000), *r.daemonSet.Spec.Template.Spec.SecurityContext.FSGroup)
		}},
		{"customMetrics", []string{"customMetrics=DCGM_FI_DEV_GPU_TEMP\\, gauge\\, t"}, func(t *testing.T, r rendered) {
			assert.Equal(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t", r.configMaps["gpuscope-counters"].Data["counters.csv"])
		}},
		{"tlsServerConfig with generated certificates", []string{"tlsServerConfig.enabled=true", "serviceMonitor.enabled=true"}, func(t *testing.T, r rendered) {
			tls := r.secrets["gpuscope-tls"]
			require.NotNil(t, tls)
			assert.Contains(t, string(tls.Data["tls.crt"]), "BEGIN CERTIFICATE")
			assert.Contains(t, string(tls.Data["tls.key"]), "PRIVATE KEY")
			web := r.secrets["gpuscope-web-config"]
			require.NotNil(t, web)
			cfg := web.StringData["web-config.yml"]
			assert.Contains(t, cfg, `cert_file: "/etc/gpuscope/tls/tls.crt"`)
			assert.Contains(t, cfg, `key_file: "/etc/gpuscope/tls/tls.key"`)
			c := container(t, r.daemonSet, "gpuscope")
			assert.Contains(t, c.Args, "--web-config-file=/etc/gpuscope/web/web-config.yml")
			assert.Equal(t, "/etc/gpuscope/tls", mount(c, "tls").MountPath)
			assert.Equal(t, "gpuscope-tls", volume(r.daemonSet, "tls").Secret.SecretName)
			require.NotNil(t, r.serviceMonitor.Spec.Endpoints[0].Scheme)
			assert.Equal(t, "https", string(*r.serviceMonitor.Spec.Endpoints[0].Scheme))
		}},
		{"basicAuth hashes the passwords", []string{"basicAuth.users.prom=s3cret", "serviceMonitor.enabled=true"}, func(t *testing.T, r rendered) {
			cfg := r.secrets["gpuscope-web-config"].StringData["web-config.yml"]
			assert.Contains(t, cfg, "basic_auth_users:")
			assert.Contains(t, cfg, `prom: "$2`, "a bcrypt hash")
			assert.NotContains(t, cfg, "s3cret")
			assert.Nil(t, r.serviceMonitor.Spec.Endpoints[0].Scheme, "basic auth alone keeps plain HTTP")
			assert.NotNil(t, container(t, r.daemonSet, "gpuscope").LivenessProbe.TCPSocket, "probes cannot authenticate")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, render(t, tt.sets...))
		})
	}
}

// TestDCGMExporterValuesRefused: keys without a meaning here stop the
// render with a message naming the replacement.
func TestDCGMExporterValuesRefused(t *testing.T) {
	tests := []struct {
		sets []string
		want string
	}{
		{[]string{"serviceMonitor.apiVersion=monitoring.coreos.com/v2"}, "monitoring.coreos.com/v1"},
		{[]string{"kubernetes.enablePodLabels=true", "kubernetes.podLabels.allowlist=team"}, "give one"},
		{[]string{"webConfig.config=x: 1", "basicAuth.users.a=b"}, "give one"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.sets, " "), func(t *testing.T) {
			args := []string{"template", "gpuscope", chartDir}
			for _, s := range tt.sets {
				args = append(args, "--set", s)
			}
			_, err := helm(t, args...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestDocsHelmExamplesRender renders every `helm install ... deploy/helm/gpuscope`
// command of the docs and the README, so a documented value the schema
// refuses fails here.
func TestDocsHelmExamplesRender(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	require.NoError(t, err)
	files = append(files, filepath.Join(repoRoot, "README.md"))
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for i, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if !strings.HasPrefix(line, "helm install gpuscope deploy/helm/gpuscope") {
				continue
			}
			n++
			fields := strings.Fields(line)
			args := []string{"template", "gpuscope", chartDir}
			for j := 4; j < len(fields); j++ {
				switch fields[j] {
				case "--set", "-f", "--values":
					require.Less(t, j+1, len(fields), "%s:%d", f, i+1)
					args = append(args, fields[j], fields[j+1])
					j++
				case "--namespace", "-n":
					args = append(args, fields[j], fields[j+1])
					j++
				}
			}
			t.Run(filepath.Base(f)+":"+strings.TrimPrefix(strings.Join(fields[4:], " "), " "), func(t *testing.T) {
				out, err := helm(t, args...)
				require.NoError(t, err, "%s:%d: %s", f, i+1, line)
				r := decode(t, out)
				c := container(t, r.daemonSet, "gpuscope")
				for _, a := range args {
					switch a {
					case "dcgm.mode=node":
						assert.Contains(t, c.Args, "--dcgm-remote-hostengine=$(HOST_IP):5555")
					case "dcgm.mode=sidecar":
						assert.Len(t, r.daemonSet.Spec.Template.Spec.Containers, 2)
						assert.Contains(t, c.Args, "--dcgm-remote-hostengine=127.0.0.1:5555")
					case "dcgm.mode=embedded":
						assert.Contains(t, c.Args, "--dcgm-mode=embedded")
					}
				}
			})
		}
	}
	assert.GreaterOrEqual(t, n, 4, "the docs' helm examples were found")
}
