package sluice

import (
	"time"
	"unsafe"

	"github.com/sluice-go/sluice/engine"
)

// Decision is the outcome of one request. Its first six fields are every
// decision's; the last four are the one verb's or option's that fills
// them, and zero otherwise. Every field follows exactly from the
// algorithm's arithmetic, where the buckets and the sliding counter take
// float64 amounts that differ by less than one part in 2^48 of the limit
// as equal, so that rounding never turns an exact fit into a denial.
type Decision struct {
	// Allowed reports whether the request was admitted (for CanAccept,
	// would be); for Fillup, which records its cost either way, whether
	// the cost fitted below the capacity.
	Allowed bool
	// Limit is the most cost the key can hold: the leaky bucket's capacity,
	// the GCRA and token bucket burst, or the limit per window.
	Limit float64
	// Used is the allowance in use after this request: the leaky bucket's
	// level, the tokens missing from the token bucket, the window's count or
	// estimate, or GCRA's backlog in units of cost.
	Used float64
	// Remaining is Limit - Used, never negative: what a request could
	// still cost and be admitted right after this one.
	Remaining float64
	// RetryAfter is how long until the same cost would be admitted, if
	// nothing else is recorded meanwhile, and not a nanosecond sooner; zero
	// when it was admitted, and for Fillup unless a penalty blocks the key.
	RetryAfter time.Duration
	// ResetAfter is how long until the key is fresh (its full allowance
	// back), if nothing else is recorded meanwhile.
	ResetAfter time.Duration
	// Delay is how long from now until a booked reservation may act.
	Delay time.Duration
	// At is the instant a booked reservation that must wait may act, on
	// the clock of the store that decided, which Cancel hands back; a
	// lease's identity ([Lease]); or, for a denied try of Acquire as an
	// [Observer] sees it, the waiter's ticket in the key's line.
	At int64
	// Granted is the cost AllowAtMost admitted (the whole cost, a whole
	// number of units less, or zero), or Settle charged or gave back.
	Granted float64
	// Blocked reports that a penalty ([WithPenalty]) blocks the key: it
	// admits nothing before the block ends, which RetryAfter (or a
	// reservation's Delay) reaches at least.
	Blocked bool
}

// decided is d as the store contract's decision, which has d's fields: a
// store decides into the caller's Decision in place.
func decided(d *Decision) *engine.Decision { return (*engine.Decision)(d) }

// decisions is ds as the store contract's decisions, in place.
func decisions(ds []Decision) []engine.Decision {
	if len(ds) == 0 {
		return nil
	}
	return unsafe.Slice(decided(&ds[0]), len(ds))
}
