package sluice

import (
	"time"
	"unsafe"

	"github.com/sluice-go/sluice/engine"
)

// Decision is the outcome of one request. Its first six fields are every
// decision's; the last four are the one verb's or option's that fills
// them, and zero otherwise.
//
// Every field is an exact consequence of the algorithm's arithmetic. For
// the leaky and token buckets and the sliding counter, whose amounts are
// float64, amounts that differ by less than one part in 2^48 of the limit
// compare as equal, so that float rounding never turns an exact fit into a
// denial.
type Decision struct {
	// Allowed reports whether the request was admitted (or, for
	// CanAccept, would be). For Fillup it reports whether the cost fitted
	// below the capacity; the cost is recorded either way.
	Allowed bool
	// Limit is the most cost the key can hold: the leaky bucket's capacity,
	// the GCRA and token bucket burst, or the limit per window.
	Limit float64
	// Used is the allowance in use after this request: the leaky bucket's
	// level, the tokens missing from the token bucket, the window's count or
	// estimate, or GCRA's backlog in units of cost.
	Used float64
	// Remaining is what a request could still cost and be admitted right
	// after this one: Limit - Used, never negative.
	Remaining float64
	// RetryAfter is zero when the request was admitted, and for Fillup,
	// which records its cost either way, unless a penalty blocks the key.
	// Otherwise it is how long until the same cost would be admitted, if
	// nothing else is recorded meanwhile: one nanosecond earlier it would
	// still be denied.
	RetryAfter time.Duration
	// ResetAfter is how long until the key is back to its full allowance
	// (fresh), if nothing else is recorded meanwhile.
	ResetAfter time.Duration
	// Delay is Reserve's: how long from now until a booked reservation
	// may act. Read it from the [Reservation].
	Delay time.Duration
	// At is Reserve's: the instant a booked reservation that must wait
	// may act, on the clock of the store that decided, which Cancel hands
	// back. Read it from the [Reservation]. For a lease, it is the lease's
	// identity (see [Lease]); for a try of Acquire that was denied, as an
	// [Observer] sees it, the waiter's ticket in the key's line.
	At int64
	// Granted is AllowAtMost's: the cost admitted and recorded, the whole
	// cost, a whole number of units less than it, or zero.
	Granted float64
	// Blocked is a penalty's ([WithPenalty]): it reports that the key
	// admits nothing before its block ends, which RetryAfter (or a
	// reservation's Delay) reaches at least.
	Blocked bool
}

// Full reports whether no allowance is left after the request: for Fillup,
// whether the fill-up reached capacity.
func (d Decision) Full() bool { return d.Remaining <= 0 }

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
