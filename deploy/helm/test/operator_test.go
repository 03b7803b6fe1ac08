package charttest

import (
	"os"
	"path/filepath"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// shippedRuleGroups are the rule groups of deploy/prometheus, in the
// PrometheusRule's types.
func shippedRuleGroups(t *testing.T) []monitoringv1.RuleGroup {
	t.Helper()
	var groups []monitoringv1.RuleGroup
	files, err := filepath.Glob(filepath.Join(repoRoot, "deploy/prometheus/*.yml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var doc monitoringv1.PrometheusRuleSpec
		require.NoError(t, yaml.Unmarshal(b, &doc), f)
		groups = append(groups, doc.Groups...)
	}
	return groups
}

// TestOperatorObjects: the ServiceMonitor, PodMonitor and PrometheusRule
// follow what the cluster serves (auto, the default), or are forced on or
// off; the rules go to a ConfigMap wherever no PrometheusRule takes them.
// helm lists a served API as group/version and group/version/Kind
// (pkg/action's GetVersionSet); `--api-versions monitoring.coreos.com/v1`
// alone stands for every kind of the group.
func TestOperatorObjects(t *testing.T) {
	const gv = "monitoring.coreos.com/v1"
	operator := []string{gv, gv + "/ServiceMonitor", gv + "/PodMonitor", gv + "/PrometheusRule", gv + "/Prometheus"}
	// An agent that brings only the scrape CRDs.
	scrapeOnly := []string{gv, gv + "/ServiceMonitor", gv + "/PodMonitor"}
	tests := []struct {
		name                    string
		apis, sets              []string
		sm, pm, rule, rulesCMap bool
	}{
		{"no Operator", nil, nil, false, false, false, true},
		{"the Operator", operator, nil, true, false, true, false},
		{"helm template --api-versions " + gv, []string{gv}, nil, true, false, true, false},
		{"scrape CRDs only", scrapeOnly, nil, true, false, false, true},
		{"forced without the Operator", nil, []string{"serviceMonitor.enabled=true", "podMonitor.enabled=true", "prometheusRule.enabled=true"}, true, true, true, false},
		{"off with the Operator", operator, []string{"serviceMonitor.enabled=false", "prometheusRule.enabled=false"}, false, false, false, false},
		{"pod monitor on auto", operator, []string{"podMonitor.enabled=auto", "serviceMonitor.enabled=false"}, false, true, true, false},
		{"pod monitor on auto without the Operator", nil, []string{"podMonitor.enabled=auto"}, false, false, false, true},
		{"rules ConfigMap off", nil, []string{"prometheusRule.configMap=false"}, false, false, false, false},
		{"auto without a Service", operator, []string{"service.enabled=false"}, false, false, true, false},
		{"ServiceMonitor forced, rules still in a ConfigMap", nil, []string{"serviceMonitor.enabled=true"}, true, false, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := renderOn(t, tt.apis, tt.sets...)
			assert.Equal(t, tt.sm, r.serviceMonitor != nil, "ServiceMonitor")
			assert.Equal(t, tt.pm, r.podMonitor != nil, "PodMonitor")
			assert.Equal(t, tt.rule, r.prometheusRule != nil, "PrometheusRule")
			assert.Equal(t, tt.rulesCMap, r.configMaps["gpuscope-rules"] != nil, "rules ConfigMap")
			require.NotNil(t, r.daemonSet, "the rest installs whatever the cluster serves")
		})
	}
}

// linkedChart returns a chart of links to the chart's files, in a
// templates folder of its own to which a test may add templates. (The
// chart's files/ holds links that os.CopyFS does not copy.)
func linkedChart(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs(chartDir)
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "gpuscope")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "templates"), 0o755))
	for _, sub := range []string{".", "templates"} {
		entries, err := os.ReadDir(filepath.Join(src, sub))
		require.NoError(t, err)
		for _, e := range entries {
			if sub == "." && e.Name() == "templates" {
				continue
			}
			require.NoError(t, os.Symlink(filepath.Join(src, sub, e.Name()), filepath.Join(dir, sub, e.Name())))
		}
	}
	return dir
}

// renderNotes renders NOTES.txt, which helm install prints and helm
// template leaves out, from a copy of the chart with one more template that
// includes it.
func renderNotes(t *testing.T, args ...string) string {
	t.Helper()
	dir := linkedChart(t)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "templates", "notes-test.yaml"),
		[]byte("kind: Notes\nnotes: |\n{{ include \"gpuscope/templates/NOTES.txt\" . | indent 2 }}\n"), 0o644))
	out, err := helm(t, append([]string{"template", "gpuscope", dir, "--show-only", "templates/notes-test.yaml"}, args...)...)
	require.NoError(t, err)
	var doc struct {
		Notes string `json:"notes"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(out), &doc))
	require.NotEmpty(t, doc.Notes)
	return doc.Notes
}

// TestNotesSayWhereTheRulesAre: NOTES.txt, which helm install prints,
// names what was installed for Prometheus and Grafana, and what to do
// without the Operator.
func TestNotesSayWhereTheRulesAre(t *testing.T) {
	plain := renderNotes(t)
	assert.Contains(t, plain, "no ServiceMonitor")
	assert.Contains(t, plain, "ConfigMap gpuscope-rules")
	assert.Contains(t, plain, "ConfigMap gpuscope-dashboards")
	assert.NotContains(t, plain, "counters.profiling is false")
	op := renderNotes(t, "--api-versions", "monitoring.coreos.com/v1")
	assert.Contains(t, op, "the ServiceMonitor gpuscope")
	assert.Contains(t, op, "PrometheusRule gpuscope")
	assert.NotContains(t, op, "gpuscope-rules")
	assert.NotContains(t, op, "no ServiceMonitor")
	assert.Contains(t, renderNotes(t, "--set", "counters.profiling=false"), "counters.profiling is false")
}
