package engine

import (
	"strings"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/engine/nativehist"
)

// HistogramSuffix ends the name of a field's native histogram family.
const HistogramSuffix = "_distribution"

// Bucket layouts by unit. A quantile read from a native histogram is off by
// at most half a bucket: 4.4% of the value at schema 3, 2.2% at schema 4,
// 9% at schema 2. Ratios and percentages count values of at most a
// thousandth of their full scale as zero (an idle SM), which spares the
// buckets of a long run down to the smallest float.
var (
	layoutRatio   = nativehist.Layout{Schema: 3, ZeroThreshold: 1e-3}
	layoutPercent = nativehist.Layout{Schema: 3, ZeroThreshold: 0.1}
	layoutFine    = nativehist.Layout{Schema: 4} // W, C, MHz: narrow ranges
	layoutRate    = nativehist.Layout{Schema: 2} // bytes/s: many decades
	layoutOther   = nativehist.Layout{Schema: 3}
)

// layoutFor picks the bucket layout of a field from DCGM's unit of it, or
// failing that from the unit its help text names.
func layoutFor(f counters.Field) nativehist.Layout {
	switch fieldid.Of(f.ID).Unit {
	case "W", "C":
		return layoutFine
	case "MB/s", "KB/s":
		return layoutRate
	}
	help := strings.ToLower(f.Help)
	switch {
	case strings.Contains(help, "ratio"):
		return layoutRatio
	case strings.Contains(help, "%"):
		return layoutPercent
	case strings.Contains(help, "bytes per second"), strings.Contains(help, "b/s"):
		return layoutRate
	case strings.Contains(help, "mhz"), strings.Contains(help, "in w)"), strings.Contains(help, "in c)"):
		return layoutFine
	}
	return layoutOther
}

// planHistograms gives every metric with window statistics a native
// histogram family unless on is false or its line says nohist. The
// histogram counts the slot's samples, so a slot that two lines share has
// one, in the layout of the first line that asks.
func planHistograms(p *plan, on bool) {
	if !on {
		return
	}
	for mi := range p.metrics {
		m := &p.metrics[mi]
		if len(m.field.Stats) == 0 || m.field.NoHistogram {
			continue
		}
		m.histName = m.field.Name + HistogramSuffix
		m.histHelp = "Native histogram of every sample of " + m.field.Name + " since gpuscope started; served to scrapers that ask for the protobuf exposition."
		if s := &p.slots[m.slot]; s.hist == nil {
			l := layoutFor(m.field)
			s.hist = &l
		}
	}
}

// appendHistograms writes the native histogram families, one series per
// series of the fields they are of, labelled the same. They exist only in
// the protobuf exposition: the text format cannot carry them. The caller
// holds the store's read lock.
func (e *Engine) appendHistograms(w *snapshotWriter, s *Snapshot, now int64) {
	p := e.plan
	for mi := range p.metrics {
		m := &p.metrics[mi]
		if m.histName == "" {
			continue
		}
		stale := now - int64(p.slots[m.slot].stale)
		w.histFamily(m.histName, m.histHelp)
		for _, es := range e.order {
			if es.migParent {
				continue
			}
			sv := m.valueOf(es)
			if sv.hist == nil || sv.support == supportNo || sv.ts < stale {
				continue
			}
			// One encoding for every copy of the series.
			from := len(s.hbuf)
			s.hbuf = sv.hist.AppendProto(s.hbuf)
			for _, l := range es.labels {
				w.histogram(l, from, len(s.hbuf))
			}
		}
	}
}

// labelPairs reads label pairs as the engine writes them (name, equals
// sign and quoted value, comma-separated, with the text format's escapes,
// after an opening brace or a comma) back into pairs.
func labelPairs(s string) []labelPair {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "{"), ",")
	var out []labelPair
	for len(s) > 0 {
		name, rest, ok := strings.Cut(s, `="`)
		if !ok {
			break
		}
		var v strings.Builder
		i := 0
		for ; i < len(rest) && rest[i] != '"'; i++ {
			c := rest[i]
			if c == '\\' && i+1 < len(rest) {
				i++
				switch rest[i] {
				case 'n':
					c = '\n'
				default:
					c = rest[i]
				}
			}
			v.WriteByte(c)
		}
		out = append(out, labelPair{name: name, value: v.String()})
		s = strings.TrimPrefix(rest[min(i+1, len(rest)):], ",")
	}
	return out
}
