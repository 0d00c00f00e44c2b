package sluice

import (
	"math"
	"time"
)

// Clock is the source of time for a limiter. The system clock is the
// default; tests pass a fake one. github.com/benbjohnson/clock's Clock and
// Mock satisfy it.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives once d has passed on this
	// clock. Wait sleeps on it.
	After(d time.Duration) <-chan time.Time
}

// SystemClock returns the clock of the operating system (time.Now and
// time.After).
func SystemClock() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// maxTime bounds the times a limiter passes to a store (about the year
// 2116, and as far before 1970), so that a time plus a span cannot
// overflow.
const maxTime = 1 << 62

// nanoClock turns a Clock's times into nanoseconds since the Unix epoch.
// It measures them as the time elapsed since a base reading, so that when
// the clock's times carry a monotonic reading (as time.Now's do) a wall
// clock step does not move a limiter's time.
type nanoClock struct {
	clock     Clock
	base      time.Time
	baseNanos int64
}

func newNanoClock(c Clock) nanoClock {
	base := c.Now()
	return nanoClock{clock: c, base: base, baseNanos: clampTime(base.Unix(), int64(base.Nanosecond()))}
}

// now returns the clock's time in nanoseconds since the Unix epoch,
// clamped to ±maxTime.
func (c *nanoClock) now() int64 {
	d := int64(c.clock.Now().Sub(c.base)) // Sub saturates rather than overflowing
	t := c.baseNanos + d                  // but this sum may wrap
	switch {
	case d > 0 && t < c.baseNanos:
		t = math.MaxInt64
	case d < 0 && t > c.baseNanos:
		t = math.MinInt64
	}
	return min(max(t, -maxTime), maxTime)
}

// clampTime returns sec seconds plus nsec nanoseconds since the Unix epoch,
// clamped to ±maxTime.
func clampTime(sec, nsec int64) int64 {
	const limit = maxTime / int64(time.Second)
	switch {
	case sec >= limit:
		return maxTime
	case sec <= -limit:
		return -maxTime
	}
	return sec*int64(time.Second) + nsec
}
