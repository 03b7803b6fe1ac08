package clock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/clock"
)

func fired(t clock.Timer) bool {
	select {
	case <-t.C():
		return true
	default:
		return false
	}
}

func TestFakeTimersFireWhenTheClockReachesThem(t *testing.T) {
	start := time.Unix(1000, 0)
	tests := []struct {
		name    string
		after   time.Duration
		advance []time.Duration
		want    []bool // fired after each advance
	}{
		{"fires at its time, not before", 10 * time.Millisecond, []time.Duration{9 * time.Millisecond, time.Millisecond}, []bool{false, true}},
		{"fires once when overshot", 10 * time.Millisecond, []time.Duration{time.Second, time.Second}, []bool{true, false}},
		{"zero fires at once", 0, []time.Duration{0}, []bool{true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := clock.NewFake(start)
			tm := c.NewTimer(tt.after)
			for i, d := range tt.advance {
				c.Add(d)
				assert.Equal(t, tt.want[i], fired(tm), "after advance %d", i)
			}
		})
	}
}

func TestFakeStopAndCount(t *testing.T) {
	c := clock.NewFake(time.Unix(0, 0))
	a := c.NewTimer(time.Second)
	b := c.NewTimer(2 * time.Second)
	assert.Equal(t, 2, c.Timers())
	assert.True(t, a.Stop())
	assert.False(t, a.Stop(), "a stopped timer stops once")
	c.Add(3 * time.Second)
	assert.False(t, fired(a), "a stopped timer never fires")
	assert.True(t, fired(b))
	assert.False(t, b.Stop(), "a fired timer cannot be stopped")
	assert.Zero(t, c.Timers())
	assert.Equal(t, time.Unix(3, 0), c.Now())
	c.Set(time.Unix(1, 0))
	assert.Equal(t, time.Unix(3, 0), c.Now(), "the clock never goes back")
}

func TestWaitForTimersWakesWhenArmed(t *testing.T) {
	c := clock.NewFake(time.Unix(0, 0))
	assert.False(t, c.WaitForTimers(1, time.Millisecond), "nothing armed")
	done := make(chan time.Time)
	go func() {
		tm := c.NewTimer(time.Minute)
		done <- <-tm.C()
	}()
	require.True(t, c.WaitForTimers(1, 10*time.Second))
	c.Add(time.Minute)
	assert.Equal(t, time.Unix(60, 0), <-done)
}

func TestRealClock(t *testing.T) {
	c := clock.Or(nil)
	assert.WithinDuration(t, time.Now(), c.Now(), time.Minute)
	tm := c.NewTimer(0)
	<-tm.C()
}

func TestFakeNextIsTheEarliestArmedTimer(t *testing.T) {
	c := clock.NewFake(time.Unix(0, 0))
	_, ok := c.Next()
	assert.False(t, ok, "nothing armed")
	late := c.NewTimer(3 * time.Second)
	c.NewTimer(time.Second)
	next, ok := c.Next()
	require.True(t, ok)
	assert.Equal(t, time.Unix(1, 0), next)
	c.Set(next)
	next, ok = c.Next()
	require.True(t, ok)
	assert.Equal(t, time.Unix(3, 0), next, "the fired timer is gone")
	late.Stop()
	_, ok = c.Next()
	assert.False(t, ok, "a stopped timer is not next")
}
