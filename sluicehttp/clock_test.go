package sluicehttp_test

import (
	"sync"
	"time"
)

// start is where every test clock starts: a whole minute, so that fixed
// windows of a minute or less begin there.
var start = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// manualClock is a sluice.Clock that moves only when the test advances it,
// so that every decision is exact.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *manualClock { return &manualClock{now: start} }

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After jumps the clock forward by d, as a simulation does when something
// sleeps. The middleware never waits; After is here for sluice.Clock.
func (c *manualClock) After(d time.Duration) <-chan time.Time {
	c.Advance(d)
	ch := make(chan time.Time, 1)
	ch <- c.Now()
	return ch
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
