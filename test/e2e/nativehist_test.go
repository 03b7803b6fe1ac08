package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

// TestNativeHistogramsAggregateInPrometheus: a Prometheus with native
// histograms on scrapes the protobuf exposition and answers the p99 of SM
// activity over every simulated GPU from the native histograms, a ratio in
// [0, 1]; the tensor and DRAM activity histograms are there too, one per GPU.
func TestNativeHistogramsAggregateInPrometheus(t *testing.T) {
	csv := filepath.Join(e2etest.RepoRoot(), "etc", "dcp-metrics.csv")
	base, _ := e2etest.GPUScope(t, "--source", "sim", "--collectors", csv, "--sim-seed", "7", "--sim-workload", "data-parallel")
	prom := e2etest.PrometheusWithFeatures(t, []string{"native-histograms"}, []string{strings.TrimPrefix(base, "http://")})

	tests := []struct {
		expr  string
		check func([]e2etest.Sample) error
	}{
		{`histogram_quantile(0.99, sum(rate(DCGM_FI_PROF_SM_ACTIVE_distribution[1m])))`, oneIn(0, 1)},
		{`histogram_quantile(0.5, sum by (gpu) (rate(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE_distribution[1m])))`, eachIn(8, 0, 1)},
		{`histogram_count(sum by (gpu) (DCGM_FI_PROF_DRAM_ACTIVE_distribution))`, eachIn(8, 1, 1e9)},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			e2etest.Eventually(t, prom, tt.expr, 90*time.Second, tt.check)
		})
	}
}

func oneIn(lo, hi float64) func([]e2etest.Sample) error {
	return eachIn(1, lo, hi)
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
