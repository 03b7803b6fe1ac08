package charttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// priceGroup finds the group the chart renders from
// prometheusRule.pricePerGPUHour, or nil.
func priceGroup(groups []monitoringv1.RuleGroup) *monitoringv1.RuleGroup {
	for i := range groups {
		if groups[i].Name == "gpuscope.prices" {
			return &groups[i]
		}
	}
	return nil
}

// prices maps each price rule's modelName to its expression.
func prices(t *testing.T, g *monitoringv1.RuleGroup) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range g.Rules {
		require.Equal(t, "model:gpuscope_price_per_gpu_hour:value", r.Record)
		out[r.Labels["modelName"]] = r.Expr.String()
	}
	return out
}

// TestPricesRenderIntoRecordingRules: no price rules by default (the cost
// rules then record nothing); with prices, one rule per model in the
// PrometheusRule and in the rules ConfigMap, whether a price comes from a
// values file (a number, a model name with spaces) or from --set (which
// writes 2.5 as a string).
func TestPricesRenderIntoRecordingRules(t *testing.T) {
	t.Run("default: none", func(t *testing.T) {
		r := render(t, "prometheusRule.enabled=true", "prometheusRule.configMap=true")
		require.NotNil(t, r.prometheusRule)
		assert.Nil(t, priceGroup(r.prometheusRule.Spec.Groups))
		assert.Equal(t, shippedRuleGroups(t), r.prometheusRule.Spec.Groups)
		assert.NotContains(t, r.configMaps["gpuscope-rules"].Data, "gpuscope-prices.yml")
	})

	values := filepath.Join(t.TempDir(), "prices.yaml")
	require.NoError(t, os.WriteFile(values, []byte(`prometheusRule:
  pricePerGPUHour:
    "NVIDIA H100 80GB HBM3": 6
    "NVIDIA A100-SXM4-80GB": 1.2
`), 0o644))
	want := map[string]string{
		"NVIDIA H100 80GB HBM3": "vector(6)",
		"NVIDIA A100-SXM4-80GB": "vector(1.2)",
		"L4":                    "vector(0.75)",
	}
	r := renderFile(t, values, "prometheusRule.enabled=true", "prometheusRule.configMap=true", "prometheusRule.pricePerGPUHour.L4=0.75")
	require.NotNil(t, r.prometheusRule)
	g := priceGroup(r.prometheusRule.Spec.Groups)
	require.NotNil(t, g, "no group gpuscope.prices in the PrometheusRule")
	assert.Equal(t, want, prices(t, g))
	assert.Equal(t, shippedRuleGroups(t), r.prometheusRule.Spec.Groups[:len(r.prometheusRule.Spec.Groups)-1], "the shipped groups, then the prices")

	file := r.configMaps["gpuscope-rules"].Data["gpuscope-prices.yml"]
	require.NotEmpty(t, file, "no gpuscope-prices.yml in the rules ConfigMap")
	var doc monitoringv1.PrometheusRuleSpec
	require.NoError(t, yaml.UnmarshalStrict([]byte(file), &doc))
	require.Len(t, doc.Groups, 1)
	assert.Equal(t, want, prices(t, &doc.Groups[0]))

	t.Run("promtool", func(t *testing.T) { promtoolCost(t, file) })
}

// promtoolCost checks the rendered price file with promtool beside the
// shipped recording rules, and runs the cost rules on it: an H100 held for
// a minute costs a sixtieth of its price.
func promtoolCost(t *testing.T, pricesFile string) {
	promtool := os.Getenv("GPUSCOPE_PROMTOOL3")
	if promtool == "" {
		p, err := exec.LookPath("promtool")
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal("promtool not found (Debian package prometheus)")
			}
			t.Skip("promtool not found (Debian package prometheus)")
		}
		promtool = p
	}
	dir := t.TempDir()
	prices := filepath.Join(dir, "gpuscope-prices.yml")
	require.NoError(t, os.WriteFile(prices, []byte(pricesFile+"\n"), 0o644))
	recording, err := filepath.Abs(filepath.Join(repoRoot, "deploy/prometheus/gpuscope-recording.yml"))
	require.NoError(t, err)
	out, err := exec.Command(promtool, "check", "rules", prices, recording).CombinedOutput()
	require.NoError(t, err, "%s", out)

	test := filepath.Join(dir, "cost_test.yml")
	require.NoError(t, os.WriteFile(test, []byte(`rule_files:
- `+prices+`
- `+recording+`
evaluation_interval: 1m
tests:
- interval: 15s
  input_series:
  - series: 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{Hostname="n1",gpu="0",UUID="GPU-a",modelName="NVIDIA H100 80GB HBM3",namespace="ml",pod="train-0"}'
    values: '0.9x40'
  - series: 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{Hostname="n1",gpu="1",UUID="GPU-b",modelName="NVIDIA A100-SXM4-80GB",namespace="ml",pod="train-1"}'
    values: '0x40'
  promql_expr_test:
  - expr: namespace_pod:gpuscope_cost:sum1m
    eval_time: 5m
    exp_samples:
    - labels: 'namespace_pod:gpuscope_cost:sum1m{namespace="ml",pod="train-0"}'
      value: 0.1
    - labels: 'namespace_pod:gpuscope_cost:sum1m{namespace="ml",pod="train-1"}'
      value: 0.02
  - expr: namespace:gpuscope_cost_idle:sum1m
    eval_time: 5m
    exp_samples:
    - labels: 'namespace:gpuscope_cost_idle:sum1m{namespace="ml"}'
      value: 0.02
`), 0o644))
	out, err = exec.Command(promtool, "test", "rules", test).CombinedOutput()
	require.NoError(t, err, "%s", out)
}
