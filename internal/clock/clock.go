// Package clock is the time source of code that waits: sources that back off
// before reconnecting, fakes that sample on a schedule. Production uses Real;
// tests use a Fake and move it forward by hand, so that they never sleep to
// let time pass and never pass by luck on a slow machine.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and arms timers.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that delivers the time on C once d has
	// passed on this clock.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer of a Clock.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// Real is the wall clock.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// Or returns c, or Real when c is nil.
func Or(c Clock) Clock {
	if c == nil {
		return Real
	}
	return c
}

// Fake is a clock that moves only when told to. Its timers fire during the
// Add or Set that reaches their time.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	// armed is closed and replaced whenever a timer is armed, so that
	// WaitForTimers wakes without polling.
	armed chan struct{}
}

// NewFake returns a fake clock standing at start.
func NewFake(start time.Time) *Fake { return &Fake{now: start, armed: make(chan struct{})} }

// Now implements Clock.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer implements Clock. A timer for d <= 0 has fired already.
func (f *Fake) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{f: f, at: f.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.c <- f.now
		return t
	}
	f.timers = append(f.timers, t)
	close(f.armed)
	f.armed = make(chan struct{})
	return t
}

// Add moves the clock forward by d and fires the timers due by then, in
// the order of their times.
func (f *Fake) Add(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setLocked(f.now.Add(d))
}

// Set moves the clock to t (never backwards) and fires the timers due.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.After(f.now) {
		f.setLocked(t)
	}
}

func (f *Fake) setLocked(t time.Time) {
	f.now = t
	sort.SliceStable(f.timers, func(i, j int) bool { return f.timers[i].at.Before(f.timers[j].at) })
	n := 0
	for n < len(f.timers) && !f.timers[n].at.After(t) {
		f.timers[n].c <- f.timers[n].at
		n++
	}
	f.timers = append(f.timers[:0], f.timers[n:]...)
}

// Next returns when the earliest armed timer fires; false when none is
// armed. A driver of the clock steps to it, so that every timer fires at
// its own time rather than late, at the end of a longer move.
func (f *Fake) Next() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.timers) == 0 {
		return time.Time{}, false
	}
	next := f.timers[0].at
	for _, t := range f.timers[1:] {
		if t.at.Before(next) {
			next = t.at
		}
	}
	return next, true
}

// Timers counts the armed timers that have not fired or been stopped.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// WaitForTimers waits until at least n timers are armed, so that a test
// moves the clock only once the code under test is waiting on it. It gives
// up after timeout of real time and reports whether n were reached.
func (f *Fake) WaitForTimers(n int, timeout time.Duration) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		have, armed := len(f.timers), f.armed
		f.mu.Unlock()
		if have >= n {
			return true
		}
		select {
		case <-armed:
		case <-deadline.C:
			return false
		}
	}
}

type fakeTimer struct {
	f  *Fake
	at time.Time
	c  chan time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	for i, o := range t.f.timers {
		if o == t {
			t.f.timers = append(t.f.timers[:i], t.f.timers[i+1:]...)
			return true
		}
	}
	return false
}
