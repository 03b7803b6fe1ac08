package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/client/report"
	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

// twinExporter serves, at every scrape, the same two GPUs twice: in
// namespace "legacy" under dcgm-exporter 4.8's names and units, and in
// namespace "new" under DCGM 4.6.1's (go-dcgm v1.4611.0 dcgm_fields.h:
// DCGM_FI_PROF_SM_ACTIVE is DCGM_FI_PROF_SM_UTIL_RATIO, 1002;
// DCGM_FI_PROF_PIPE_TENSOR_ACTIVE is DCGM_FI_PROF_TENSOR_UTIL_RATIO, 1004;
// DCGM_FI_PROF_GR_ENGINE_ACTIVE is DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO,
// 1001; DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, 156, in mJ, and
// DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL, 1611, in J). GPU 0 works, GPU 1 idles.
type twinExporter struct {
	mu      sync.Mutex
	scrapes int
}

func (x *twinExporter) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	x.mu.Lock()
	x.scrapes++
	n := x.scrapes
	x.mu.Unlock()
	var b strings.Builder
	for _, gpu := range []struct {
		id             string
		sm, tensor, gr float64
		watts          float64
	}{{"0", 0.5 + 0.01*float64(n%7), 0.25, 0.6, 300}, {"1", 0.01, 0, 0.01, 60}} {
		mj := gpu.watts * 1000 * float64(n) // a second between scrapes, in mJ
		for _, v := range []struct {
			ns, sm, tensor, gr, energy string
			energyValue                float64
		}{
			{"legacy", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", mj},
			{"new", "DCGM_FI_PROF_SM_UTIL_RATIO", "DCGM_FI_PROF_TENSOR_UTIL_RATIO", "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO", "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL", mj / 1000},
		} {
			l := fmt.Sprintf(`{gpu=%q,UUID="GPU-%s",Hostname="twin",namespace=%q,pod="p"}`, gpu.id, gpu.id, v.ns)
			fmt.Fprintf(&b, "DCGM_FI_DEV_FB_USED%s %d\n", l, 1000+n)
			fmt.Fprintf(&b, "%s%s %g\n%s%s %g\n%s%s %g\n", v.sm, l, gpu.sm, v.tensor, l, gpu.tensor, v.gr, l, gpu.gr)
			fmt.Fprintf(&b, "%s%s %g\n", v.energy, l, v.energyValue)
		}
	}
	_, _ = w.Write([]byte(b.String()))
}

// TestReportAnswersTheSameInEitherVocabulary: the same GPUs, written in
// either vocabulary, give the same report.
func TestReportAnswersTheSameInEitherVocabulary(t *testing.T) {
	x := httptest.NewServer(&twinExporter{})
	t.Cleanup(x.Close)
	prom := e2etest.Prometheus(t, []string{strings.TrimPrefix(x.URL, "http://")})
	e2etest.Eventually(t, prom, `count_over_time(DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL{gpu="0"}[1m])`, time.Minute,
		func(s []e2etest.Sample) error {
			if len(s) != 1 || s[0].Value < 12 {
				return fmt.Errorf("want 12 scrapes, have %v", s)
			}
			return nil
		})
	end := time.Now()
	start := end.Add(-10 * time.Second)
	base, err := report.ParseURL(prom)
	require.NoError(t, err)
	build := func(ns string) report.Summary {
		s, err := report.Build(context.Background(), &report.Client{Base: base},
			report.Options{Selection: report.Selection{Namespace: ns}, Start: start, End: end})
		require.NoError(t, err, ns)
		s.Selection, s.Sel = report.Selection{}, report.Summary{}.Sel
		return *s
	}
	legacy, fresh := build("legacy"), build("new")
	assert.Equal(t, legacy, fresh)
	require.NotNil(t, legacy.SM, "SM activity read")
	require.NotNil(t, legacy.EnergyJoules, "energy read")
	assert.Greater(t, *legacy.EnergyJoules, 0.0)
	assert.Equal(t, 2, legacy.GPUs)
	assert.Equal(t, 1, legacy.Idle, "GPU 1 idles in either vocabulary")
}
