package scenarios

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// healthEvery is how often the health test evaluates every shipped rule:
// sparser than the rules' own minute, since it asks only that each rule
// evaluates without an error on the scenario's series, as every pass of a
// live Prometheus must.
const healthEvery = 10 * time.Minute

// writeTest renders the recordings of a scenario's nodes, of as many steps
// each, as promtool unit tests, and returns their paths:
//   - of the alerting rules (alertRuleFiles), evaluated every eval: the
//     alerts that fired over the whole run are exactly want, and, when where
//     is set, the expected alert fired only where it names;
//   - of every rule of ruleFiles, evaluated every healthEvery: promtool fails
//     a test where a rule's evaluation fails, as a recording rule that
//     matches many-to-many on the scenario's series would.
func writeTest(t *testing.T, dir, scenario string, recs []*recording, step, eval time.Duration, alertRuleFiles, ruleFiles []string, want string, where [2]string) []string {
	t.Helper()
	span := time.Duration(recs[0].steps-1) * step
	input := inputSeriesOf(recs)
	g := testGroup{Name: scenario, Interval: promDuration(step), InputSeries: input}
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
	health := testGroup{Name: scenario + " health", Interval: promDuration(step), InputSeries: input,
		PromQLExprTst: []exprTest{{Expr: "vector(1)", EvalTime: end, ExpSamples: []expSample{{Labels: "{}", Value: 1}}}}}
	return []string{
		writeUnitTest(t, filepath.Join(dir, scenario+"_test.yml"), unitTest{RuleFiles: alertRuleFiles, EvaluationInterval: promDuration(eval), Tests: []testGroup{g}}),
		writeUnitTest(t, filepath.Join(dir, scenario+"_health_test.yml"), unitTest{RuleFiles: ruleFiles, EvaluationInterval: promDuration(healthEvery), Tests: []testGroup{health}}),
	}
}

// inputSeriesOf is the recordings' series in promtool's notation, in a
// stable order.
func inputSeriesOf(recs []*recording) []inputSeries {
	var input []inputSeries
	for _, rec := range recs {
		for _, k := range slices.Sorted(maps.Keys(rec.series)) {
			input = append(input, inputSeries{Series: rec.promSeries(k), Values: values(rec.series[k])})
		}
	}
	return input
}

func writeUnitTest(t *testing.T, path string, ut unitTest) string {
	t.Helper()
	out, err := yaml.Marshal(ut)
	if err != nil {
		t.Fatal(err)
	}
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

// runPromtool runs `promtool test rules` on the files and fails the test
// with promtool's account when it fails.
func runPromtool(t *testing.T, promtool string, paths ...string) {
	t.Helper()
	cmd := exec.Command(promtool, append([]string{"test", "rules"}, paths...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		names := make([]string, len(paths))
		for i, p := range paths {
			names[i] = filepath.Base(p)
		}
		t.Errorf("%s test rules %s: %v\n%s", promtool, strings.Join(names, " "), err, strings.TrimSpace(string(out)))
	}
}
