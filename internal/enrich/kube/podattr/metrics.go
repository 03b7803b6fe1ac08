package podattr

import "github.com/prometheus/client_golang/prometheus"

// Describe implements prometheus.Collector.
func (e *Enricher) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{e.upDesc, e.lastSuccessDesc, e.podsDesc, e.sharedDesc,
		e.unknownDesc, e.malformedDesc, e.unattributedDesc, e.memDesc, e.smDesc, e.allocDesc} {
		ch <- d
	}
	e.refreshErrors.Describe(ch)
	e.connDrops.Describe(ch)
}

// Collect implements prometheus.Collector; it reads the last snapshot only.
func (e *Enricher) Collect(ch chan<- prometheus.Metric) {
	s := e.snap.Load()
	up := 0.0
	if e.up.Load() {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(e.upDesc, prometheus.GaugeValue, up)
	if ts := e.lastSuccess.Load(); ts > 0 {
		ch <- prometheus.MustNewConstMetric(e.lastSuccessDesc, prometheus.GaugeValue, float64(ts))
	}
	e.refreshErrors.Collect(ch)
	e.connDrops.Collect(ch)
	ch <- prometheus.MustNewConstMetric(e.podsDesc, prometheus.GaugeValue, float64(s.pods))
	ch <- prometheus.MustNewConstMetric(e.sharedDesc, prometheus.GaugeValue, float64(s.shared))
	ch <- prometheus.MustNewConstMetric(e.unknownDesc, prometheus.GaugeValue, float64(s.unknownIDs))
	ch <- prometheus.MustNewConstMetric(e.malformedDesc, prometheus.GaugeValue, float64(s.malformed))
	if e.cfg.SharedGPUAttribution {
		ch <- prometheus.MustNewConstMetric(e.unattributedDesc, prometheus.GaugeValue, float64(s.unattributed))
	}
	for _, a := range s.alloc {
		ch <- prometheus.MustNewConstMetric(e.allocDesc, prometheus.GaugeValue, 1, a.Pod, a.Namespace, a.Container, a.gpu, a.uuid, a.gi)
	}
	for _, u := range s.usage {
		lv := []string{u.ref.Pod, u.ref.Namespace, u.ref.Container, u.gpu, u.uuid, u.gi}
		ch <- prometheus.MustNewConstMetric(e.memDesc, prometheus.GaugeValue, u.memBytes, lv...)
		if u.hasSMUtil {
			ch <- prometheus.MustNewConstMetric(e.smDesc, prometheus.GaugeValue, u.smUtil, lv...)
		}
	}
}
