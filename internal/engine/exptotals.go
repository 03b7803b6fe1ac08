package engine

import (
	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/engine/eventnames"
)

// renderXIDTotal writes dcgm-exporter's DCGM_EXP_XID_ERRORS_TOTAL (4.8.3:
// its README's "Cumulative XID and clock event counters", and
// internal/pkg/rendermetrics's TestRenderCumulativeEventCounters): per GPU,
// one series per XID seen since start, labelled xid, counting every
// non-zero XID; no series before the first. These are the counts of
// gpuscope_xid_errors_total, on the GPUs DCGM_EXP_XID_ERRORS_COUNT is
// written on.
func (e *Engine) renderXIDTotal(w *snapshotWriter, f *counters.Field) {
	appendFamily(w, e.order, f.Name, f.Help, f.Type.String(),
		func(w *snapshotWriter, es *entityState, labels string) {
			if es = expEntity(es); es == nil {
				return
			}
			for _, x := range es.xids {
				if x.code == 0 {
					continue // "XID value 0 is treated as no error"
				}
				w.sample(f.Name, labels, `,`+labelXID+`="`+eventnames.XIDLabel(x.code)+`"} `, float64(x.total))
			}
		})
}

// renderClockEventsTotal writes dcgm-exporter's DCGM_EXP_CLOCK_EVENTS_TOTAL
// (same sources, and internal/pkg/collector's clockEventsTotalCollector and
// its tests): per GPU, one series per clock-event reason, labelled
// clock_event, counting its changes from inactive to active since start. The
// first sample only sets the baseline, so a reason already active then is
// not counted, and a reason appears once it has counted.
func (e *Engine) renderClockEventsTotal(w *snapshotWriter, f *counters.Field) {
	var tails [len(clockEventTails)]string
	for i, ce := range eventnames.ClockEvents {
		tails[i] = `,` + labelClockEvent + `="` + ce.Name + `"} `
	}
	appendFamily(w, e.order, f.Name, f.Help, f.Type.String(),
		func(w *snapshotWriter, es *entityState, labels string) {
			if es = expEntity(es); es == nil || !es.clockSeen {
				return
			}
			for i, ce := range eventnames.ClockEvents {
				n := es.clockTot[i]
				if es.clockInit&ce.Bit != 0 {
					n--
				}
				if n > 0 {
					w.sample(f.Name, labels, tails[i], float64(n))
				}
			}
		})
}
