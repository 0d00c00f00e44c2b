// Package arith is the arithmetic that sluice's step functions and its
// stores share: the bounds on times and spans, the float tolerance, and the
// roundings that every store must reproduce bit for bit. The core computes
// with it, and the Redis and PostgreSQL stores (separate modules in this
// repository) import it rather than keep copies, so that a change here is a
// change everywhere. Their Lua and SQL translations of these functions are
// checked against the core by storetest's exact replay.
package arith

import "math"

const (
	// MaxTime bounds the times of requests: 2^62 ns since the Unix epoch,
	// in 2116, so that a time plus any span stays far from overflowing.
	MaxTime = 1 << 62
	// MaxSpan bounds every duration the algorithms compute: 2^60 ns, about
	// 36 years.
	MaxSpan = 1 << 60
	// Tolerance is the relative slack of float comparisons: amounts within
	// limit*Tolerance of each other are equal, and durations computed from
	// float amounts forgive the same relative error before rounding up.
	Tolerance = 0x1p-48
)

// FloorDiv returns a/b rounded toward negative infinity, for b > 0.
func FloorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// Nanos converts an amount of cost to whole nanoseconds at interval
// nanoseconds per unit, rounded half away from zero: GCRA's c*T and
// burst*T.
func Nanos(amount float64, interval int64) int64 {
	return int64(math.Round(amount * float64(interval)))
}

// CeilNanos rounds a duration in nanoseconds computed from float amounts up
// to a whole nanosecond, after forgiving Tolerance of it as rounding noise,
// and caps it at MaxSpan. Durations that are not positive are zero.
func CeilNanos(ns float64) int64 {
	if !(ns > 0) {
		return 0
	}
	ns -= ns * Tolerance
	if !(ns < MaxSpan) { // NaN here is +Inf minus its own tolerance
		return MaxSpan
	}
	return int64(math.Ceil(ns))
}

// BucketSpan is how long, in nanoseconds, a bucket of capacity limit that
// drains (or refills) amount per interval takes to go from full to empty,
// counted in whole intervals as the interval-refill token bucket counts.
func BucketSpan(limit, amount float64, interval int64) float64 {
	return math.Ceil(limit/amount) * float64(interval)
}

// GCRASpan is GCRA's tolerance, burst*T, in nanoseconds before rounding:
// the longest a key's theoretical arrival time runs ahead of now.
func GCRASpan(burst float64, interval int64) float64 {
	return burst * float64(interval)
}

// FloorNanos rounds a duration in nanoseconds computed from float amounts
// down to a whole nanosecond, after forgiving Tolerance of it as rounding
// noise (the mirror of CeilNanos: a value a hair below a whole nanosecond
// is that nanosecond), and caps it at MaxSpan. Durations that are not
// positive are zero.
func FloorNanos(ns float64) int64 {
	if !(ns > 0) {
		return 0
	}
	ns += ns * Tolerance
	if !(ns < MaxSpan) {
		return MaxSpan
	}
	return int64(math.Floor(ns))
}
