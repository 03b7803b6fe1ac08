package verify

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/gpuscope/gpuscope/grafana/dash"
)

const runbookURL = "https://github.com/gpuscope/gpuscope/blob/main/docs/runbooks.md#"

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

type alertTests struct {
	Tests []struct {
		InputSeries   []any `yaml:"input_series"`
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, into), "parsing %s", path)
}

// anchors are GitHub's anchors of the level-2 headings of a markdown file.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	out := map[string]bool{}
	strip := regexp.MustCompile(`[^a-z0-9 -]`)
	for _, line := range strings.Split(string(b), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			a := strip.ReplaceAllString(strings.ToLower(strings.TrimSpace(h)), "")
			out[strings.ReplaceAll(a, " ", "-")] = true
		}
	}
	return out
}

func alerts(t *testing.T) map[string]map[string]string {
	t.Helper()
	var rf ruleFile
	readYAML(t, filepath.Join(repoRoot, "deploy/prometheus/gpuscope-alerts.yml"), &rf)
	out := map[string]map[string]string{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "group %s holds a rule that is not an alert", g.Name)
			m := map[string]string{"severity": r.Labels["severity"]}
			for k, v := range r.Annotations {
				m[k] = v
			}
			out[r.Alert] = m
		}
	}
	require.NotEmpty(t, out)
	return out
}

func TestEveryAlertIsDocumented(t *testing.T) {
	sections := anchors(t, filepath.Join(repoRoot, "docs/runbooks.md"))
	for name, a := range alerts(t) {
		assert.Contains(t, []string{"critical", "warning", "info"}, a["severity"], "%s: severity", name)
		assert.NotEmpty(t, a["summary"], "%s: summary", name)
		assert.NotEmpty(t, a["description"], "%s: description", name)
		anchor, ok := strings.CutPrefix(a["runbook"], runbookURL)
		if assert.True(t, ok, "%s: runbook %q does not point into docs/runbooks.md", name, a["runbook"]) {
			assert.Equal(t, strings.ToLower(name), anchor, "%s: runbook anchor", name)
			assert.True(t, sections[anchor], "%s: docs/runbooks.md has no section %q", name, anchor)
		}
		// GPU alerts name the host in either spelling of its label, the GPU
		// and its model, and the pod when there is one.
		// gpuscope_field_supported carries only field, gpu, UUID and reason
		// (docs/metrics.md), so that alert cannot name more; the series
		// GPUMemoryHeldByNoWorkload fires on carry no pod by definition, and
		// GPUOutOfMemoryLoop counts per GPU because a restarted pod may come
		// back under another name; GPUIdleWithMemoryHeld fires only on nodes
		// that label no workload.
		if strings.Contains(a["description"], "$labels.gpu") && name != "GPUFieldUnsupported" {
			for _, l := range []string{"$labels.Hostname", "$labels.hostname", "$labels.modelName"} {
				assert.Contains(t, a["description"], l, "%s: description", name)
			}
			if !strings.Contains(a["summary"]+a["description"], "$labels.pod") && name != "GPUMemoryHeldByNoWorkload" && name != "GPUOutOfMemoryLoop" && name != "GPUIdleWithMemoryHeld" {
				t.Errorf("%s: description does not name the pod", name)
			}
		}
	}
}

// Every alert has promtool cases, in any of the rule test files, in which
// it fires and in which it stays quiet: an evaluation expecting nothing, or
// input series (just below the threshold) that must not make it fire.
func TestEveryAlertIsUnitTested(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot, "deploy/prometheus/tests/*.yml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, f := range files {
		var at alertTests
		readYAML(t, f, &at)
		for _, tc := range at.Tests {
			for _, c := range tc.AlertRuleTest {
				if len(c.ExpAlerts) > 0 {
					fires[c.Alertname] = true
				}
				if len(c.ExpAlerts) < len(tc.InputSeries) {
					quiet[c.Alertname] = true
				}
			}
		}
	}
	for name := range alerts(t) {
		assert.True(t, fires[name], "%s: no promtool case where it fires", name)
		assert.True(t, quiet[name], "%s: no promtool case where it stays quiet", name)
	}
}

// recorded returns the names the recording rules record.
func recorded(t *testing.T) map[string]bool {
	t.Helper()
	var rf ruleFile
	readYAML(t, filepath.Join(repoRoot, "deploy/prometheus/gpuscope-recording.yml"), &rf)
	out := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Record, "group %s holds a rule that is not a recording rule", g.Name)
			out[r.Record] = true
		}
	}
	return out
}

