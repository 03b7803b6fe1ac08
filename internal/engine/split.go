package engine

import "github.com/gpuscope/gpuscope/internal/enrich"

// splitter is the enricher whose rows share out some fields' values
// (enrich.RowSplitter), and which fields.
type splitter struct {
	idx    int // in Engine.enr
	rs     enrich.RowSplitter
	fields map[uint16]bool
}

// splitLabels are an entity's label sets for the split fields: dev, the
// device's own series (every enricher's labels but the splitter's), and
// rows, one per splitter row, whose value is SplitValues[rowIdx].
type splitLabels struct {
	dev    []string
	rows   []string
	rowIdx []int
}

// newSplitter finds the first enricher that splits fields, if any.
func newSplitter(enr []enricherLabels) *splitter {
	for i, el := range enr {
		rs, ok := el.e.(enrich.RowSplitter)
		if !ok || len(rs.SplitFields()) == 0 {
			continue
		}
		sp := &splitter{idx: i, rs: rs, fields: map[uint16]bool{}}
		for _, f := range rs.SplitFields() {
			sp.fields[f] = true
		}
		return sp
	}
	return nil
}

// buildSplitLabels renders an entity's split label sets, or nil when the
// splitter gives it no rows. The splitter's run-time labels (pod labels
// from the API server) are not on the per-row series: dcgm-exporter writes
// only pod, namespace, container, pod_uid and vgpu there
// (internal/pkg/transformation/kubernetes.go, createPerProcessMetrics).
func buildSplitLabels(es, parent *entityState, p *plan, opts *Options, enr []enricherLabels, sp *splitter) *splitLabels {
	if sp == nil {
		return nil
	}
	rows := sp.rs.SplitRows(&es.ent)
	if len(rows) == 0 {
		return nil
	}
	sets := [][]labelPair{baseLabels(es, parent, p, opts)}
	for i, el := range enr {
		if i != sp.idx {
			sets, _ = enrichedSets(sets, el, &es.ent, p, enr)
		}
	}
	out := &splitLabels{}
	names := enr[sp.idx].names
	for _, set := range sets {
		out.dev = append(out.dev, renderLabels(set))
		for ri, vals := range rows {
			if len(out.rows) == maxLabelCopies {
				break
			}
			l := append(make([]labelPair, 0, len(set)+len(names)), set...)
			for i, name := range names {
				if i < len(vals) && vals[i] != "" {
					l = append(l, labelPair{name, vals[i]})
				}
			}
			out.rows = append(out.rows, renderLabels(l))
			out.rowIdx = append(out.rowIdx, ri)
		}
	}
	return out
}

// appendSplit writes a split field's series of an entity, and says whether
// it did: the device's value on its own series, each row's value on the
// row's. Without values (the enricher has not read the processes yet) the
// field falls back to the ordinary copies.
func (e *Engine) appendSplit(w *snapshotWriter, name string, es *entityState, id uint16, v float64) bool {
	sl := es.split
	if sl == nil || e.splitter == nil || !e.splitter.fields[id] {
		return false
	}
	vals := e.splitter.rs.SplitValues(&es.ent, id)
	if len(vals) == 0 {
		return false
	}
	for _, l := range sl.dev {
		w.sample(name, l, "} ", v)
	}
	for i, l := range sl.rows {
		if r := sl.rowIdx[i]; r < len(vals) {
			w.sample(name, l, "} ", vals[r])
		}
	}
	return true
}
