package scenarios

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// TestAlertingRulesKeepWhatAlertsRead: the scenarios' minute-by-minute
// test evaluates the alerts with every recording rule they read, through
// other recording rules and across files, and no recording rule that only
// a dashboard reads.
func TestAlertingRulesKeepWhatAlertsRead(t *testing.T) {
	dir := t.TempDir()
	recording := filepath.Join(dir, "recording.yml")
	alerts := filepath.Join(dir, "alerts.yml")
	require.NoError(t, os.WriteFile(recording, []byte(`groups:
- name: base
  interval: 30s
  rules:
  - record: gpu:busy:bool
    expr: DCGM_FI_DEV_GPU_UTIL > 0
  - record: gpu:idle:bool
    expr: gpu:busy:bool == 0
  - record: gpu:idle:bool
    expr: gpu:busy_other:bool == 0
  - record: gpu:busy_other:bool
    expr: DCGM_FI_PROF_SM_ACTIVE > 0
- name: dashboards
  rules:
  - record: cluster:energy:sum
    expr: sum(gpu:idle:bool * DCGM_FI_DEV_POWER_USAGE)
  - record: cluster:energy:sum1h
    expr: sum_over_time(cluster:energy:sum[1h])
`), 0o600))
	require.NoError(t, os.WriteFile(alerts, []byte(`groups:
- name: alerts
  rules:
  - alert: GPUIdle
    expr: gpu:idle:bool == 1
    for: 30m
    labels:
      severity: warning
`), 0o600))

	out := alertingRules(t, []string{recording, alerts}, t.TempDir())

	require.Len(t, out, 2)
	kept := func(path string) []map[string]any {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		var doc ruleGroups
		require.NoError(t, yaml.Unmarshal(b, &doc))
		return doc.Groups
	}
	groups := kept(out[0])
	require.Len(t, groups, 1, "the dashboards group records nothing an alert reads")
	assert.Equal(t, "base", groups[0]["name"])
	assert.Equal(t, "30s", groups[0]["interval"], "a group keeps its own interval")
	var names []string
	for _, r := range groups[0]["rules"].([]any) {
		names = append(names, r.(map[string]any)["record"].(string))
	}
	assert.Equal(t, []string{"gpu:busy:bool", "gpu:idle:bool", "gpu:idle:bool", "gpu:busy_other:bool"}, names,
		"both rules of a name the alert reads, and what each of them reads, in their order")
	alertGroups := kept(out[1])
	require.Len(t, alertGroups, 1)
	rule := alertGroups[0]["rules"].([]any)[0].(map[string]any)
	assert.Equal(t, map[string]any{"alert": "GPUIdle", "expr": "gpu:idle:bool == 1", "for": "30m",
		"labels": map[string]any{"severity": "warning"}}, rule, "an alert is kept as it is")
}
