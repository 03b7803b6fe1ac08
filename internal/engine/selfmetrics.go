package engine

import (
	"github.com/prometheus/client_golang/prometheus"
)

// selfMetrics are the engine's own families that carry no GPU identity.
type selfMetrics struct {
	collectDuration *prometheus.HistogramVec
	sampleErrors    *prometheus.CounterVec
	nonFinite       *prometheus.CounterVec
}

func newSelfMetrics() selfMetrics {
	return selfMetrics{
		collectDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gpuscope_collection_duration_seconds",
			Help:    "Time one collection of a field group took, by watch interval.",
			Buckets: []float64{.0001, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"interval"}),
		sampleErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpuscope_sample_errors_total",
			Help: "Failed reads of a field that the GPU otherwise supports, by field.",
		}, []string{"field"}),
		nonFinite: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpuscope_samples_non_finite_total",
			Help: "Samples a source handed over as NaN, +Inf or -Inf, by field: no reading, left out of the latest value, the window statistics, the histograms and the samples API.",
		}, []string{"field"}),
	}
}

var (
	sourceUpDesc = prometheus.NewDesc("gpuscope_source_up",
		"1 while the GPU source answers, by source (dcgm, nvml or sim).", []string{"source"}, nil)
	labelsSanitizedDesc = prometheus.NewDesc("gpuscope_label_values_sanitized_total",
		"Label values (host name, label-type fields, pod labels, HPC job IDs) whose invalid UTF-8 bytes were replaced with U+FFFD, counted each time such a value was written into a label set.", nil, nil)
	copiesDroppedDesc = prometheus.NewDesc("gpuscope_label_copies_dropped",
		"Copies of series left out at the last relabelling because an entity's enricher rows (pods sharing a virtual GPU, HPC jobs) asked for more than 64 copies.", nil, nil)
	profilingPausedDesc = prometheus.NewDesc("gpuscope_profiling_paused",
		"1 while DCGM profiling fields are released so that another profiler can run.", nil, nil)
)

// Describe implements prometheus.Collector.
func (e *Engine) Describe(ch chan<- *prometheus.Desc) {
	e.m.collectDuration.Describe(ch)
	e.m.sampleErrors.Describe(ch)
	e.m.nonFinite.Describe(ch)
	ch <- sourceUpDesc
	ch <- profilingPausedDesc
	ch <- labelsSanitizedDesc
	ch <- copiesDroppedDesc
}

// Collect implements prometheus.Collector from the last polled status.
func (e *Engine) Collect(ch chan<- prometheus.Metric) {
	e.m.collectDuration.Collect(ch)
	e.m.sampleErrors.Collect(ch)
	e.m.nonFinite.Collect(ch)
	st := e.Status()
	up := 0.0
	if st.Up {
		up = 1
	}
	e.mu.RLock()
	name := e.sourceName()
	e.mu.RUnlock()
	ch <- prometheus.MustNewConstMetric(sourceUpDesc, prometheus.GaugeValue, up, name)
	paused := 0.0
	if st.ProfilingPaused {
		paused = 1
	}
	ch <- prometheus.MustNewConstMetric(profilingPausedDesc, prometheus.GaugeValue, paused)
	ch <- prometheus.MustNewConstMetric(labelsSanitizedDesc, prometheus.CounterValue, float64(invalidUTF8Labels.Load()))
	ch <- prometheus.MustNewConstMetric(copiesDroppedDesc, prometheus.GaugeValue, float64(e.copiesDropped.Load()))
}
