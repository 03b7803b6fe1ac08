// Package testwait lets tests wait for a condition that other goroutines
// bring about, checking it on the test's goroutine until a deadline, instead
// of sleeping for a time that is too long on a fast machine and too short on
// a slow one.
package testwait

import (
	"testing"
	"time"
)

// Timeout is how long For waits before failing the test: long enough for a
// loaded CI machine, and only ever reached when the condition never holds.
const Timeout = 20 * time.Second

// poll is how often the condition is checked.
const poll = time.Millisecond

// For checks cond until it holds, failing the test with what after Timeout.
// cond runs on the test's goroutine, so it may call require.
func For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !Until(Timeout, cond) {
		t.Fatalf("timed out after %s waiting for %s", Timeout, what)
	}
}

// Until checks cond until it holds or timeout passes, and reports whether
// it held.
func Until(timeout time.Duration, cond func() bool) bool { return Every(timeout, poll, cond) }

// Every checks cond every period until it holds or timeout passes, and
// reports whether it held: for conditions that cost a request to check.
func Every(timeout, period time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(period)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}
