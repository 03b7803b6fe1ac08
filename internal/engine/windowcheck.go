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
// error is a *WindowError: the field, its line and the largest window that
// fits.
func checkWindow(p *plan, o *Options) error {
	for _, m := range p.metrics {
		if m.windowHeader == "" {
			continue
		}
		if err := windowFits(p, m.field, false, o.Window, p.slots[m.slot].interval, window.MaxCapacity, "series"); err != nil {
			return err
		}
	}
	if f := p.expClock; f != nil {
		// The samples counted are those of the clock-event reasons field,
		// watched at the shortest interval any line asks of it.
		iv := p.slots[p.slotOf[fieldid.ClocksEventReasons]].interval
		if err := windowFits(p, *f, true, o.ClockEventsWindow, iv, maxClockSamples, "GPU"); err != nil {
			return err
		}
	}
	return nil
}

// windowFits is checkWindow's test for one field: a window of win at a watch
// interval of iv needs window.SamplesFor samples (the ring's sizing), at
// most capacity.
func windowFits(p *plan, f counters.Field, clockEvents bool, win, iv time.Duration, capacity int, per string) error {
	if need := window.SamplesFor(win, iv); need > capacity {
		return &WindowError{File: p.set.File, Line: f.Line, Field: f.Name, ClockEvents: clockEvents, Window: win, Interval: iv,
			Need: need, Per: per, Capacity: capacity, Fits: window.SpanOf(capacity, iv)}
	}
	return nil
}

// WindowError is a window longer than a field's ring holds at its watch
// interval.
type WindowError struct {
	File, Field string
	Line        int
	// ClockEvents says the window is Options.ClockEventsWindow, else it is
	// Options.Window.
	ClockEvents      bool
	Window, Interval time.Duration
	// Need samples per Per ("series", "GPU") exceed Capacity; a window of
	// Fits is the largest that fits.
	Need, Capacity int
	Per            string
	Fits           time.Duration
	// Option is how the message names the window: the caller's name for
	// it (a flag, say); "window" or "clock-events count window" when empty.
	Option string
}

func (e *WindowError) Error() string {
	option := e.Option
	switch {
	case option != "":
	case e.ClockEvents:
		option = "clock-events count window"
	default:
		option = "window"
	}
	return fmt.Sprintf("%s:%d: %s: a %s of %s at its %s watch interval needs %d samples per %s, more than the %d a window holds; use %s %s or less, or a longer watch interval for this field",
		e.File, e.Line, e.Field, option, e.Window, e.Interval, e.Need, e.Per, e.Capacity, option, e.Fits)
}
