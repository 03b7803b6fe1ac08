package rulesubset

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

const recording = `groups:
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
  - record: cluster:power:sum
    expr: sum(DCGM_FI_DEV_POWER_USAGE)
  - record: cluster:energy:sum1h
    expr: sum_over_time(cluster:power:sum[1h])
  - record: cluster:alerts:count
    expr: count(ALERTS)
`

const alerts = `groups:
- name: alerts
  rules:
  - alert: GPUIdle
    expr: gpu:idle:bool == 1
    for: 30m
    labels:
      severity: warning
  - alert: GPUHot
    expr: DCGM_FI_DEV_GPU_TEMP > 90
`

// kept lists the rules Write kept, group by group, each as its record or
// alert name.
func kept(t *testing.T, path string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc ruleFile
	require.NoError(t, yaml.Unmarshal(b, &doc))
	out := map[string][]string{}
	for _, g := range doc.Groups {
		name := g["name"].(string)
		out[name] = []string{}
		for _, r := range rules(g) {
			out[name] = append(out[name], field(r, "record")+field(r, "alert"))
		}
	}
	return out
}

func TestWriteKeepsWhatTheAlertsAndExpressionsRead(t *testing.T) {
	idle := []string{"gpu:busy:bool", "gpu:idle:bool", "gpu:idle:bool", "gpu:busy_other:bool"}
	tests := []struct {
		name           string
		alerts, exprs  []string
		wantRecordings map[string][]string
		wantAlerts     map[string][]string
	}{
		{
			name:   "an alert: the recording rules it reads, through others, both rules of a name",
			alerts: []string{"GPUIdle"},
			// The dashboards group records nothing the alert reads: left out.
			wantRecordings: map[string][]string{"base": idle},
			wantAlerts:     map[string][]string{"alerts": {"GPUIdle"}},
		},
		{
			name:           "an alert that reads no recording rule",
			alerts:         []string{"GPUHot"},
			wantRecordings: map[string][]string{},
			wantAlerts:     map[string][]string{"alerts": {"GPUHot"}},
		},
		{
			name:           "an expression: what it reads, and no alert",
			exprs:          []string{`cluster:energy:sum1h > 0`},
			wantRecordings: map[string][]string{"dashboards": {"cluster:power:sum", "cluster:energy:sum1h"}},
			wantAlerts:     map[string][]string{},
		},
		{
			name:           "an expression of ALERTS: every alert",
			exprs:          []string{`group by (alertname) (ALERTS{alertstate="firing"})`},
			wantRecordings: map[string][]string{"base": idle},
			wantAlerts:     map[string][]string{"alerts": {"GPUIdle", "GPUHot"}},
		},
		{
			name:  "a recording rule that reads ALERTS: every alert",
			exprs: []string{`cluster:alerts:count`},
			wantRecordings: map[string][]string{"base": idle,
				"dashboards": {"cluster:alerts:count"}},
			wantAlerts: map[string][]string{"alerts": {"GPUIdle", "GPUHot"}},
		},
	}
	src := t.TempDir()
	files := []string{filepath.Join(src, "recording.yml"), filepath.Join(src, "alerts.yml")}
	require.NoError(t, os.WriteFile(files[0], []byte(recording), 0o600))
	require.NoError(t, os.WriteFile(files[1], []byte(alerts), 0o600))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			out, err := Write(files, tt.alerts, tt.exprs, dir)
			require.NoError(t, err)
			require.Equal(t, []string{filepath.Join(dir, "recording.yml"), filepath.Join(dir, "alerts.yml")}, out)
			assert.Equal(t, tt.wantRecordings, kept(t, out[0]))
			assert.Equal(t, tt.wantAlerts, kept(t, out[1]))
		})
	}
}

func TestWriteKeepsGroupsAndRulesAsTheyAre(t *testing.T) {
	src := t.TempDir()
	files := []string{filepath.Join(src, "recording.yml"), filepath.Join(src, "alerts.yml")}
	require.NoError(t, os.WriteFile(files[0], []byte(recording), 0o600))
	require.NoError(t, os.WriteFile(files[1], []byte(alerts), 0o600))
	out, err := Write(files, []string{"GPUIdle"}, nil, t.TempDir())
	require.NoError(t, err)

	var rec, al ruleFile
	b, err := os.ReadFile(out[0])
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &rec))
	assert.Equal(t, "30s", rec.Groups[0]["interval"], "a group keeps its interval")
	b, err = os.ReadFile(out[1])
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &al))
	assert.Equal(t, map[string]any{"alert": "GPUIdle", "expr": "gpu:idle:bool == 1", "for": "30m",
		"labels": map[string]any{"severity": "warning"}}, rules(al.Groups[0])[0], "a rule is kept whole")
}

func TestWriteErrors(t *testing.T) {
	src := t.TempDir()
	bad := filepath.Join(src, "bad.yml")
	require.NoError(t, os.WriteFile(bad, []byte("groups: [\n"), 0o600))
	a, b := filepath.Join(src, "a", "rules.yml"), filepath.Join(src, "b", "rules.yml")
	for _, p := range []string{a, b} {
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(alerts), 0o600))
	}
	tests := []struct {
		name    string
		files   []string
		wantErr string
	}{
		{"a file that is not YAML names the file", []string{bad}, bad},
		{"a missing file names the file", []string{filepath.Join(src, "none.yml")}, "none.yml"},
		{"two files of one name", []string{a, b}, "share a name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Write(tt.files, nil, nil, t.TempDir())
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}
