package engine

import (
	"strconv"
	"time"
)

// Verb says what a decision does to the key's state.
type Verb uint8

const (
	// VerbAllow admits the cost if it fits now and records it; a denied
	// request records nothing.
	VerbAllow Verb = iota + 1
	// VerbCheck decides as VerbAllow would and records nothing.
	VerbCheck
	// VerbFill records the cost unconditionally, clamping at the limit. Only
	// the leaky bucket supports it (Fillup).
	VerbFill
	// VerbReserve books the earliest instant at which the cost conforms,
	// if it is at most Op.MaxDelay from now, and records the cost as if
	// admitted at that instant. With MaxDelay 0 it is VerbAllow. The GCRA,
	// the leaky bucket and the token bucket support it (see reserve.go).
	VerbReserve
	// VerbCancel gives back a reservation that has not reached its instant,
	// Op.At, when nothing was booked after it on the key; on the
	// concurrency limit, it releases the live lease that Op.At names.
	VerbCancel
	// VerbAtMost admits the whole cost if it fits, and otherwise the most
	// whole units of it that fit (a partial grant); Decision.Granted says
	// how much.
	VerbAtMost
	// VerbExtend gives the concurrency limit's live lease that Op.At
	// names a new expiry, Params.Interval from now at the earliest, which
	// Decision.At returns: the lease's identity from then on.
	VerbExtend
	// VerbLeave takes the waiter whose ticket Op.At names out of the
	// concurrency limit's line, as a caller that stops waiting does;
	// Allowed reports whether it was waiting.
	VerbLeave
	// VerbExhaust records the key's whole limit as in use at Op.MaxDelay
	// from now, keeping what it holds beyond that: no cost is admitted
	// before that instant, and from it the key frees its allowance as
	// after a burst. It is how the answers of a rate-limited service (a
	// Retry-After, a remaining count near zero) slow down every client
	// that shares the key; it only ever makes the key fuller. The
	// decision describes the key afterwards, as a check of Op.Cost would.
	// The GCRA, the leaky bucket and the token bucket support it.
	VerbExhaust
	// VerbCharge records Op.Cost at the key's latest point whatever the key
	// holds, beyond its limit if need be (a debt the rate repays), as the
	// excess of a request's actual cost over the estimate it was admitted
	// with; Decision.Granted says what it recorded. The decision describes
	// the key afterwards, as a check of a zero cost would. The GCRA, the
	// leaky bucket and the token bucket support it (see settle.go).
	VerbCharge
	// VerbRefund gives back Op.Cost, at most what the key holds at its
	// latest point, as the part of a request's estimate that its actual
	// cost did not use; Decision.Granted says what it gave back. The
	// decision describes the key afterwards, as a check of a zero cost
	// would. The GCRA, the leaky bucket and the token bucket support it.
	VerbRefund
)

// String returns the verb's name as used in error messages.
func (v Verb) String() string {
	switch v {
	case VerbAllow:
		return "allow"
	case VerbCheck:
		return "check"
	case VerbFill:
		return "fill"
	case VerbReserve:
		return "reserve"
	case VerbCancel:
		return "cancel"
	case VerbAtMost:
		return "at most"
	case VerbExtend:
		return "extend"
	case VerbLeave:
		return "leave"
	case VerbExhaust:
		return "exhaust"
	case VerbCharge:
		return "charge"
	case VerbRefund:
		return "refund"
	}
	return "verb(" + strconv.Itoa(int(v)) + ")"
}

