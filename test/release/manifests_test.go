package release

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

// object is the part of a Kubernetes object the tests read.
type object struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
}

// objects decodes every document of a manifests file, by kind/name.
func objects(t *testing.T, path string) map[string]object {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	out := map[string]object{}
	dec := yaml.NewDecoder(f)
	for {
		var o object
		if err := dec.Decode(&o); err != nil {
			require.ErrorContains(t, err, "EOF", "%s is not YAML", path)
			break
		}
		if o.Kind != "" {
			out[o.Kind+"/"+o.Metadata.Name] = o
		}
	}
	return out
}

// repoFiles returns the files matching glob under the repository root, by
// base name, with their contents.
func repoFiles(t *testing.T, glob string) map[string]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(e2etest.RepoRoot(), glob))
	require.NoError(t, err)
	require.NotEmpty(t, paths, glob)
	out := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		out[filepath.Base(p)] = string(b)
	}
	return out
}

// The plain manifests, which are not kept in git, ship with the release:
// the chart's defaults in namespace gpuscope, no object that needs the
// Prometheus Operator, and the rules and dashboards of their one home in
// the repository, byte for byte, reached through the chart's links.
func TestReleaseShipsThePlainManifests(t *testing.T) {
	dist, version := makeRelease(t)
	objs := objects(t, filepath.Join(dist, "gpuscope-"+version+"-kubernetes.yaml"))
	ds, ok := objs["DaemonSet/gpuscope"]
	require.True(t, ok, "the manifests have the DaemonSet gpuscope; they have %v", keys(objs))
	assert.Equal(t, "gpuscope", ds.Metadata.Namespace)
	for k := range objs {
		assert.False(t, strings.HasPrefix(k, "ServiceMonitor/") || strings.HasPrefix(k, "PrometheusRule/"),
			"%s needs the Prometheus Operator's CRDs, which plain manifests cannot assume", k)
	}
	rules, ok := objs["ConfigMap/gpuscope-rules"]
	require.True(t, ok, "the rules ConfigMap is in the manifests")
	assert.Equal(t, trimmed(repoFiles(t, "deploy/prometheus/*.yml")), trimmed(rules.Data), "the rules are deploy/prometheus's")
	dash, ok := objs["ConfigMap/gpuscope-dashboards"]
	require.True(t, ok, "the dashboards ConfigMap is in the manifests")
	assert.Equal(t, trimmed(repoFiles(t, "grafana/dashboards/*.json")), trimmed(dash.Data), "the dashboards are grafana/dashboards'")
}

// The dashboards' ConfigMap for Grafana's sidecar ships with the release,
// generated from grafana/dashboards' builders: every dashboard, the
// sidecar's label.
func TestReleaseShipsTheDashboardsConfigMap(t *testing.T) {
	dist, version := makeRelease(t)
	objs := objects(t, filepath.Join(dist, "gpuscope-"+version+"-dashboards-configmap.yaml"))
	cm, ok := objs["ConfigMap/gpuscope-dashboards"]
	require.True(t, ok, "the file holds the ConfigMap gpuscope-dashboards; it has %v", keys(objs))
	assert.Equal(t, "1", cm.Metadata.Labels["grafana_dashboard"], "the sidecar's label")
	assert.Equal(t, repoFiles(t, "grafana/dashboards/*.json"), cm.Data)
}

// trimmed drops each value's trailing newlines: a `|-` block scalar, as the
// chart's templates write, keeps none.
func trimmed(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = strings.TrimRight(v, "\n")
	}
	return out
}

func keys(m map[string]object) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
