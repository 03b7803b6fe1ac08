package integration

import (
	"bytes"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"

	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/internal/testkit/apiservertest"
	"github.com/gpuscope/gpuscope/source/sim"
)

// TestPodLabelNamedLikeAGpuscopeLabel: a pod owner labels the pod bound=yes,
// stat=x, clock_event=y and peer_gpu=z, the labels gpuscope's insight,
// window, clock-event and P2P families write, and the allowlist copies them. With insight
// on, the exposition must still parse (a label written twice makes
// Prometheus drop the whole target) and keep gpuscope's values.
func TestPodLabelNamedLikeAGpuscopeLabel(t *testing.T) {
	api := apiservertest.Start(t)
	api.Set(apiservertest.Pod{Namespace: "ml", Name: "train-0", Node: "node-1",
		Labels: map[string]string{"team": "vision", "bound": "yes", "stat": "x", "clock_event": "y", "peer_gpu": "z"}})
	set := parseCSV(t, "DCGM_FI_DEV_GPU_TEMP, gauge, t, 100ms, min max\nDCGM_FI_DEV_CLOCKS_EVENT_REASONS, gauge, c, 100ms\n"+
		"DCGM_EXP_P2P_STATUS, gauge, p\n")
	e := startLabelledPodNode(t, api, `team|bound|stat|clock_event|peer_gpu`,
		engine.Options{Counters: set, Insight: engine.InsightOptions{Enabled: true, Window: 2 * time.Second}}, sim.ComputeBound, sim.ComputeBound)

	var lastErr error
	ok := assert.Eventually(t, func() bool {
		out := e.Render(nil)
		p := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := p.TextToMetricFamilies(bytes.NewReader(out))
		if lastErr = err; err != nil {
			return false
		}
		bound := mfs["gpuscope_gpu_bound_ratio"]
		if bound == nil || len(bound.Metric) == 0 || labelOf(bound.Metric[0], "team") != "vision" {
			return false
		}
		for _, m := range bound.Metric {
			assert.NotEqual(t, "yes", labelOf(m, "bound"))
		}
		for _, m := range mfs["DCGM_FI_DEV_GPU_TEMP_window"].GetMetric() {
			assert.NotEqual(t, "x", labelOf(m, "stat"))
		}
		p2p := mfs["DCGM_EXP_P2P_STATUS"].GetMetric()
		if len(p2p) == 0 {
			return false
		}
		for _, m := range p2p {
			assert.NotEqual(t, "z", labelOf(m, "peer_gpu"))
		}
		return true
	}, 60*time.Second, 100*time.Millisecond, "insight series with the pod's labels, and an exposition that parses")
	if !ok && lastErr != nil {
		t.Logf("last parse error: %v", lastErr)
	}
}
