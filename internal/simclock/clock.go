// Package simclock is simulated time for limiters under test and in the
// simulator: it stands still until its owner moves it, and wakes each
// sleeper once the clock reaches the sleeper's instant, with no real
// pause.
//
// It is not benbjohnson/clock's Mock, which the core's unit tests use:
// Mock.Set and Mock.Add sleep a real millisecond each time to let other
// goroutines run, so a million simulated requests would take over sixteen
// minutes, and a test of many waiters could not know that every one
// sleeps. Here the owner moves the clock only when it is ready
// (WaitForSleepers).
package simclock

import (
	"sync"
	"time"
)

// A Clock is simulated time. It implements sluice.Clock. It is safe for
// concurrent use.
type Clock struct {
	mu       sync.Mutex
	slept    sync.Cond // broadcast when a goroutine begins to sleep
	now      time.Time
	sleepers []sleeper
}

type sleeper struct {
	until time.Time
	ch    chan time.Time
}

// New returns a clock reading start.
func New(start time.Time) *Clock {
	c := &Clock{now: start}
	c.slept.L = &c.mu
	return c
}

// Now returns the simulated time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives the time once the clock has
// moved at least d past now; at once if d is not positive.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.sleepers = append(c.sleepers, sleeper{until: c.now.Add(d), ch: ch})
	c.slept.Broadcast()
	return ch
}

// Set moves the clock to t and wakes the sleepers that are due.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.set(t)
}

// Add moves the clock by d and wakes the sleepers that are due.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.set(c.now.Add(d))
}

// set is Set under c.mu.
func (c *Clock) set(t time.Time) {
	c.now = t
	if len(c.sleepers) == 0 {
		return
	}
	kept := c.sleepers[:0]
	for _, s := range c.sleepers {
		if s.until.After(t) {
			kept = append(kept, s)
			continue
		}
		s.ch <- t
	}
	clear(c.sleepers[len(kept):]) // let the woken channels go
	c.sleepers = kept
}

// WaitForSleepers blocks until n goroutines sleep on the clock.
func (c *Clock) WaitForSleepers(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.sleepers) < n {
		c.slept.Wait()
	}
}
