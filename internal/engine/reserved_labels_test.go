package engine

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/sim"
)

// tenantEnricher copies whatever pod labels the test sets, as a pod owner
// would choose them.
type tenantEnricher struct {
	prometheus.Collector
	gen    uint64
	labels []enrich.Label
}

func (p *tenantEnricher) LabelNames() []string                      { return []string{"pod"} }
func (p *tenantEnricher) Values(*source.Entity) []string            { return []string{"train-0"} }
func (p *tenantEnricher) Generation() uint64                        { return p.gen }
func (p *tenantEnricher) MaxExtraLabels() int                       { return 1 }
func (p *tenantEnricher) ExtraLabels(*source.Entity) []enrich.Label { return p.labels }

// TestPodLabelNamedLikeAGpuscopeLabel renders every family gpuscope writes
// (window statistics, XID and clock-event families, dcgm-exporter's count
// and health families, insight), collects every label name the exposition
// carries, and then gives the pod a label of each of those names. The
// exposition must still parse (Prometheus refuses a series with a label
// twice, and drops the whole target), and every family's own label must
// keep gpuscope's value: a pod labelled bound=yes cannot take over
// gpuscope_gpu_bound_ratio{bound="compute"}.
func TestPodLabelNamedLikeAGpuscopeLabel(t *testing.T) {
	clk := newClock()
	cfg := sim.DefaultConfig()
	cfg.GPUs, cfg.EventRate, cfg.Now = 1, 20000, clk.Now
	cfg.Workloads = []sim.Workload{sim.ComputeBound}
	src, err := sim.New(cfg)
	require.NoError(t, err)
	te := &tenantEnricher{Collector: prometheus.NewGauge(prometheus.GaugeOpts{Name: "x", Help: "x"}), gen: 1}
	csv := "DCGM_FI_DEV_GPU_TEMP, gauge, t, 100ms, min max avg p50 p90 p99\n" +
		"DCGM_FI_DEV_XID_ERRORS, gauge, x, 100ms\n" +
		"DCGM_FI_DEV_CLOCKS_EVENT_REASONS, gauge, c, 100ms\n" +
		"DCGM_FI_DRIVER_VERSION, label, d\n" +
		"DCGM_EXP_XID_ERRORS_COUNT, gauge, x\n" +
		"DCGM_EXP_CLOCK_EVENTS_COUNT, gauge, c\n" +
		"DCGM_EXP_GPU_HEALTH_STATUS, gauge, h\n"
	e, err := New(Options{Source: src, Counters: parseSet(t, csv), DefaultInterval: 100 * time.Millisecond,
		Hostname: "node-1", Log: quietLog(), Now: clk.Now, Clock: clk, Insight: InsightOptions{Enabled: true, Window: 2 * time.Second},
		Enrichers: []enrich.Enricher{te}})
	require.NoError(t, err)
	require.NoError(t, e.Open())
	for range 30 {
		clk.Add(100 * time.Millisecond)
		require.NoError(t, e.CollectAll(context.Background()))
	}
	e.ComputeInsight()

	// ours: family -> label name -> the values gpuscope writes.
	ours := map[string]map[string]map[string]bool{}
	var names []string
	seen := map[string]bool{}
	for name, mf := range scrape(t, e) {
		ours[name] = map[string]map[string]bool{}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if ours[name][l.GetName()] == nil {
					ours[name][l.GetName()] = map[string]bool{}
				}
				ours[name][l.GetName()][l.GetValue()] = true
				if !seen[l.GetName()] {
					seen[l.GetName()] = true
					names = append(names, l.GetName())
				}
			}
		}
	}
	sort.Strings(names)
	for _, want := range []string{"bound", "stat", "xid", "clock_event", "window_size_in_ms", "health_watch", "err_code"} {
		require.Contains(t, names, want, "the render covers the family writing %s", want)
	}

	te.labels = nil
	for _, n := range names {
		te.labels = append(te.labels, enrich.Label{Name: n, Value: "tenant"})
	}
	te.labels = append(te.labels, enrich.Label{Name: "team", Value: "vision"})
	te.gen++
	e.refreshEntities()
	clk.Add(100 * time.Millisecond)
	require.NoError(t, e.CollectAll(context.Background()))
	e.ComputeInsight()
	mfs := scrape(t, e) // fails on a label written twice
	for name, mf := range mfs {
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetValue() == "tenant" && ours[name][l.GetName()] != nil {
					assert.Failf(t, "a pod label replaced gpuscope's", "%s{%s=%q}", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
	temp := series(mfs, "DCGM_FI_DEV_GPU_TEMP", nil)
	require.NotEmpty(t, temp)
	assert.Equal(t, "vision", labelOf(temp[0], "team"), "a pod label named like nothing of ours is copied")
	assert.NotEmpty(t, series(mfs, "gpuscope_gpu_bound_ratio", map[string]string{"bound": "compute"}))
}

// ownLabelSets are label names written only by families that write their
// own label set from scratch (gpuscope_field_supported,
// gpuscope_insight_supported), never after an entity's labels: a pod label
// cannot meet them.
var ownLabelSets = map[string]bool{"field": true, "gpu": true, "UUID": true, "reason": true, "missing": true}

// TestPodLabelNamedLikeAGpuscopeLabelEveryFamilyDeclares reads the engine's
// sources for label names written as literals (`,name="`): each must be
// declared through familyLabel, so that a family added later cannot write
// a label a pod label may also take.
func TestPodLabelNamedLikeAGpuscopeLabelEveryFamilyDeclares(t *testing.T) {
	re := regexp.MustCompile(`[,"{]([A-Za-z_][A-Za-z0-9_]*)="`)
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range re.FindAllSubmatch(src, -1) {
			name := string(m[1])
			assert.True(t, familyLabelNames[name] || ownLabelSets[name],
				"%s writes the label %s as a literal: declare it with familyLabel so pod labels cannot take it", f, name)
		}
	}
}