// Op is one decision requested from a [Store].
type Op struct {
	// Verb is what the decision does to the state.
	Verb Verb
	// Cost is the amount the request consumes: finite and not negative.
	Cost float64
	// Now is the caller's time in nanoseconds since the Unix epoch, from 0
	// to 2^62 (in 2116). A store that uses its own clock ignores it.
	Now int64
	// MaxDelay is, for VerbReserve, the longest the caller will wait for
	// its instant, in nanoseconds: from 0 to 2^60 (about 36 years); for
	// VerbExhaust, how long from now the key is full, in the same range. For
	// VerbAllow on the concurrency limit, it is the caller's patience: a
	// denied caller with a patience above zero waits in the key's line,
	// and keeps its place while it asks again within its patience.
	MaxDelay int64
	// At is, for VerbCancel, the instant the reservation was booked for, as
	// its Decision.At gave it: on the clock of the store that booked it.
	// For VerbReserve it is the earliest instant to book, zero for none:
	// a group of limits books each of them at one common instant. For a
	// release (VerbCancel) or VerbExtend on the concurrency limit, it is
	// the lease's identity, its Decision.At; for VerbAllow, VerbCheck and
	// VerbLeave on the concurrency limit, the caller's ticket in the key's
	// line, as a denied VerbAllow's Decision.At gave it (0 for none):
	// from 0 to 2^53.
	At int64
}

// State is the record a store keeps per key. Its meaning depends on the
// algorithm (see [Kind]); the zero State is a fresh key.
type State struct {
	// Time is the leaky bucket's last update, GCRA's theoretical arrival
	// time, the token bucket's last refill, a window's start (a calendar
	// window's end), or the latest expiry a concurrency limit handed out,
	// in nanoseconds since the Unix epoch.
	Time int64
	// A is the leaky bucket's level, the token bucket's tokens in use (so
	// that zero is a full bucket), the current window's count, the
	// latest ticket a concurrency limit's line handed out, or the
	// emission interval GCRA's Time was computed with (see "Limits that
	// change" in the package doc).
	A float64
	// B is the sliding counter's previous window count.
	B float64
	// Until is when a penalty's block ends (see Params.Penalty), in
	// nanoseconds since the Unix epoch; zero when the key is not blocked.
	Until int64
	// Log holds the sliding log's admitted requests, oldest first, or the
	// concurrency limit's live leases, earliest expiry first, and then its
	// waiters, first come first. Step may reuse its storage.
	Log []Entry
}

// Entry is one admitted request in a sliding log, or one lease or one
// waiter of a concurrency limit.
type Entry struct {
	// Time is when the request was admitted, when the lease expires, or
	// when the waiter leaves the line unless it asks again, in nanoseconds
	// since the Unix epoch.
	Time int64
	// Cost is what the request consumed or the lease holds; for a waiter,
	// minus its ticket.
	Cost float64
}

// Decision is a store's answer to an Op, as Step gives it: a store fills
// every field as Step does, bit for bit. It has sluice.Decision's fields,
// one for one, so that a limiter decides into its caller's Decision in
// place; their meaning for users is documented there. What a store must
// know besides:
type Decision struct {
	// Allowed reports whether the op was admitted (for VerbCheck, would
	// be; for VerbFill, whether the cost fitted below the limit).
	Allowed bool
	// Limit is Params.Limit.
	Limit float64
	// Used is the allowance in use after the op, clamped to [0, Limit].
	Used float64
	// Remaining is Limit - Used, never negative.
	Remaining float64
	// RetryAfter is how long until the same op would be admitted; zero
	// when it was.
	RetryAfter time.Duration
	// ResetAfter is how long until the key is fresh: a store may forget
	// it then.
	ResetAfter time.Duration
	// Delay is, for VerbReserve, how long from Now until the booked
	// reservation may act.
	Delay time.Duration
	// At is, for VerbReserve with Delay > 0, the instant booked, on the
	// clock the store decided by, which a VerbCancel hands back. It is zero
	// for a reservation that Op.At booked later than the GCRA or the
	// interval-refill bucket needed (in a group): their state cannot tell
	// it from a later booking, so it cannot be given back. For VerbAllow
	// and VerbExtend on the concurrency limit, it is the lease's expiry,
	// its identity, which a release or an extension hands back; zero when
	// no lease was taken. For a denied VerbAllow on the concurrency limit
	// with a patience (Op.MaxDelay), it is the caller's ticket in the
	// key's line, which its next try hands back; zero if the line was full.
	At int64
	// Granted is, for VerbAtMost, the cost admitted and recorded; for
	// VerbCharge, the cost recorded; for VerbRefund, the cost given back.
	Granted float64
	// Blocked reports that a penalty blocks the key (Params.Penalty).
	Blocked bool
}
