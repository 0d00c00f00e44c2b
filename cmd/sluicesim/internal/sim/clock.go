package sim

import (
	"sync"
	"time"
)

// Clock is simulated time for the limiters: it stands still until the
// simulation moves it with Set.
//
// It is not benbjohnson/clock's Mock, which the core's tests use, because
// Mock.Set and Mock.Add sleep a real millisecond each time to let other
// goroutines run: a million simulated requests would take over sixteen
// minutes. Nothing here runs in another goroutine, so Set needs no pause.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers []timer
}

type timer struct {
	at time.Time
	ch chan time.Time
}

// NewClock returns a clock reading start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the simulated time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives the time once Set has moved the
// clock at least d past now.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.timers = append(c.timers, timer{c.now.Add(d), ch})
	return ch
}

// Set moves the clock to t, firing the timers that are due.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	if len(c.timers) == 0 {
		return
	}
	kept := c.timers[:0]
	for _, tm := range c.timers {
		if tm.at.After(t) {
			kept = append(kept, tm)
			continue
		}
		tm.ch <- t
	}
	c.timers = kept
}
