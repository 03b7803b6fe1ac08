package engine

import (
	"fmt"
	"time"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/engine/window"
)

// checkWindow refuses a window that a ring cannot hold: a field's window
// ring keeps at most window.MaxCapacity samples, so --window 24h at 100 ms
// would cover 409.4 s while the HELP text says 24h. The clock-event samples
// that DCGM_EXP_CLOCK_EVENTS_COUNT counts are bounded the same way, and its
// window_size_in_ms label would overstate the span just as HELP would. The
// error names the option, the field, its line and the largest window that
// fits.
func checkWindow(p *plan, o *Options) error {
	for _, m := range p.metrics {
		if m.windowHeader == "" {
			continue
		}
		if err := windowFits(p, m.field, o.WindowOption, o.Window, p.slots[m.slot].interval, window.MaxCapacity, "series"); err != nil {
			return err
		}
	}
	if f := p.expClock; f != nil {
		// The samples counted are those of the clock-event reasons field,
		// watched at the shortest interval any line asks of it.
		iv := p.slots[p.slotOf[fieldid.ClocksEventReasons]].interval
		if err := windowFits(p, *f, o.ClockEventsWindowOption, o.ClockEventsWindow, iv, maxClockSamples, "GPU"); err != nil {
			return err
		}
	}
	return nil
}

// windowFits is checkWindow's test for one field: a window of win at a watch
// interval of iv needs window.SamplesFor samples (the ring's sizing), at
// most capacity.
func windowFits(p *plan, f counters.Field, option string, win, iv time.Duration, capacity int, per string) error {
	if need := window.SamplesFor(win, iv); need > capacity {
		fits := window.SpanOf(capacity, iv)
		return fmt.Errorf("%s:%d: %s: a %s of %s at its %s watch interval needs %d samples per %s, more than the %d a window holds; use %s %s or less, or a longer watch interval for this field",
			p.set.File, f.Line, f.Name, option, win, iv, need, per, capacity, option, fits)
	}
	return nil
}
