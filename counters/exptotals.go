package counters

// dcgm-exporter's cumulative event counters, opt-in since 4.8.3 (its
// README, "Cumulative XID and clock event counters"; commented out of its
// etc/default-counters.csv): DCGM_EXP_XID_ERRORS_TOTAL counts every
// non-zero XID since the exporter started, one series per xid label;
// DCGM_EXP_CLOCK_EVENTS_TOTAL counts each clock-event reason's changes from
// inactive to active, one series per clock_event label, a reason already
// active at start not counted. Both are computed by the engine from the
// events it keeps for gpuscope's own totals, so a counters line selects
// them by role rather than by a field of their own.
const (
	// RoleExpXIDTotal is DCGM_EXP_XID_ERRORS_TOTAL.
	RoleExpXIDTotal Role = RoleComputeAppsSuccess + 1 + iota
	// RoleExpClockEventsTotal is DCGM_EXP_CLOCK_EVENTS_TOTAL.
	RoleExpClockEventsTotal
)

// expTotals are those counters by name, with the help dcgm-exporter's
// README gives their lines.
var expTotals = map[string]CompatInfo{
	"DCGM_EXP_XID_ERRORS_TOTAL": {Name: "DCGM_EXP_XID_ERRORS_TOTAL", Type: Counter, Export: Export{Role: RoleExpXIDTotal},
		Help: "cumulative XID errors observed since exporter start"},
	"DCGM_EXP_CLOCK_EVENTS_TOTAL": {Name: "DCGM_EXP_CLOCK_EVENTS_TOTAL", Type: Counter, Export: Export{Role: RoleExpClockEventsTotal},
		Help: "cumulative clock events observed since exporter start (edge-counted)"},
}

// resolveExpTotal resolves one of those names; the file keeps
// dcgm-exporter's label layout.
func (p *parser) resolveExpTotal(_ int, f *Field, c CompatInfo) bool {
	f.Export = c.Export
	if f.Help == "" {
		f.Help = c.Help
	}
	return true
}

// checkExpTotal refuses one of those names under another type than
// dcgm-exporter's: Prometheus functions such as increase() need a counter.
func (p *parser) checkExpTotal(n int, f Field) bool {
	if f.Type != Counter {
		p.fail(n, "%s is a counter in dcgm-exporter; write counter, not %s", f.Name, f.Type)
		return false
	}
	return true
}
