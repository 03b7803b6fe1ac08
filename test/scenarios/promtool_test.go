package scenarios

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// unitTest is promtool's rule unit-test file, as much of it as the
// scenarios use.
type unitTest struct {
	RuleFiles          []string    `yaml:"rule_files"`
	EvaluationInterval string      `yaml:"evaluation_interval"`
	Tests              []testGroup `yaml:"tests"`
}

type testGroup struct {
	Name          string        `yaml:"name"`
	Interval      string        `yaml:"interval"`
	InputSeries   []inputSeries `yaml:"input_series"`
	PromQLExprTst []exprTest    `yaml:"promql_expr_test"`
}

type inputSeries struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

type exprTest struct {
	Expr       string      `yaml:"expr"`
	EvalTime   string      `yaml:"eval_time"`
	ExpSamples []expSample `yaml:"exp_samples"`
}

type expSample struct {
	Labels string  `yaml:"labels"`
	Value  float64 `yaml:"value"`
}

// firedExpr is every alert name that was firing at some evaluation within
// span before the end: rule evaluations write ALERTS{alertstate="firing"}
// into promtool's storage as they write them into Prometheus's.
func firedExpr(span time.Duration, by string) string {
	return fmt.Sprintf(`group by (%s) (last_over_time(ALERTS{alertstate="firing"}[%s]))`, by, promDuration(span))
}

// writeTest renders the recordings of a scenario's nodes, of as many steps
// each, as a promtool unit test of the rule files: the alerts that fired
// over the whole run are exactly want, and, when where is set, the
// expected alert fired only where it names.
func writeTest(t *testing.T, dir, scenario string, recs []*recording, step, eval time.Duration, ruleFiles []string, want string, where [2]string) string {
	t.Helper()
	span := time.Duration(recs[0].steps-1) * step
	g := testGroup{Name: scenario, Interval: promDuration(step)}
	for _, rec := range recs {
		keys := make([]string, 0, len(rec.series))
		for k := range rec.series {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			g.InputSeries = append(g.InputSeries, inputSeries{Series: rec.promSeries(k), Values: values(rec.series[k])})
		}
	}
	// Over the whole run plus one evaluation, so that an alert that fired
	// at the first evaluation is seen too.
	end := promDuration(span)
	fired := exprTest{Expr: firedExpr(span+eval, "alertname"), EvalTime: end, ExpSamples: []expSample{}}
	if want != "" {
		fired.ExpSamples = append(fired.ExpSamples, expSample{Labels: fmt.Sprintf(`{alertname=%q}`, want), Value: 1})
	}
	g.PromQLExprTst = append(g.PromQLExprTst, fired)
	if want != "" && where[0] != "" {
		g.PromQLExprTst = append(g.PromQLExprTst, exprTest{
			Expr:       fmt.Sprintf(`group by (alertname, %s) (last_over_time(ALERTS{alertstate="firing",alertname=%q}[%s]))`, where[0], want, promDuration(span+eval)),
			EvalTime:   end,
			ExpSamples: []expSample{{Labels: fmt.Sprintf(`{alertname=%q,%s=%q}`, want, where[0], where[1]), Value: 1}},
		})
	}
	ut := unitTest{RuleFiles: ruleFiles, EvaluationInterval: promDuration(eval), Tests: []testGroup{g}}
	out, err := yaml.Marshal(ut)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, scenario+"_test.yml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// promDuration writes d in Prometheus's duration notation.
func promDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}

// runPromtool runs `promtool test rules` on the file and fails the test
// with promtool's account when it fails.
func runPromtool(t *testing.T, promtool, path string) {
	t.Helper()
	cmd := exec.Command(promtool, "test", "rules", path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("%s test rules %s: %v\n%s", promtool, filepath.Base(path), err, strings.TrimSpace(string(out)))
	}
}
