package storetest

import (
	"sync"
	"time"
)

// simClock is a simulated clock for limiters under test: time moves only
// when the test advances it, and the test can wait until a number of
// goroutines sleep on it, so that no wake-up depends on the scheduler.
type simClock struct {
	mu       sync.Mutex
	cond     *sync.Cond
	start    time.Time
	now      time.Time
	sleepers []sleeper
}

type sleeper struct {
	until time.Time
	ch    chan time.Time
}

func newSimClock(start time.Time) *simClock {
	c := &simClock{start: start, now: start}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// Now returns the simulated time.
func (c *simClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives once the clock has advanced by d.
func (c *simClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.sleepers = append(c.sleepers, sleeper{until: c.now.Add(d), ch: ch})
	c.cond.Broadcast()
	return ch
}

// waitForSleepers blocks until n goroutines sleep on the clock.
func (c *simClock) waitForSleepers(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.sleepers) < n {
		c.cond.Wait()
	}
}

// advance moves the clock by d and wakes the sleepers that are due.
func (c *simClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.sleepers[:0]
	for _, s := range c.sleepers {
		if s.until.After(c.now) {
			kept = append(kept, s)
		} else {
			s.ch <- c.now
		}
	}
	c.sleepers = kept
}

// elapsed returns how far the clock has advanced.
func (c *simClock) elapsed() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now.Sub(c.start)
}