// selectorName finds the metric name of every selector of an expression:
// all dashboard queries write their selectors as name{...}.
var selectorName = regexp.MustCompile(`([A-Za-z_:][A-Za-z0-9_:]*)\{`)

// The cluster dashboard must cost O(nodes), not O(GPUs): every selector of
// every panel and variable reads a recording rule, never a GPU series.
func TestClusterDashboardReadsOnlyRecordingRules(t *testing.T) {
	rules := recorded(t)
	files, err := dash.Files()
	require.NoError(t, err)
	qs, vs, err := dash.Extract(files["gpuscope-cluster.json"])
	require.NoError(t, err)
	exprs := map[string]string{}
	for _, q := range qs {
		exprs[q.Panel+" "+q.RefID] = q.Expr
	}
	for _, v := range vs {
		exprs["variable "+v.Name] = v.Query
	}
	for where, expr := range exprs {
		names := selectorName.FindAllStringSubmatch(expr, -1)
		if strings.HasPrefix(where, "variable ") {
			// label_values(selector, label): the selector may be bare.
			inner := strings.TrimSuffix(strings.TrimPrefix(expr, "label_values("), ")")
			sel := strings.TrimSpace(inner[:strings.LastIndex(inner, ",")])
			if j := strings.IndexByte(sel, '{'); j >= 0 {
				sel = sel[:j]
			}
			names = append(names, []string{"", sel})
		}
		require.NotEmpty(t, names, "%s: no selector found in %s", where, expr)
		for _, m := range names {
			name := m[1]
			if name == "label_values" {
				continue
			}
			assert.True(t, rules[name], "%s reads %s, which no recording rule records: %s", where, name, expr)
		}
	}
}

// rangeOffset matches a range selector and the offset after it.
var rangeOffset = regexp.MustCompile(`\[((?:[0-9]+(?:ms|[smhdwy]))+)\](?:\s+offset\s+((?:[0-9]+(?:ms|[smhdwy]))+))?`)

// The gpuscope.accounting group accounts for one minute per evaluation: each
// sample must cover exactly the time since the one before, or minutes are
// counted twice or lost. So every range of the group spans its interval and
// ends a millisecond before the evaluation, every look back for the value
// before the minute starts where that minute starts, and every sum over
// the group's own per-minute series spans the hour less half an interval
// (sixty samples on Prometheus 2, which keeps both ends of a range, as on 3).
func TestUsageGroupWindowsMatchItsInterval(t *testing.T) {
	var rf struct {
		Groups []struct {
			Name     string `yaml:"name"`
			Interval string `yaml:"interval"`
			Rules    []struct {
				Record string `yaml:"record"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, filepath.Join(repoRoot, "deploy/prometheus/gpuscope-recording.yml"), &rf)
	ms := time.Millisecond
	for _, g := range rf.Groups {
		if g.Name != "gpuscope.accounting" {
			continue
		}
		interval, err := time.ParseDuration(g.Interval)
		require.NoError(t, err, "gpuscope.accounting: interval %q", g.Interval)
		ok := map[string]bool{
			fmt.Sprint(interval, " ", ms):                        true, // the minute: [1m] offset 1ms
			fmt.Sprint(time.Hour, " ", interval+ms):              true, // the value before it: [1h] offset 1m1ms
			fmt.Sprint(time.Hour-interval/2, " ", 0*time.Second): true, // the hour of the group's own minutes
		}
		var ranges int
		for _, r := range g.Rules {
			for _, m := range rangeOffset.FindAllStringSubmatch(r.Expr, -1) {
				rng, err := time.ParseDuration(m[1])
				require.NoError(t, err, "%s: range %q", r.Record, m[1])
				var off time.Duration
				if m[2] != "" {
					off, err = time.ParseDuration(m[2])
					require.NoError(t, err, "%s: offset %q", r.Record, m[2])
				}
				assert.True(t, ok[fmt.Sprint(rng, " ", off)], "%s: [%s] offset %q does not tile the group's %s minutes", r.Record, m[1], m[2], g.Interval)
				ranges++
			}
			assert.Equal(t, strings.Count(r.Expr, "offset"), len(rangeOffset.FindAllStringSubmatch(r.Expr, -1))-strings.Count(r.Expr, "[59m30s]"),
				"%s: an offset outside a range", r.Record)
		}
		assert.NotZero(t, ranges)
		return
	}
	t.Fatal("gpuscope-recording.yml has no group gpuscope.accounting")
}
