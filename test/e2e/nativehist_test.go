package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

// promCheck is a query and what its answer must be.
type promCheck struct {
	expr  string
	check func([]e2etest.Sample) error
}

// TestNativeHistogramsAggregateInPrometheus: a Prometheus with native
// histograms on scrapes the protobuf exposition and answers the p99 of SM
// activity over every simulated GPU from the native histograms, a ratio in
// [0, 1]; the tensor and DRAM activity histograms are there too, one per
// GPU, and the shipped recording rules of their percentiles per pod, node
// and cluster give ratios. (Their exact values, from hand-made histograms,
// are checked by deploy/prometheus/tests/native-histograms with a promtool
// 3.x; this checks them live, on what the exporter serves.)
//
// It runs on each server of e2etest.PrometheusServers: Debian's 2.42 and the
// current Prometheus 3. The recording rules of gpuscope.distributions need
// 2.47 (docs/kubernetes.md): on 2.42 a share of their evaluations is dropped,
// which the eventual checks below ride over.
func TestNativeHistogramsAggregateInPrometheus(t *testing.T) {
	root := e2etest.RepoRoot()
	csv := filepath.Join(root, "etc", "dcp-metrics.csv")
	base, _ := e2etest.GPUScope(t, "--source", "sim", "--collectors", csv, "--sim-seed", "7", "--sim-workload", "data-parallel", "--sim-pods")
	for _, srv := range e2etest.PrometheusServers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			t.Parallel()
			prom := e2etest.PrometheusOn(t, srv, []string{"native-histograms"}, []string{strings.TrimPrefix(base, "http://")},
				filepath.Join(root, "deploy", "prometheus", "gpuscope-recording.yml"))
			checkNativeHistograms(t, prom)
		})
	}
}

func checkNativeHistograms(t *testing.T, prom string) {

	checks := []promCheck{
		{`histogram_quantile(0.99, sum(rate(DCGM_FI_PROF_SM_ACTIVE_distribution[1m])))`, eachIn(1, 0, 1)},
		{`histogram_quantile(0.5, sum by (gpu) (rate(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE_distribution[1m])))`, eachIn(8, 0, 1)},
		{`histogram_count(sum by (gpu) (DCGM_FI_PROF_DRAM_ACTIVE_distribution))`, eachIn(8, 1, 1e9)},
	}
	for _, field := range []string{"DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE"} {
		for _, q := range []string{"p50_5m", "p99_5m"} {
			checks = append(checks,
				promCheck{"cluster:" + field + ":" + q, eachIn(1, 0, 1)},
				promCheck{"node:" + field + ":" + q, eachIn(1, 0, 1)},
				// Every simulated pod's percentile is a ratio.
				promCheck{"count(namespace_pod:" + field + ":" + q + ") - count(namespace_pod:" + field + ":" + q + " >= 0 <= 1)", eachIn(1, 0, 0)},
			)
		}
	}
	for _, c := range checks {
		t.Run(c.expr, func(t *testing.T) {
			e2etest.Eventually(t, prom, c.expr, 90*time.Second, c.check)
		})
	}
}

// eachIn wants n samples, each a number in [lo, hi].
func eachIn(n int, lo, hi float64) func([]e2etest.Sample) error {
	return func(res []e2etest.Sample) error {
		if len(res) != n {
			return fmt.Errorf("want %d series, got %d: %v", n, len(res), res)
		}
		for _, s := range res {
			if !(s.Value >= lo && s.Value <= hi) {
				return fmt.Errorf("%v: %v is not in [%v, %v]", s.Metric, s.Value, lo, hi)
			}
		}
		return nil
	}
}
