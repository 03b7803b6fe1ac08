package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExpandRules(t *testing.T) {
	rules := map[string]string{
		"node:X:sum":         `sum by (cluster, Hostname) (DCGM_X{pod!=""})`,
		"cluster:X:sum":      `sum by (cluster) (node:X:sum)`,
		"node:fb:sum":        `sum by (cluster, Hostname) (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE)`,
		"node_clock:c:sum":   `sum by (cluster, Hostname, clock_event) (gpuscope_clock_event_active)`,
		"cluster_clock:c:sm": `sum by (cluster, clock_event) (node_clock:c:sum)`,
		"node:cost:sum":      `sum by (cluster, Hostname) (DCGM_X{pod!=""} * on (modelName) group_left model:gpuscope_price_per_gpu_hour:value)`,
	}
	tests := []struct{ in, want string }{
		{`sum(cluster:X:sum{cluster=~"a"})`,
			`sum((sum by (cluster) ((sum by (cluster, Hostname) (DCGM_X{pod!="", cluster=~"a"})))))`},
		{`node:fb:sum{cluster=~"a"}`,
			`(sum by (cluster, Hostname) (DCGM_FI_DEV_FB_USED{cluster=~"a"} + DCGM_FI_DEV_FB_FREE{cluster=~"a"}))`},
		{`sum by (clock_event) (cluster_clock:c:sm{cluster=~"a", clock_event!="gpu_idle"})`,
			`sum by (clock_event) ((sum by (cluster, clock_event) ((sum by (cluster, Hostname, clock_event) (gpuscope_clock_event_active{cluster=~"a", clock_event!="gpu_idle"})))))`},
		{`avg_over_time(node:X:sum[5m:1m])`, `avg_over_time((sum by (cluster, Hostname) (DCGM_X{pod!=""}))[5m:1m])`},
		{`avg_over_time(node:X:sum{cluster=~"a"}[10m])`, `avg_over_time((sum by (cluster, Hostname) (DCGM_X{pod!="", cluster=~"a"}))[10m:15s])`},
		{`DCGM_X{gpu="0"}`, `DCGM_X{gpu="0"}`},
		// The prices are read as they are, without the selector's matchers.
		{`node:cost:sum{cluster=~"a"}`,
			`(sum by (cluster, Hostname) (DCGM_X{pod!="", cluster=~"a"} * on (modelName) group_left model:gpuscope_price_per_gpu_hour:value))`},
	}
	for _, tt := range tests {
		got, err := expandRules(tt.in, rules)
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, got, tt.in)
	}
	_, err := expandRules(`sum(nope:x:sum)`, rules)
	assert.ErrorContains(t, err, "nope:x:sum is not recorded by any rule")
}

// Every query of the shipped cluster dashboard expands against the shipped
// rules.
func TestShippedDashboardExpands(t *testing.T) {
	rules, err := readRules(filepath.Join("..", "..", "deploy", "prometheus", "gpuscope-recording.yml"))
	require.NoError(t, err)
	raw, err := readDashboard(filepath.Join("..", "dashboards", "gpuscope-cluster.json"))
	require.NoError(t, err)
	require.NotEmpty(t, raw)
	for _, q := range raw {
		e := substitute(q.Expr, ".*", 10*time.Minute)
		// Every variable is filled in; $1 is label_replace's.
		assert.NotRegexp(t, `\$[A-Za-z_{]`, e, q.Panel)
		x, err := expandRules(e, rules)
		require.NoError(t, err, q.Panel)
		left := x
		for n := range inputSeries {
			left = strings.ReplaceAll(left, n, "")
		}
		assert.NotRegexp(t, `[a-z]:[A-Za-z]`, left, "%s: a recorded name is left in %s", q.Panel, x)
	}
}

func TestCompare(t *testing.T) {
	a := []series{{labels: `cluster="a",`, values: []float64{1, 2}}}
	tests := []struct {
		name string
		got  []series
		want string
	}{
		{"same", []series{{labels: `cluster="a",`, values: []float64{1, 2}}}, ""},
		{"summed in another order", []series{{labels: `cluster="a",`, values: []float64{1, 2 + 1e-14}}}, ""},
		{"other value", []series{{labels: `cluster="a",`, values: []float64{1, 2.1}}}, "point 1: 2.1, Prometheus 2"},
		{"other labels", []series{{labels: `cluster="b",`, values: []float64{1, 2}}}, `series {cluster="b",}`},
		{"missing series", nil, "0 series, Prometheus 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := compare(a, tt.got)
			if tt.want == "" {
				assert.Empty(t, got)
			} else {
				assert.Contains(t, got, tt.want)
			}
		})
	}
}

func TestOnlyLoopback(t *testing.T) {
	assert.NoError(t, loopback("http://127.0.0.1:9090"))
	assert.Error(t, loopback("http://example.com:9090"))
}

func TestGroupName(t *testing.T) {
	assert.Equal(t, "gpuscope-recording.yml;gpuscope.accounting", groupName("/work/deploy/prometheus/gpuscope-recording.yml;gpuscope.accounting"))
	assert.Equal(t, "x.yml;g", groupName("x.yml;g"))
	assert.Equal(t, "odd", groupName("odd"))
}

// The per-minute accounts of gpuscope.accounting are timed against Prometheus
// and Thanos only: a query reading one of them has no raw-series version,
// and says why; others keep theirs.
func TestNoRawForPerMinuteAccounts(t *testing.T) {
	groups, err := readRuleGroups(filepath.Join("..", "..", "deploy", "prometheus", "gpuscope-recording.yml"))
	require.NoError(t, err)
	assert.Equal(t, "gpuscope.accounting", groups["namespace:gpuscope_energy_joules:increase1m"])
	assert.Contains(t, noRaw(`sum(sum_over_time(cluster:gpuscope_energy_joules:increase1m{cluster=~".*"}[600s]))`, groups), "per-minute accounts")
	assert.Empty(t, noRaw(`sum(cluster:gpuscope_gpus:count{cluster=~".*"})`, groups))
}
