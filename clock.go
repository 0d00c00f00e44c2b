package sluice

import (
	"math"
	"time"

	"github.com/sluice-go/sluice/internal/arith"
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

// systemClock is the clock of the operating system (time.Now and
// time.After), every limiter's unless [WithClock] gives another.
type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// maxTime bounds the times of requests (2^62 ns since the Unix epoch is in
// 2116), so that a time plus a span cannot overflow. Times before the
// epoch are refused too, so that the zero State, whose times are zero, is
// never in a request's future.
const maxTime = arith.MaxTime

// base is the instant every limiter measures time from: read once, when
// the process starts, and never changed.
var base = time.Now()

var baseNanos = base.UnixNano()

// nanoClock turns a Clock's times into nanoseconds since the Unix epoch.
// It measures them as the time elapsed since base, so that the times of a
// clock that carries a monotonic reading (time.Now's) do not jump when the
// wall clock is stepped, and all limiters of a process, sharing base,
// agree. A fake clock's times have no monotonic reading, and are measured
// by their wall clock reading.
type nanoClock struct {
	clock Clock
}

// now returns the clock's time in nanoseconds since the Unix epoch. A time
// outside [0, maxTime] comes out outside it, and CheckTime refuses it.
func (c nanoClock) now() int64 {
	if _, ok := c.clock.(systemClock); ok {
		// The monotonic clock alone, which is faster to read. It counts
		// forwards from base, and cannot reach 2^63 ns past the epoch.
		return baseNanos + int64(time.Since(base))
	}
	d := int64(c.clock.Now().Sub(base)) // Sub saturates rather than overflowing
	t := baseNanos + d                  // but this sum may wrap
	switch {
	case d > 0 && t < baseNanos:
		t = math.MaxInt64
	case d < 0 && t > baseNanos:
		t = math.MinInt64
	}
	return t
}
