package vectors

import (
	"math"
	"time"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/arith"
)

// A recipe is one rule, as a case built for each algorithm it applies to.
type recipe struct {
	verb string // the verb the rule is about, as the case's name says it
	rule string // what the case pins
	// applies reports whether the rule is one of a's; nil for every
	// algorithm.
	applies func(a algorithm) bool
	// with sets the options the rule is about on a's Params, if any.
	with func(p *engine.Params)
	// everywhere builds the case from the epoch and up to the end of time
	// too: a rule whose arithmetic on times may break there.
	everywhere bool
	// build runs the case's ops from the builder's time.
	build func(b *builder)
}

// penalty is the block of the rules about penalties: not a multiple of
// any interval, so that a block's end is never a window's or a refill's.
const penalty = int64(1500 * time.Millisecond)

// patience is a waiter's in the concurrency limit's line.
const patience = int64(20 * time.Millisecond)

func withPenalty(p *engine.Params)        { p.Penalty = penalty }
func withCountDenied(p *engine.Params)    { p.CountDenied = true }
func withLongestPenalty(p *engine.Params) { p.Penalty = maxSpan }

// The algorithms a rule applies to.

func reservable(a algorithm) bool       { return a.p.Reservable() }
func unreservable(a algorithm) bool     { return !a.p.Reservable() }
func windowed(a algorithm) bool         { return !a.p.Reservable() && !leases(a) }
func leases(a algorithm) bool           { return a.p.Kind == engine.KindConcurrency }
func notLeases(a algorithm) bool        { return !leases(a) }
func leaky(a algorithm) bool            { return a.p.Kind == engine.KindLeakyBucket }
func notLeaky(a algorithm) bool         { return !leaky(a) }
func notGCRA(a algorithm) bool          { return a.p.Kind != engine.KindGCRA }
func intervalRefill(a algorithm) bool   { return a.p.IntervalRefill }
func strict(a algorithm) bool           { return a.strict }
func strictReservable(a algorithm) bool { return a.strict && a.p.Reservable() }
func strictLeaky(a algorithm) bool      { return a.strict && leaky(a) }

// continuous reports whether a is a reservable algorithm without options
// that frees its allowance continuously: the GCRA and the buckets that
// do not refill once per interval.
func continuous(a algorithm) bool { return !a.strict && a.p.Reservable() && !a.p.IntervalRefill }

// kind reports whether a is of kind k, anchored or not.
func kind(k engine.Kind, anchored bool) func(algorithm) bool {
	return func(a algorithm) bool { return a.p.Kind == k && a.p.Anchored == anchored }
}

// clamped reports whether a's amounts within the tolerance under the
// limit are the limit: not GCRA's, counted in whole nanoseconds, nor the
// sliding counter's estimate.
func clamped(a algorithm) bool {
	return a.p.Kind != engine.KindGCRA && a.p.Kind != engine.KindSlidingCounter
}

// meter reports whether a is a bucket that leaks or refills continuously,
// whose bookings of a later instant than needed can be given back.
func meter(a algorithm) bool {
	return a.p.Reservable() && a.p.Kind != engine.KindGCRA && !a.p.IntervalRefill
}

// pushedBack reports whether a counted denial moves a's next admission
// later: it does where the key frees its allowance continuously, not where
// it waits for a window's end or a refill's instant.
func pushedBack(a algorithm) bool {
	return a.strict && a.p.Reservable() && !a.p.IntervalRefill
}

// turn is the cost of one booking: one unit, or a whole refill of the
// interval-refill bucket, which books several units on one refill.
func (b *builder) turn() float64 {
	if b.c.Params.IntervalRefill {
		return b.c.Params.Amount
	}
	return 1
}

// horizon is a maximum delay long enough to book a few turns after a full
// key.
func (b *builder) horizon() int64 {
	return 10 * b.interval() * int64(math.Ceil(b.limit()+1))
}

// windowEnd returns the end of the epoch-aligned window holding now.
func (b *builder) windowEnd() int64 {
	return arith.FloorDiv(b.now, b.interval())*b.interval() + b.interval()
}

// invalidCosts is the recipe that refuses the costs a step never takes,
// for verb, and records nothing.
func invalidCosts(verb engine.Verb, applies func(algorithm) bool) recipe {
	return recipe{verb: verbName(verb), rule: "invalid-costs-are-refused", applies: applies, build: func(b *builder) {
		for _, cost := range []float64{math.NaN(), math.Inf(1), -1, -math.SmallestNonzeroFloat64} {
			op := b.op(verb, cost)
			switch verb {
			case engine.VerbReserve:
				op.MaxDelay = b.horizon()
			case engine.VerbCancel:
				op.At = b.now + b.interval()
			}
			b.refuse(op, engine.ErrInvalidCost)
		}
		b.expect(b.admit(b.allow(b.limit())).Remaining == 0, "the whole limit, nothing recorded")
	}}
}

// recipes are the rules the vectors pin, per verb, then per option.
var recipes = []recipe{
	// Admissions.
	{verb: "allow", rule: "exact-fit", everywhere: true, build: func(b *builder) {
		b.admit(b.allow(1))
		d := b.admit(b.allow(b.limit() - 1))
		b.expect(d.Remaining == 0 && d.Used == b.limit(), "the whole limit used")
		b.deny(b.allow(1))
	}},
	{verb: "allow", rule: "one-ulp-over-fits-within-tolerance", build: func(b *builder) {
		b.admit(b.allow(1))
		b.expect(b.admit(b.allow(up(b.limit()-1))).Remaining == 0, "the whole limit used")
	}},
	{verb: "allow", rule: "one-ulp-under-is-full", applies: clamped, build: func(b *builder) {
		b.admit(b.allow(1))
		b.expect(b.admit(b.allow(down(b.limit()-1))).Remaining == 0, "full within tolerance")
	}},
	{verb: "allow", rule: "twice-the-tolerance-over-is-denied", applies: notGCRA, build: func(b *builder) {
		b.admit(b.allow(1))
		b.deny(b.allow(b.limit() - 1 + 2*b.limit()*arith.Tolerance))
	}},
	{verb: "allow", rule: "a-nanosecond-over-is-denied", applies: kind(engine.KindGCRA, false), build: func(b *builder) {
		// GCRA counts in nanoseconds, rounded: one more than the room is
		// the least cost that does not fit.
		t := b.interval()
		room := arith.Nanos(b.limit(), t) - arith.Nanos(1, t)
		b.admit(b.allow(1))
		b.deny(b.allow(float64(room+1) / float64(t)))
	}},
	{verb: "allow", rule: "one-ulp-over-the-limit-is-refused", build: func(b *builder) {
		b.refuse(b.allow(up(b.limit())), engine.ErrCostExceedsLimit)
		b.admit(b.allow(b.limit()))
	}},
	{verb: "allow", rule: "retry-after-to-the-nanosecond", everywhere: true, build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		retry := b.deny(b.allow(1)).RetryAfter
		b.now += int64(retry) - 1
		b.expect(b.deny(b.allow(1)).RetryAfter == 1, "told to retry a nanosecond later")
		b.now++
		b.admit(b.allow(1))
	}},
	{verb: "allow", rule: "clock-stepping-back-never-loosens", build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		retry := b.deny(b.allow(1)).RetryAfter
		back := b.interval() / 2
		b.now -= back
		b.expect(b.deny(b.allow(1)).RetryAfter >= retry+time.Duration(back), "told to retry no earlier")
	}},
	{verb: "allow", rule: "zero-cost-fits-a-full-key", build: func(b *builder) {
		b.admit(b.allow(0))
		b.admit(b.allow(b.limit()))
		b.admit(b.allow(0))
	}},
	{verb: "allow", rule: "negative-zero-cost-is-zero", build: func(b *builder) {
		negZero := math.Copysign(0, -1)
		b.admit(b.allow(negZero))
		b.admit(b.allow(b.limit()))
		b.admit(b.allow(negZero))
	}},
	invalidCosts(engine.VerbAllow, nil),
	{verb: "allow", rule: "before-the-epoch-is-refused", build: func(b *builder) {
		b.now = -1
		b.refuse(b.allow(1), engine.ErrTimeOutOfRange)
		b.now = math.MinInt64
		b.refuse(b.allow(1), engine.ErrTimeOutOfRange)
		b.now = 0
		b.expect(b.admit(b.allow(b.limit())).Remaining == 0, "the whole limit at the epoch")
		b.deny(b.allow(1))
	}},
	{verb: "allow", rule: "after-the-end-of-time-is-refused", build: func(b *builder) {
		b.now = maxTime - b.interval()
		b.admit(b.allow(b.limit()))
		b.now = maxTime
		b.decide(b.allow(1))
		b.now = maxTime + 1
		b.refuse(b.allow(1), engine.ErrTimeOutOfRange)
		b.now = math.MaxInt64
		b.refuse(b.allow(1), engine.ErrTimeOutOfRange)
		b.now = maxTime
		b.decide(b.allow(0))
	}},

	// Window and refill edges.
	{verb: "allow", rule: "window-edge", applies: kind(engine.KindFixedWindow, false), everywhere: true, build: func(b *builder) {
		b.now = b.windowEnd() - 1
		b.admit(b.allow(b.limit()))
		b.expect(b.deny(b.allow(1)).RetryAfter == 1, "told to retry at the window's edge")
		b.now++
		b.expect(b.admit(b.allow(b.limit())).Remaining == 0, "the whole limit in the next window")
	}},
	{verb: "allow", rule: "window-edge", applies: kind(engine.KindFixedWindow, true), everywhere: true, build: func(b *builder) {
		start := b.now
		b.admit(b.allow(b.limit()))
		b.now = start + b.interval() - 1
		b.expect(b.deny(b.allow(1)).RetryAfter == 1, "told to retry at the window's edge")
		b.now++
		b.expect(b.admit(b.allow(b.limit())).Remaining == 0, "the whole limit in the next window")
	}},
	{verb: "allow", rule: "window-edge", applies: kind(engine.KindSlidingLog, false), everywhere: true, build: func(b *builder) {
		first := b.now
		b.admit(b.allow(1))
		b.now += b.interval() / 2
		b.admit(b.allow(b.limit() - 1))
		b.now = first + b.interval() - 1
		b.expect(b.deny(b.allow(1)).RetryAfter == 1, "told to retry when the first entry leaves")
		b.now++
		b.expect(b.admit(b.allow(1)).Remaining == 0, "the first entry's room")
	}},
	{verb: "allow", rule: "window-edge-carries-the-count-over", applies: kind(engine.KindSlidingCounter, false), everywhere: true,
		build: func(b *builder) {
			b.now = b.windowEnd() - 1
			b.admit(b.allow(b.limit()))
			b.now++
			b.deny(b.allow(1))
			b.now += b.interval()
			b.expect(b.admit(b.allow(b.limit())).Remaining == 0, "the whole limit two windows on")
		}},
	{verb: "allow", rule: "refill-edge", applies: intervalRefill, everywhere: true, build: func(b *builder) {
		start := b.now
		b.admit(b.allow(b.limit()))
		b.now = start + b.interval() - 1
		b.expect(b.deny(b.allow(1)).RetryAfter == 1, "told to retry at the refill")
		b.now++
		b.expect(b.admit(b.allow(b.c.Params.Amount)).Remaining == 0, "exactly one refill")
		b.deny(b.allow(1))
	}},
	{verb: "allow", rule: "refilled-within-tolerance-is-full", applies: intervalRefill, build: func(b *builder) {
		start := b.now
		b.admit(b.allow(up(2 * b.c.Params.Amount)))
		b.now = start + 2*b.interval()
		b.expect(b.admit(b.check(0)).Used == 0, "full")
	}},
	{verb: "allow", rule: "drained-within-tolerance-is-empty", applies: meter, build: func(b *builder) {
		// A cost that leaks in a whole millisecond and a residue of rounding.
		const ms = int64(time.Millisecond)
		rate := b.c.Params.Amount / float64(b.interval())
		cost := up(float64(ms) * rate)
		b.expect(cost-float64(ms)*rate > 0, "a residue")
		start := b.now
		b.expect(int64(b.admit(b.allow(cost)).ResetAfter) == ms, "fresh after the millisecond")
		b.now = start + ms
		b.expect(b.admit(b.check(0)).Used == 0, "empty")
	}},
	{verb: "allow", rule: "max-entries-merge-into-the-newest", applies: kind(engine.KindSlidingLog, false), build: func(b *builder) {
		// One entry more than the log keeps: the last two merge, and leave
		// the window with the newer one.
		start, m := b.now, int64(b.c.Params.MaxEntries)
		for i := range m + 1 {
			b.now = start + i
			b.admit(b.allow(0.5))
		}
		b.now = start + b.interval() + m - 1
		b.expect(b.admit(b.allow(b.limit()-1)).Remaining == 0, "the merged entry still counted")
		b.now++
		b.expect(b.admit(b.allow(1)).Remaining == 0, "the merged entry gone")
	}},

	// Checks.
	{verb: "check", rule: "records-nothing", build: func(b *builder) {
		b.admit(b.check(b.limit()))
		b.admit(b.check(b.limit()))
		b.admit(b.allow(b.limit()))
		retry := b.deny(b.check(1)).RetryAfter
		b.expect(b.deny(b.allow(1)).RetryAfter == retry, "decided as an Allow")
		b.admit(b.check(0))
	}},
	{verb: "check", rule: "one-ulp-over-the-limit-is-refused", build: func(b *builder) {
		b.refuse(b.check(up(b.limit())), engine.ErrCostExceedsLimit)
	}},
	invalidCosts(engine.VerbCheck, nil),

	// Partial grants.
	{verb: "at-most", rule: "whole-cost-fits", applies: notLeases, build: func(b *builder) {
		b.expect(b.admit(b.atMost(b.limit())).Granted == b.limit(), "granted whole")
	}},
	{verb: "at-most", rule: "grants-the-whole-units-left", applies: notLeases, everywhere: true, build: func(b *builder) {
		b.admit(b.allow(0.5))
		b.expect(b.admit(b.atMost(b.limit())).Granted == math.Floor(b.limit()-0.5), "granted the whole units left")
	}},
	{verb: "at-most", rule: "nothing-is-not-allowed", applies: notLeases, build: func(b *builder) {
		d := b.deny(b.atMost(0))
		b.expect(d.Granted == 0 && d.Remaining == b.limit(), "nothing granted nor recorded")
	}},
	{verb: "at-most", rule: "above-the-limit-grants-what-fits", applies: notLeases, build: func(b *builder) {
		b.expect(b.admit(b.atMost(b.limit()+1)).Granted == math.Floor(b.limit()), "granted the whole units of the limit")
	}},
	{verb: "at-most", rule: "nothing-fits", applies: notLeases, build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		d := b.deny(b.atMost(2))
		b.expect(d.Granted == 0 && d.RetryAfter == b.deny(b.allow(1)).RetryAfter, "decided as one unit")
	}},
	{verb: "at-most", rule: "one-ulp-over-the-room-is-granted-whole", applies: notLeases, build: func(b *builder) {
		b.admit(b.allow(1))
		cost := up(b.limit() - 1)
		b.expect(b.admit(b.atMost(cost)).Granted == cost, "granted whole")
	}},
	{verb: "at-most", rule: "above-a-limit-below-one-unit-is-refused", applies: strict,
		with: func(p *engine.Params) { p.Limit = 0.5 }, build: func(b *builder) {
			b.refuse(b.atMost(1), engine.ErrCostExceedsLimit)
			b.expect(b.admit(b.atMost(0.5)).Granted == 0.5, "granted whole")
		}},
	invalidCosts(engine.VerbAtMost, nil),

	// Fill-ups.
	{verb: "fill", rule: "exact-fit", applies: leaky, build: func(b *builder) {
		b.expect(b.admit(b.fill(b.limit())).Used == b.limit(), "full")
		b.deny(b.allow(1))
	}},
	{verb: "fill", rule: "one-ulp-over-fits-within-tolerance", applies: leaky, build: func(b *builder) {
		b.admit(b.fill(1))
		b.admit(b.fill(up(b.limit() - 1)))
	}},
	{verb: "fill", rule: "past-capacity-clamps", applies: leaky, build: func(b *builder) {
		b.admit(b.fill(b.limit() - 1))
		b.expect(b.deny(b.fill(2)).Used == b.limit(), "full, not above")
	}},
	{verb: "fill", rule: "above-the-limit-is-recorded", applies: leaky, build: func(b *builder) {
		b.expect(b.deny(b.fill(b.limit()+1)).Used == b.limit(), "full, not above")
		b.deny(b.allow(1))
	}},
	invalidCosts(engine.VerbFill, leaky),
	{verb: "fill", rule: "is-unsupported", applies: notLeaky, build: func(b *builder) {
		b.refuse(b.fill(1), engine.ErrUnsupported)
		b.admit(b.allow(b.limit()))
	}},

	// Reservations and cancels.
	{verb: "reserve", rule: "max-delay-zero-is-allow", applies: reservable, build: func(b *builder) {
		d := b.admit(b.reserve(b.limit(), 0))
		b.expect(d.Delay == 0 && d.At == 0, "admitted now")
		retry := b.deny(b.reserve(1, 0)).RetryAfter
		b.expect(b.deny(b.allow(1)).RetryAfter == retry, "decided as an Allow")
	}},
	{verb: "reserve", rule: "max-delay-exactly-the-wait", applies: reservable, everywhere: true, build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		wait := int64(b.deny(b.reserve(1, 0)).RetryAfter)
		b.expect(b.deny(b.reserve(1, wait-1)).RetryAfter == 1, "a nanosecond short")
		d := b.admit(b.reserve(1, wait))
		b.expect(int64(d.Delay) == wait && d.At == b.now+wait, "booked at the end of its maximum delay")
	}},
	{verb: "reserve", rule: "booking-a-nanosecond-late", applies: reservable, everywhere: true, build: func(b *builder) {
		// A cancel gives its turn back a nanosecond late: the turn booked
		// again is a nanosecond later, which the same cancel, retried,
		// cannot mistake for its own.
		b.admit(b.allow(b.limit()))
		first := b.admit(b.reserve(b.turn(), b.horizon()))
		last := b.admit(b.reserve(b.turn(), b.horizon()))
		b.expect(first.At < last.At, "booked after the first")
		b.admit(b.cancel(b.turn(), last.At))
		b.expect(b.admit(b.reserve(b.turn(), b.horizon())).At == last.At+1, "booked a nanosecond late")
		b.deny(b.cancel(b.turn(), last.At))
	}},
	{verb: "cancel", rule: "a-booking-followed-by-another-is-kept", applies: reservable, build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		first := b.admit(b.reserve(b.turn(), b.horizon()))
		last := b.admit(b.reserve(b.turn(), b.horizon()))
		b.deny(b.cancel(b.turn(), first.At))
		b.admit(b.cancel(b.turn(), last.At))
	}},
	{verb: "cancel", rule: "at-its-instant-is-too-late", applies: reservable, build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		d := b.admit(b.reserve(b.turn(), b.horizon()))
		b.now = d.At
		b.deny(b.cancel(b.turn(), d.At))
	}},
	{verb: "cancel", rule: "a-nanosecond-before-its-instant-is-given-back", applies: reservable, everywhere: true, build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		d := b.admit(b.reserve(b.turn(), b.horizon()))
		b.now = d.At - 1
		b.admit(b.cancel(b.turn(), d.At))
	}},
	{verb: "cancel", rule: "of-more-than-was-booked-leaves-the-booking-empty", applies: meter, build: func(b *builder) {
		op := b.reserve(b.turn(), b.horizon())
		op.At = b.now + b.interval()
		b.admit(op)
		b.admit(b.cancel(b.limit(), op.At))
		b.decide(b.check(b.limit()))
		b.decide(b.allow(b.limit()))
	}},
	{verb: "cancel", rule: "of-nothing-booked-gives-nothing-back", applies: reservable, build: func(b *builder) {
		b.deny(b.cancel(1, b.now+b.interval()))
		b.expect(b.admit(b.allow(b.limit())).Remaining == 0, "the whole limit, not more")
	}},
	{verb: "cancel", rule: "instant-beyond-2-to-the-62-plus-2-to-the-60-ns-is-refused", applies: reservable, build: func(b *builder) {
		b.deny(b.cancel(1, maxTime+maxSpan))
		b.refuse(b.cancel(1, maxTime+maxSpan+1), engine.ErrTimeOutOfRange)
		b.refuse(b.cancel(1, -1), engine.ErrTimeOutOfRange)
	}},
	{verb: "reserve", rule: "at-books-no-earlier-than-asked", applies: reservable, build: func(b *builder) {
		op := b.reserve(b.turn(), b.horizon())
		op.At = b.now + b.interval()
		b.expect(int64(b.admit(op).Delay) == b.interval(), "booked at the instant asked")
		b.decide(b.cancel(b.turn(), op.At))
	}},
	{verb: "reserve", rule: "at-beyond-2-to-the-62-plus-2-to-the-60-ns-is-refused", applies: reservable, build: func(b *builder) {
		op := b.reserve(1, maxSpan)
		op.At = maxTime + maxSpan
		b.deny(op)
		op.At++
		b.refuse(op, engine.ErrTimeOutOfRange)
		op.At = -1
		b.refuse(op, engine.ErrTimeOutOfRange)
	}},
	{verb: "reserve", rule: "max-delay-beyond-2-to-the-60-ns-is-refused", applies: reservable, build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		b.admit(b.reserve(1, maxSpan))
		b.refuse(b.reserve(1, maxSpan+1), engine.ErrInvalidDelay)
		b.refuse(b.reserve(1, -1), engine.ErrInvalidDelay)
	}},
	{verb: "reserve", rule: "one-ulp-over-the-limit-is-refused", applies: reservable, build: func(b *builder) {
		b.refuse(b.reserve(up(b.limit()), b.horizon()), engine.ErrCostExceedsLimit)
		b.admit(b.allow(b.limit()))
	}},
	{verb: "reserve", rule: "booked-past-the-end-of-time", applies: reservable, build: func(b *builder) {
		b.now = maxTime
		b.admit(b.allow(b.limit()))
		d := b.admit(b.reserve(b.turn(), maxSpan))
		b.expect(d.At > maxTime, "booked after the latest time")
		b.admit(b.cancel(b.turn(), d.At))
		b.expect(b.admit(b.reserve(b.turn(), maxSpan)).At == d.At+1, "booked a nanosecond late")
	}},
	{verb: "reserve", rule: "latest-instant-at-the-end-of-time", applies: reservable, build: func(b *builder) {
		b.now = maxTime
		op := b.reserve(b.limit(), maxSpan)
		op.At = maxTime + maxSpan
		d := b.admit(op)
		b.expect(int64(d.Delay) == maxSpan, "booked at the latest instant")
		b.decide(b.cancel(b.limit(), op.At))
	}},
	// Exhausts.
	{verb: "exhaust", rule: "nothing-fits-before-the-instant", applies: reservable, everywhere: true, build: func(b *builder) {
		start, delay := b.now, 3*b.interval()
		b.expect(!b.decide(b.exhaust(b.turn(), delay)).Allowed, "described as full")
		b.now = start + delay - 1
		b.deny(b.allow(b.turn()))
		b.deny(b.reserve(b.turn(), 0))
		retry := int64(b.deny(b.allow(b.turn())).RetryAfter)
		b.expect(b.now+retry > start+delay-1, "told to retry after the instant")
		b.now += retry
		b.admit(b.allow(b.turn()))
	}},
	{verb: "exhaust", rule: "now-is-a-burst-spent-now", applies: continuous, build: func(b *builder) {
		b.decide(b.exhaust(0, 0))
		retry := b.deny(b.allow(b.turn())).RetryAfter
		b.now += int64(b.decide(b.check(0)).ResetAfter)
		b.admit(b.allow(b.limit()))
		b.expect(b.deny(b.allow(b.turn())).RetryAfter == retry, "as after the whole limit at once")
	}},
	{verb: "exhaust", rule: "never-frees-what-the-key-holds", applies: reservable, build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		late := b.admit(b.reserve(b.turn(), b.horizon()))
		d := b.decide(b.exhaust(b.turn(), 0))
		b.expect(!d.Allowed && d.RetryAfter >= late.Delay, "the booking kept")
		b.admit(b.cancel(b.turn(), late.At))
	}},
	{verb: "exhaust", rule: "a-later-instant-moves-the-key-later", applies: reservable, build: func(b *builder) {
		first := b.decide(b.exhaust(b.turn(), b.interval())).RetryAfter
		b.expect(b.decide(b.exhaust(b.turn(), 5*b.interval())).RetryAfter > first, "later")
		b.expect(b.decide(b.exhaust(b.turn(), b.interval())).RetryAfter > first, "an earlier instant changes nothing")
	}},
	{verb: "exhaust", rule: "keeps-a-block", applies: strictReservable, with: withPenalty, build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		b.expect(b.deny(b.allow(b.turn())).Blocked, "blocked")
		d := b.decide(b.exhaust(0, 0))
		b.expect(d.Blocked && d.ResetAfter >= time.Duration(penalty), "the block kept, and reported")
		b.now += penalty - 1
		b.expect(b.deny(b.allow(0)).Blocked, "blocked to its end")
	}},
	{verb: "exhaust", rule: "delay-beyond-2-to-the-60-ns-is-refused", applies: reservable, build: func(b *builder) {
		b.decide(b.exhaust(1, maxSpan))
		b.refuse(b.exhaust(1, maxSpan+1), engine.ErrInvalidDelay)
		b.refuse(b.exhaust(1, -1), engine.ErrInvalidDelay)
	}},
	{verb: "exhaust", rule: "at-the-end-of-time", applies: reservable, build: func(b *builder) {
		b.now = maxTime
		b.decide(b.exhaust(b.limit(), maxSpan))
		b.decide(b.check(b.limit()))
	}},
	{verb: "exhaust", rule: "one-ulp-over-the-limit-is-refused", applies: reservable, build: func(b *builder) {
		b.refuse(b.exhaust(up(b.limit()), 0), engine.ErrCostExceedsLimit)
		b.admit(b.allow(b.limit()))
	}},
	invalidCosts(engine.VerbExhaust, reservable),
	{verb: "exhaust", rule: "is-unsupported", applies: unreservable, build: func(b *builder) {
		b.refuse(b.exhaust(1, b.interval()), engine.ErrUnsupported)
		b.admit(b.allow(b.limit()))
	}},

	// Settlements: a charge of the excess, a refund of what was not used.
	{verb: "charge", rule: "debt-admits-nothing-until-repaid", applies: reservable, everywhere: true, build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		d := b.decide(b.charge(b.limit()))
		b.expect(!d.Allowed && d.Granted == b.limit() && d.Remaining == 0, "in debt, all of it recorded")
		b.now += int64(d.RetryAfter) - 1
		b.deny(b.allow(0))
		b.now++
		b.admit(b.allow(0))
		b.deny(b.allow(b.turn()))
	}},
	{verb: "charge", rule: "a-charge-of-nothing-changes-nothing", applies: reservable, build: func(b *builder) {
		b.admit(b.allow(b.turn()))
		d := b.decide(b.charge(0))
		b.expect(d.Allowed && d.Granted == 0, "nothing recorded")
		b.admit(b.allow(b.limit() - b.turn()))
	}},
	{verb: "charge", rule: "a-key-holds-at-most-2-to-the-60-ns-of-its-rate", applies: reservable, build: func(b *builder) {
		huge := math.Ldexp(1, 1000)
		d := b.decide(b.charge(huge))
		b.expect(d.Granted > 0 && d.Granted < huge && d.RetryAfter > 0, "charged up to the ceiling")
		b.expect(b.decide(b.charge(1)).Granted == 0, "nothing beyond the ceiling")
		b.expect(b.decide(b.refund(huge)).Granted == d.Granted, "all of it given back")
		b.admit(b.allow(b.limit()))
	}},
	{verb: "charge", rule: "at-the-end-of-time", applies: reservable, build: func(b *builder) {
		b.now = maxTime
		b.decide(b.charge(math.Ldexp(1, 1000)))
		b.decide(b.refund(b.limit()))
	}},
	{verb: "charge", rule: "keeps-a-block", applies: strictReservable, with: withPenalty, build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		b.expect(b.deny(b.allow(b.turn())).Blocked, "blocked")
		b.expect(b.decide(b.charge(b.turn())).Blocked, "the block reported")
		d := b.decide(b.refund(b.limit() + b.turn()))
		b.expect(d.Blocked && d.ResetAfter >= time.Duration(penalty), "the block kept")
		b.now += penalty - 1
		b.expect(b.deny(b.allow(0)).Blocked, "blocked to its end")
		b.now++
		b.admit(b.allow(b.limit()))
	}},
	{verb: "refund", rule: "gives-back-what-was-not-used", applies: reservable, everywhere: true, build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		b.deny(b.allow(b.turn()))
		d := b.decide(b.refund(b.turn()))
		b.expect(d.Allowed && d.Granted == b.turn(), "given back")
		b.admit(b.allow(b.turn()))
		b.deny(b.allow(b.turn()))
	}},
	{verb: "refund", rule: "never-below-empty", applies: reservable, build: func(b *builder) {
		b.expect(b.decide(b.refund(b.limit())).Granted == 0, "a fresh key gives nothing back")
		b.admit(b.allow(b.turn()))
		d := b.decide(b.refund(b.limit()))
		b.expect(d.Granted <= b.turn() && d.Remaining == b.limit(), "no more than it held")
		b.admit(b.allow(b.limit()))
		b.deny(b.allow(b.turn()))
	}},
	{verb: "refund", rule: "after-time-has-passed-gives-back-what-is-left", applies: continuous, build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		b.now += int64(b.decide(b.check(0)).ResetAfter) / 2
		d := b.decide(b.refund(b.limit()))
		b.expect(d.Granted < b.limit() && d.Remaining == b.limit(), "what was left")
	}},
	{verb: "refund", rule: "keeps-a-booking-ahead", applies: reservable, build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		late := b.admit(b.reserve(b.turn(), b.horizon()))
		b.expect(b.decide(b.refund(b.turn())).Granted == b.turn(), "given back at the booking's point")
		b.deny(b.allow(b.turn()))
		b.decide(b.cancel(b.turn(), late.At)) // the GCRA cannot tell the booking's TAT any more
		b.now = late.At
		b.admit(b.allow(b.turn()))
	}},
	{verb: "refund", rule: "a-debt-is-given-back", applies: reservable, build: func(b *builder) {
		b.decide(b.charge(3 * b.limit()))
		b.expect(b.decide(b.refund(2*b.limit())).Granted == 2*b.limit(), "the debt given back")
		b.deny(b.allow(b.turn()))
	}},
	{verb: "refund", rule: "emptying-a-blocked-key-forgets-its-state", applies: strictReservable, with: withPenalty, build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		b.expect(b.deny(b.allow(b.turn())).Blocked, "blocked")
		b.now += b.interval() / 100
		b.expect(b.decide(b.refund(2*b.limit())).Blocked, "the block kept")
		for _, back := range []int64{1, b.interval() / 1000, b.interval() / 300} {
			b.now -= back
			b.expect(b.deny(b.check(b.turn())).Used == 0, "nothing held on a clock stepped back")
			b.now += back
		}
	}},
	{verb: "charge", rule: "a-debt-read-under-a-slower-limit-waits-at-most-the-span", applies: reservableBucket, build: func(b *builder) {
		b.expect(b.decide(b.charge(math.Ldexp(1, 1000))).Granted > 0, "charged up to the ceiling")
		b.as(b.changed(func(q *engine.Params) { q.Amount /= 1000 }))
		b.now++
		d := b.decide(b.check(b.turn()))
		b.expect(int64(d.RetryAfter) <= maxSpan+b.interval(), "a wait of the span and an interval at most")
		for _, op := range []engine.Op{b.allow(b.turn()), b.reserve(b.turn(), maxSpan), b.atMost(2 * b.turn()),
			b.exhaust(b.turn(), b.interval()), b.refund(b.turn()), b.charge(b.turn()), b.check(0)} {
			b.now++
			op.Now = b.now
			b.decide(op)
		}
		b.as(b.c.Params)
		b.now++
		b.decide(b.check(b.turn()))
	}},
	{verb: "charge", rule: "counted-denials-of-a-key-in-debt-still-wait", applies: named("leaky-bucket"), build: func(b *builder) {
		b.as(engine.Params{Kind: engine.KindLeakyBucket, Limit: 1000, Interval: int64(30 * 24 * time.Hour), Amount: 1000, CountDenied: true})
		b.admit(b.allow(1000))
		repaid := b.now + int64(b.decide(b.charge(363.0829005897392)).RetryAfter)
		late := 0
		for b.now = repaid - 30; b.now <= repaid+30; b.now++ {
			if d := b.decide(b.allow(0)); !d.Allowed && d.RetryAfter == 1 {
				late++
			}
		}
		b.expect(late > 0, "a denial decided again to fit, told to wait a nanosecond")
	}},
	invalidCosts(engine.VerbCharge, reservable),
	invalidCosts(engine.VerbRefund, reservable),
	{verb: "charge", rule: "is-unsupported", applies: unreservable, build: func(b *builder) {
		b.refuse(b.charge(1), engine.ErrUnsupported)
		b.refuse(b.refund(1), engine.ErrUnsupported)
		b.admit(b.allow(b.limit()))
	}},

	invalidCosts(engine.VerbReserve, reservable),
	invalidCosts(engine.VerbCancel, func(a algorithm) bool { return reservable(a) || leases(a) }),
	invalidCosts(engine.VerbExtend, leases),
	{verb: "reserve", rule: "is-unsupported", applies: unreservable, build: func(b *builder) {
		b.refuse(b.reserve(1, b.interval()), engine.ErrUnsupported)
		b.admit(b.allow(b.limit()))
	}},
	{verb: "cancel", rule: "is-unsupported", applies: windowed, build: func(b *builder) {
		b.refuse(b.cancel(1, b.now+b.interval()), engine.ErrUnsupported)
	}},
	{verb: "at-most", rule: "is-unsupported", applies: leases, build: func(b *builder) {
		b.refuse(b.atMost(1), engine.ErrUnsupported)
		b.admit(b.allow(b.limit()))
	}},
	{verb: "extend", rule: "is-unsupported", applies: notLeases, build: func(b *builder) {
		b.refuse(b.extend(b.now+b.interval()), engine.ErrUnsupported)
		b.admit(b.allow(b.limit()))
	}},

	// Leases: the concurrency limit.
	{verb: "allow", rule: "leases-expire-by-themselves", applies: leases, everywhere: true, build: func(b *builder) {
		b.admit(b.allow(1))
		d := b.admit(b.allow(b.limit() - 1))
		b.expect(d.At == b.now+b.interval()+1, "the second lease of an instant expires a nanosecond after the first")
		b.expect(int64(b.deny(b.allow(1)).RetryAfter) == b.interval(), "told to retry when the first expires")
		b.now += b.interval() - 1
		b.expect(b.deny(b.allow(1)).RetryAfter == 1, "told to retry a nanosecond later")
		b.now++
		b.admit(b.allow(1))
	}},
	{verb: "allow", rule: "max-entries-bound-the-leases", applies: leases, build: func(b *builder) {
		small := b.limit() / 16
		for range b.c.Params.MaxEntries {
			b.admit(b.allow(small))
			b.now += 1000
		}
		d := b.deny(b.allow(small))
		b.expect(int64(d.RetryAfter) == b.interval()-1000*int64(b.c.Params.MaxEntries), "told to retry when the first lease expires")
		b.admit(b.allow(0))
	}},
	{verb: "check", rule: "takes-no-lease", applies: leases, build: func(b *builder) {
		b.expect(b.admit(b.check(b.limit())).At == 0, "no lease taken")
		b.admit(b.allow(b.limit()))
	}},
	{verb: "cancel", rule: "releases-the-lease", applies: leases, everywhere: true, build: func(b *builder) {
		first := b.admit(b.allow(1)).At
		b.admit(b.allow(b.limit() - 1))
		b.deny(b.allow(1))
		b.now += 5
		b.expect(b.admit(b.release(first)).Used == b.limit()-1, "its cost released")
		b.admit(b.allow(1))
	}},
	{verb: "cancel", rule: "releasing-twice-is-harmless", applies: leases, build: func(b *builder) {
		at := b.admit(b.allow(b.limit())).At
		b.admit(b.release(at))
		b.expect(b.deny(b.release(at)).Used == 0, "nothing more released")
		b.admit(b.allow(b.limit()))
	}},
	{verb: "cancel", rule: "after-expiry-is-harmless", applies: leases, everywhere: true, build: func(b *builder) {
		at := b.admit(b.allow(b.limit())).At
		b.now = at - 1
		b.deny(b.check(b.limit() / 2))
		b.now = at
		b.deny(b.release(at))
		b.admit(b.allow(b.limit()))
	}},
	{verb: "cancel", rule: "a-released-identity-is-never-handed-out-again", applies: leases, build: func(b *builder) {
		old := b.admit(b.allow(1)).At
		b.admit(b.release(old))
		b.expect(b.admit(b.allow(1)).At == old+1, "the next identity")
		b.deny(b.release(old))
	}},
	{verb: "cancel", rule: "of-an-unknown-identity-releases-nothing", applies: leases, build: func(b *builder) {
		at := b.admit(b.allow(b.limit())).At
		b.deny(b.release(at - 1))
		b.deny(b.release(at + 1))
		b.deny(b.release(0))
		b.deny(b.allow(1))
	}},
	{verb: "cancel", rule: "lease-instant-beyond-2-to-the-62-plus-2-to-the-61-ns-is-refused", applies: leases, build: func(b *builder) {
		b.deny(b.release(maxTime + 2*maxSpan))
		b.refuse(b.release(maxTime+2*maxSpan+1), engine.ErrTimeOutOfRange)
		b.refuse(b.release(-1), engine.ErrTimeOutOfRange)
	}},
	{verb: "extend", rule: "moves-the-expiry", applies: leases, everywhere: true, build: func(b *builder) {
		at := b.admit(b.allow(b.limit())).At
		b.now += b.interval() / 2
		d := b.admit(b.extend(at))
		b.expect(d.At == b.now+b.interval() && d.Used == b.limit(), "held a time to live from now")
		b.now = at
		b.deny(b.allow(1))
		b.deny(b.extend(at))
		b.now = d.At
		b.admit(b.allow(b.limit()))
	}},
	{verb: "extend", rule: "after-expiry-is-harmless", applies: leases, build: func(b *builder) {
		at := b.admit(b.allow(b.limit())).At
		b.now = at
		b.deny(b.extend(at))
		b.admit(b.allow(b.limit()))
	}},
	{verb: "extend", rule: "keeps-the-leases-in-order-of-expiry", applies: leases, build: func(b *builder) {
		first := b.admit(b.allow(1)).At
		b.now += 10
		b.admit(b.allow(1))
		b.now += 10
		moved := b.admit(b.extend(first)).At
		b.now = first + 10
		b.expect(b.admit(b.check(0)).Used == 1, "the second lease expired, the first extended")
		b.now = moved
		b.expect(b.admit(b.check(0)).Used == 0, "every lease expired")
	}},
	{verb: "extend", rule: "instant-beyond-2-to-the-62-plus-2-to-the-61-ns-is-refused", applies: leases, build: func(b *builder) {
		b.deny(b.extend(maxTime + 2*maxSpan))
		b.refuse(b.extend(maxTime+2*maxSpan+1), engine.ErrTimeOutOfRange)
	}},
	// The line of a concurrency limit's waiters.
	{verb: "allow", rule: "line-serves-waiters-in-the-order-they-joined", applies: leases, everywhere: true, build: func(b *builder) {
		all := b.limit()
		held := b.admit(b.wait(all, 0, patience)).At
		first := b.deny(b.wait(all, 0, patience)).At
		second := b.deny(b.wait(all, 0, patience)).At
		b.expect(first == 1 && second == 2, "tickets 1 and 2")
		b.now += 5
		b.admit(b.release(held))
		b.expect(int64(b.deny(b.wait(all, second, patience)).RetryAfter) == patience-5, "told to retry when the first could have left")
		b.deny(b.allow(1))
		b.deny(b.check(0))
		b.admit(b.checkAs(all, first))
		held = b.admit(b.wait(all, first, patience)).At
		b.now++
		b.deny(b.wait(all, second, patience))
		b.admit(b.release(held))
		b.admit(b.wait(1, second, patience))
		b.admit(b.check(0))
	}},
	{verb: "allow", rule: "line-keeps-a-place-asked-for-within-its-patience", applies: leases, build: func(b *builder) {
		held := b.admit(b.allow(b.limit())).At
		first := b.deny(b.wait(1, 0, patience)).At
		b.now++
		second := b.deny(b.wait(1, 0, patience)).At
		b.now += patience - 2
		b.expect(b.deny(b.wait(1, first, patience)).At == first, "its place kept")
		b.now++
		b.expect(b.deny(b.wait(1, second, patience)).At == second, "its place kept, at the first's old deadline")
		b.admit(b.release(held))
		b.deny(b.wait(1, second, patience))
		b.admit(b.wait(1, first, 1))
	}},
	{verb: "allow", rule: "line-passes-over-a-waiter-at-its-deadline", applies: leases, everywhere: true, build: func(b *builder) {
		all := b.limit()
		held := b.admit(b.allow(all)).At
		gone := b.deny(b.wait(all, 0, patience)).At
		b.now++
		next := b.deny(b.wait(all, 0, patience)).At
		b.admit(b.release(held))
		b.now += patience - 2
		b.deny(b.wait(all, next, patience))
		b.now++
		b.admit(b.wait(all, next, patience))
		b.expect(b.deny(b.wait(all, gone, patience)).At == next+1, "a waiter that came back late joins again, last")
	}},
	{verb: "allow", rule: "line-is-bounded-by-max-entries", applies: leases, build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		for i := range b.c.Params.MaxEntries {
			b.expect(b.deny(b.wait(1, 0, patience)).At == int64(i+1), "the next ticket")
		}
		b.expect(b.deny(b.wait(1, 0, patience)).At == 0, "no place in a full line")
		b.now += patience
		b.expect(b.deny(b.wait(1, 0, patience)).At == int64(b.c.Params.MaxEntries+1), "a place once the line has left")
	}},
	{verb: "allow", rule: "a-served-waiter-of-no-cost-leaves-the-line", applies: leases, build: func(b *builder) {
		held := b.admit(b.allow(b.limit())).At
		first := b.deny(b.wait(1, 0, patience)).At
		second := b.deny(b.wait(1, 0, patience)).At
		b.expect(b.admit(b.wait(0, first, patience)).At == 0, "served, no lease taken")
		b.admit(b.release(held))
		b.admit(b.wait(1, second, patience))
	}},
	{verb: "allow", rule: "line-keeps-the-key-until-its-last-deadline", applies: leases, everywhere: true, build: func(b *builder) {
		held := b.admit(b.allow(b.limit())).At
		long := b.interval() + 100
		w := b.deny(b.wait(1, 0, long))
		b.expect(int64(w.ResetAfter) == long, "until the waiter's deadline")
		b.now = held
		b.admit(b.wait(1, w.At, long))
		b.now += b.interval()
		b.deny(b.leave(w.At))
		b.admit(b.allow(1))
	}},
	{verb: "allow", rule: "tickets-start-again-on-a-fresh-key", applies: leases, everywhere: true, build: func(b *builder) {
		held := b.admit(b.allow(b.limit())).At
		b.expect(b.deny(b.wait(1, 0, patience)).At == 1, "ticket 1")
		b.expect(b.deny(b.wait(1, 0, patience)).At == 2, "ticket 2")
		b.now = held - 1 // the waiters gone, the lease not yet
		b.expect(b.deny(b.wait(1, 0, patience)).At == 3, "ticket 3: the key is not fresh")
		b.now = held + patience // fresh again, kept or forgotten
		b.deny(b.leave(1))
		b.admit(b.allow(b.limit()))
		b.expect(b.deny(b.wait(1, 0, patience)).At == 1, "ticket 1 again")
	}},
	{verb: "allow", rule: "line-counts-every-deadline-after-leases-expire-ahead-of-it", applies: leases, build: func(b *builder) {
		half := b.limit() / 2
		b.admit(b.allow(half))
		b.now += 50
		late := b.admit(b.allow(half)).At
		long := b.deny(b.wait(b.limit(), 0, 2*b.interval()))
		b.now = late - 10 // the first lease has expired: the log is rewritten
		short := b.deny(b.wait(b.limit(), 0, 5))
		b.expect(short.ResetAfter == long.ResetAfter-time.Duration(late-10-(late-b.interval())), "until the first waiter's deadline")
		b.expect(b.deny(b.wait(b.limit(), long.At, 5)).ResetAfter == 10, "until the lease's expiry, the first waiter's old deadline gone")
	}},
	{verb: "leave", rule: "takes-the-waiter-out-of-line", applies: leases, everywhere: true, build: func(b *builder) {
		held := b.admit(b.allow(b.limit())).At
		first := b.deny(b.wait(1, 0, patience)).At
		second := b.deny(b.wait(1, 0, patience)).At
		b.admit(b.leave(first))
		b.deny(b.leave(first))
		b.deny(b.leave(second + 1))
		b.deny(b.leave(0))
		b.admit(b.release(held))
		b.admit(b.wait(1, second, patience))
		b.deny(b.leave(second))
	}},
	{verb: "leave", rule: "is-unsupported", applies: notLeases, build: func(b *builder) {
		b.refuse(b.leave(1), engine.ErrUnsupported)
		b.admit(b.allow(b.limit()))
	}},
	{verb: "allow", rule: "ticket-beyond-2-to-the-53-is-refused", applies: leases, build: func(b *builder) {
		b.admit(b.wait(1, 1<<53, patience))
		b.refuse(b.wait(1, 1<<53+1, patience), engine.ErrInvalidConfig)
		b.refuse(b.wait(1, -1, patience), engine.ErrInvalidConfig)
		b.refuse(b.checkAs(1, -1), engine.ErrInvalidConfig)
		b.refuse(b.leave(1<<53+1), engine.ErrInvalidConfig)
	}},
	{verb: "allow", rule: "patience-beyond-2-to-the-60-ns-is-refused", applies: leases, build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		b.expect(int64(b.deny(b.wait(1, 0, maxSpan)).ResetAfter) == maxSpan, "waits as long as it says")
		b.refuse(b.wait(1, 0, maxSpan+1), engine.ErrInvalidDelay)
		b.refuse(b.wait(1, 0, -1), engine.ErrInvalidDelay)
	}},
	{verb: "allow", rule: "penalty-is-invalid", applies: leases, with: withPenalty, build: func(b *builder) {
		b.refuse(b.allow(1), engine.ErrInvalidConfig)
	}},
	{verb: "allow", rule: "count-denied-is-invalid", applies: leases, with: withCountDenied, build: func(b *builder) {
		b.refuse(b.allow(1), engine.ErrInvalidConfig)
	}},
	{verb: "unknown-verb", rule: "is-unsupported", build: func(b *builder) {
		b.refuse(b.op(0, 1), engine.ErrUnsupported)
		b.refuse(b.op(engine.VerbRefund+1, 1), engine.ErrUnsupported)
		b.admit(b.allow(b.limit()))
	}},

	// Penalties.
	{verb: "allow", rule: "penalty-block-ends", applies: strict, with: withPenalty, everywhere: true, build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		d := b.deny(b.allow(1))
		b.expect(d.Blocked && d.RetryAfter >= time.Duration(penalty), "blocked")
		end := b.now + penalty
		b.now = end - 1
		b.expect(b.deny(b.allow(1)).Blocked, "blocked to the block's last nanosecond")
		b.expect(b.deny(b.check(0)).Blocked, "blocked to the block's last nanosecond")
		b.now = end
		b.expect(!b.decide(b.allow(1)).Blocked, "free when the block ends")
	}},
	{verb: "allow", rule: "penalty-impossible-cost-starts-the-block", applies: strict, with: withPenalty, build: func(b *builder) {
		d := b.refuse(b.allow(b.limit()+1), engine.ErrCostExceedsLimit)
		b.expect(d.Blocked && d.Remaining == b.limit(), "blocked, nothing recorded")
		b.now++
		b.expect(b.deny(b.allow(1)).Blocked, "blocked")
		d = b.refuse(b.allow(b.limit()+1), engine.ErrCostExceedsLimit)
		b.expect(d.RetryAfter == time.Duration(penalty-1), "told to retry when the block ends")
	}},
	{verb: "check", rule: "penalty-check-starts-no-block", applies: strict, with: withPenalty, build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		d := b.deny(b.check(1))
		b.expect(!d.Blocked, "not blocked")
		b.now += int64(d.RetryAfter)
		b.admit(b.allow(1))
	}},
	{verb: "at-most", rule: "penalty-grants-nothing-during-the-block", applies: strict, with: withPenalty, build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		b.deny(b.allow(1))
		b.now += penalty - 1
		d := b.deny(b.atMost(2))
		b.expect(d.Blocked && d.Granted == 0, "blocked")
	}},
	{verb: "reserve", rule: "penalty-books-no-earlier-than-the-block-end", applies: strictReservable, with: withPenalty, build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		b.deny(b.allow(1))
		end := b.now + penalty
		b.now++
		d := b.admit(b.reserve(b.turn(), penalty+b.horizon()))
		b.expect(b.now+int64(d.Delay) >= end, "booked after the block")
		op := b.reserve(b.turn(), 2*penalty+b.horizon())
		op.At = end + penalty
		b.expect(b.now+int64(b.admit(op).Delay) == op.At, "booked when asked, after the block")
	}},
	{verb: "reserve", rule: "penalty-impossible-cost-starts-the-block", applies: strictReservable, with: withPenalty, build: func(b *builder) {
		d := b.refuse(b.reserve(b.limit()+1, b.horizon()), engine.ErrCostExceedsLimit)
		b.expect(d.Blocked && d.RetryAfter == time.Duration(penalty), "blocked, told to retry when the block ends")
		b.now++
		b.expect(b.deny(b.allow(1)).Blocked, "blocked")
	}},
	{verb: "reserve", rule: "penalty-beyond-max-delay-starts-the-block", applies: strictReservable, with: withPenalty, build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		wait := int64(b.deny(b.check(1)).RetryAfter)
		d := b.deny(b.reserve(1, wait-1))
		b.expect(d.Blocked && d.RetryAfter == time.Duration(penalty-wait+1), "told to retry when as long a wait books")
		b.expect(b.deny(b.allow(0)).Blocked, "blocked")
	}},
	{verb: "fill", rule: "penalty-block-ends", applies: strictLeaky, with: withPenalty, everywhere: true, build: func(b *builder) {
		b.admit(b.fill(b.limit()))
		b.expect(b.deny(b.fill(1)).Blocked, "blocked past capacity")
		end := b.now + penalty
		b.now = end - 1
		b.expect(b.deny(b.fill(1)).Blocked, "blocked to the block's last nanosecond, and recorded")
		b.now = end
		b.expect(!b.decide(b.fill(0)).Blocked, "free when the block ends")
	}},
	{verb: "allow", rule: "longest-penalty-at-the-end-of-time", applies: strict, with: withLongestPenalty, build: func(b *builder) {
		b.now = maxTime
		b.admit(b.allow(b.limit()))
		d := b.deny(b.allow(1))
		b.expect(d.Blocked && d.RetryAfter == time.Duration(maxSpan), "blocked for 2^60 ns")
		b.expect(b.deny(b.check(0)).Blocked, "blocked")
	}},
	{verb: "allow", rule: "penalty-beyond-2-to-the-60-ns-is-invalid", applies: strict,
		with: func(p *engine.Params) { p.Penalty = maxSpan + 1 }, build: func(b *builder) {
			b.refuse(b.allow(1), engine.ErrInvalidConfig)
		}},

	// Counted denials.
	{verb: "allow", rule: "count-denied-fills-up-to-the-limit", applies: strict, with: withCountDenied, everywhere: true,
		build: func(b *builder) {
			b.admit(b.allow(1))
			b.expect(b.deny(b.allow(b.limit())).Remaining == 0, "full")
			b.deny(b.allow(1))
		}},
	{verb: "allow", rule: "count-denied-fills-up-behind-a-booking", applies: strictReservable, with: withCountDenied,
		build: func(b *builder) {
			op := b.reserve(b.turn(), b.horizon())
			op.At = b.now + b.interval()
			b.admit(op)
			b.expect(b.deny(b.allow(b.limit())).Remaining == 0, "full now")
			b.deny(b.allow(1))
		}},
	{verb: "allow", rule: "count-denied-pushes-the-retry-back", applies: pushedBack, with: withCountDenied, build: func(b *builder) {
		start := b.now
		b.admit(b.allow(b.limit()))
		retry := int64(b.deny(b.allow(1)).RetryAfter)
		b.now += retry / 2
		b.deny(b.allow(1))
		b.now = start + retry
		b.deny(b.allow(1))
	}},
	{verb: "check", rule: "count-denied-check-counts-nothing", applies: strict, with: withCountDenied, build: func(b *builder) {
		b.admit(b.allow(1))
		b.deny(b.check(b.limit()))
		b.expect(b.admit(b.allow(b.limit()-1)).Remaining == 0, "the rest of the limit")
	}},
	{verb: "reserve", rule: "count-denied-fills-up-to-the-limit", applies: strictReservable, with: withCountDenied, build: func(b *builder) {
		b.admit(b.allow(1))
		b.expect(b.deny(b.reserve(b.limit(), 0)).Remaining == 0, "full")
	}},
	{verb: "allow", rule: "penalty-and-count-denied-block-a-full-key", applies: strict,
		with: func(p *engine.Params) { withPenalty(p); withCountDenied(p) }, everywhere: true, build: func(b *builder) {
			b.admit(b.allow(1))
			d := b.deny(b.allow(b.limit()))
			b.expect(d.Blocked && d.Remaining == 0, "blocked and full")
			end := b.now + penalty
			if b.c.Params.Reservable() {
				b.now++
				d = b.deny(b.reserve(1, penalty/2))
				b.expect(d.RetryAfter >= time.Duration(penalty/2-1), "told to retry when as long a wait books")
			}
			b.now = end
			b.expect(!b.decide(b.allow(1)).Blocked, "free when the block ends")
		}},

	// Limits that change (see "Limits that change" in package engine):
	// ops under other Params of the case's algorithm and mode, on the
	// state that the Params before left. GCRA converts the cost its TAT
	// holds to the new interval, once, and records it even on a denial.
	{verb: "allow", rule: "limit-raised-tenfold-admits-at-the-new-rate-at-once", applies: gcra, everywhere: true, build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		slow := b.deny(b.allow(1)).RetryAfter
		fast := b.changed(tenfold)
		b.as(fast)
		d := b.deny(b.allow(1)) // converts, and records it
		b.expect(d.RetryAfter <= time.Duration(fast.Interval) && d.RetryAfter < slow, "told to retry within a new interval")
		b.now += int64(d.RetryAfter)
		b.admit(b.allow(1))
		for range 3 {
			b.expect(b.deny(b.allow(1)).RetryAfter == time.Duration(fast.Interval), "one unit a new interval")
			b.now += fast.Interval
			b.admit(b.allow(1))
		}
	}},
	{verb: "allow", rule: "limit-lowered-tenfold-keeps-what-was-used", applies: named("gcra"), everywhere: true, build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		b.now += b.interval() // a unit drained at the old rate
		slow := b.changed(tenfoldSlower)
		b.as(slow)
		b.expect(b.admit(b.allow(1)).Remaining == 0, "the unit drained, and no more")
		b.expect(b.deny(b.allow(1)).RetryAfter == time.Duration(slow.Interval), "one unit a new interval")
	}},
	{verb: "check", rule: "under-a-new-interval-converts-without-recording", applies: gcra, everywhere: true, build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		fast := b.changed(tenfold)
		b.as(fast)
		retry := b.deny(b.check(1)).RetryAfter
		b.expect(retry <= time.Duration(fast.Interval), "decided as converted")
		b.now += int64(retry)
		// Converted at its own instant, from the TAT the check left as it
		// was: less of the old backlog has drained than the check's
		// conversion counted.
		d := b.deny(b.allow(1))
		b.now += int64(d.RetryAfter)
		b.admit(b.allow(1))
	}},
	{verb: "allow", rule: "limit-lowered-a-nanosecond-before-the-tat-converts-the-nanosecond", applies: gcra, everywhere: true,
		build: func(b *builder) {
			tat := b.now + b.admit(b.allow(1)).ResetAfter.Nanoseconds()
			b.now = tat - 1
			b.as(b.changed(tenfoldSlower))
			b.expect(b.deny(b.allow(b.limit())).RetryAfter == 10, "the nanosecond held is ten at a tenth of the rate")
			b.now += 10
			b.expect(b.admit(b.allow(b.limit())).Remaining == 0, "the whole limit")
		}},
	{verb: "allow", rule: "limit-raised-a-nanosecond-before-the-tat-converts-it-to-none", applies: gcra, everywhere: true,
		build: func(b *builder) {
			tat := b.now + b.admit(b.allow(1)).ResetAfter.Nanoseconds()
			b.now = tat - 1
			b.as(b.changed(tenfold))
			b.expect(b.admit(b.allow(b.limit())).Remaining == 0, "the whole limit at once")
		}},
	{verb: "allow", rule: "conversion-rounds-half-a-nanosecond-away-from-zero", applies: named("gcra"), everywhere: true,
		build: func(b *builder) {
			t := b.interval()
			tat := b.now + b.admit(b.allow(1)).ResetAfter.Nanoseconds()
			held, to, half := tie(t)
			b.now = tat - held
			b.as(b.changed(func(q *engine.Params) { q.Interval = to }))
			b.expect(b.deny(b.allow(b.limit())).RetryAfter == time.Duration(half)+1, "rounded up, not to the even nanosecond below")
		}},
	{verb: "allow", rule: "conversion-is-capped-at-2-to-the-60-ns", applies: named("gcra"), everywhere: true,
		with: func(p *engine.Params) { p.Limit, p.Interval = 1000, int64(time.Millisecond) }, build: func(b *builder) {
			b.admit(b.allow(b.limit())) // a thousand units held
			b.as(b.changed(func(q *engine.Params) { q.Limit, q.Interval = 1, 30*24*int64(time.Hour) }))
			d := b.deny(b.allow(1))
			b.expect(d.RetryAfter == time.Duration(maxSpan) && d.ResetAfter == time.Duration(maxSpan), "a thousand months, capped")
			b.now++
			b.expect(b.deny(b.allow(1)).RetryAfter == time.Duration(maxSpan-1), "the capped TAT recorded")
		}},
	{verb: "reserve", rule: "limit-raised-tenfold-books-at-the-new-rate", applies: gcra, everywhere: true, build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		fast := b.changed(tenfold)
		b.as(fast)
		d := b.admit(b.reserve(1, fast.Interval))
		b.expect(d.Delay > 0 && d.Delay <= time.Duration(fast.Interval), "booked within a new interval")
		b.expect(b.deny(b.reserve(1, fast.Interval)).RetryAfter == time.Duration(d.Delay), "the next a new interval later")
	}},
	{verb: "cancel", rule: "of-a-booking-under-another-interval-gives-nothing-back", applies: gcra, everywhere: true, build: func(b *builder) {
		b.admit(b.allow(b.limit()))
		at := b.admit(b.reserve(1, b.horizon())).At
		fast := b.changed(tenfold)
		b.as(fast)
		b.deny(b.cancel(1, at)) // converts, and records it
		b.now += fast.Interval
		b.deny(b.allow(1))
	}},

	// The fixed window aligned on the epoch: a window counted under
	// another length counts in the window of the new length that holds its
	// start.
	{verb: "allow", rule: "window-lengthened-keeps-the-count", applies: kind(engine.KindFixedWindow, false), everywhere: true,
		build: func(b *builder) {
			t, limit := b.interval(), b.limit()
			long := b.changed(func(q *engine.Params) { q.Interval, q.Limit = 3*t, 2*limit })
			start := arith.FloorDiv(b.now, 3*t)*3*t + 3*t // a window of the new length
			b.now = start + t                             // the second of the old length in it
			b.admit(b.allow(limit))
			b.now += t / 2
			b.as(long)
			d := b.admit(b.allow(1))
			b.expect(d.Used == limit+1 && int64(d.ResetAfter) == start+3*t-b.now, "the count kept, in the window that holds its start")
			b.now = start + 2*t // the old window's end
			b.expect(b.admit(b.allow(limit-1)).Remaining == 0, "the whole new limit used")
			b.expect(int64(b.deny(b.allow(1)).RetryAfter) == t, "told to retry when the new window ends")
			b.now = start + 3*t
			b.expect(b.admit(b.allow(2*limit)).Remaining == 0, "the whole new limit in the next window")
		}},
	{verb: "allow", rule: "window-shortened-starts-anew-at-the-next-boundary-of-the-new-length",
		applies: kind(engine.KindFixedWindow, false), everywhere: true, build: func(b *builder) {
			short := b.changed(threeQuarters)
			b.now = b.windowEnd()
			start := b.now
			b.admit(b.allow(b.limit()))
			held := arith.FloorDiv(start, short.Interval) * short.Interval
			b.expect(held < start, "a start that is not a multiple of the new length")
			b.as(short)
			b.now = held + short.Interval - 1
			b.expect(b.deny(b.allow(1)).RetryAfter == 1, "told to retry when the window that holds the start ends")
			b.now++
			b.expect(b.admit(b.allow(b.limit())).Remaining == 0, "the whole limit in a new window")
		}},
	{verb: "allow", rule: "window-start-a-nanosecond-before-a-boundary-of-the-new-length-counts-until-it",
		applies: kind(engine.KindFixedWindow, false), everywhere: true, build: func(b *builder) {
			boundary, limit := b.windowEnd(), b.limit()
			b.as(b.changed(func(q *engine.Params) { q.Interval = 1 })) // windows of a nanosecond
			b.now = boundary - 1
			b.admit(b.allow(limit))
			b.as(b.changed(func(q *engine.Params) { q.Limit = 2 * limit }))
			d := b.admit(b.allow(1))
			b.expect(d.Used == limit+1 && d.ResetAfter == 1, "the count kept, until the boundary")
			b.now++
			b.expect(b.admit(b.allow(2*limit)).Remaining == 0, "the whole limit in the next window")
		}},
	{verb: "allow", rule: "window-lengthened-ends-the-new-length-after-its-start", applies: kind(engine.KindFixedWindow, true), everywhere: true,
		build: func(b *builder) {
			t, limit, start := b.interval(), b.limit(), b.now
			b.admit(b.allow(limit))
			b.now += t / 2
			b.as(b.changed(func(q *engine.Params) { q.Interval, q.Limit = 3*t, 2*limit }))
			d := b.admit(b.allow(1))
			b.expect(d.Used == limit+1 && int64(d.ResetAfter) == start+3*t-b.now, "the count kept, in the window of its start")
			b.now = start + t // the old window's end
			b.expect(b.admit(b.allow(limit-1)).Remaining == 0, "the whole new limit used")
			b.expect(int64(b.deny(b.allow(1)).RetryAfter) == 2*t, "told to retry when the new window ends")
			b.now = start + 3*t
			b.expect(b.admit(b.allow(2*limit)).Remaining == 0, "the whole new limit in the next window")
		}},
	{verb: "allow", rule: "window-shortened-ends-the-new-length-after-its-start", applies: kind(engine.KindFixedWindow, true), everywhere: true,
		build: func(b *builder) {
			start := b.now
			b.admit(b.allow(b.limit()))
			short := b.changed(threeQuarters)
			b.as(short)
			b.now = start + short.Interval - 1
			b.expect(b.deny(b.allow(1)).RetryAfter == 1, "told to retry when the new length has passed")
			b.now++
			b.expect(b.admit(b.allow(b.limit())).Remaining == 0, "the whole limit in a new window")
		}},

	// The sliding counter: its windows counted under another length count
	// in the windows of the new length that hold their start.
	{verb: "allow", rule: "window-lengthened-keeps-both-counts", applies: kind(engine.KindSlidingCounter, false), everywhere: true,
		build: func(b *builder) {
			t, limit := b.interval(), b.limit()
			w := 3 * t
			start := arith.FloorDiv(b.now, w)*w + w // a window of the new length
			b.now = start + t/2
			b.admit(b.allow(limit)) // the previous window's count, to be
			b.now = start + t + t/2
			b.admit(b.allow(1))
			b.as(b.changed(func(q *engine.Params) { q.Interval, q.Limit = w, 2*limit }))
			d := b.admit(b.allow(1))
			elapsed := b.now - start
			b.expect(d.Used == 1+limit*float64(w-elapsed)/float64(w)+1, "both counts kept, the previous one weighed over the new length")
			b.expect(int64(d.ResetAfter) == start+2*w-b.now, "counted in the window that holds its start")
			b.now = start + 2*t + t/2 // past the old windows' ends
			elapsed = b.now - start
			b.expect(b.admit(b.check(0)).Used == 2+limit*float64(w-elapsed)/float64(w), "both counts kept")
			b.now = start + w
			b.expect(b.admit(b.allow(2*limit-2)).Remaining == 0, "the count the previous one")
		}},
	{verb: "allow", rule: "window-shortened-counts-the-window-that-holds-its-start-as-the-previous",
		applies: kind(engine.KindSlidingCounter, false), everywhere: true, build: func(b *builder) {
			short := b.changed(threeQuarters)
			b.now = b.windowEnd()
			start := b.now
			b.admit(b.allow(b.limit()))
			held := arith.FloorDiv(start, short.Interval) * short.Interval
			b.expect(held < start, "a start that is not a multiple of the new length")
			b.as(short)
			b.now = held + short.Interval
			d := b.deny(b.allow(1))
			b.expect(d.Used == b.limit(), "the previous window's count, whole at the window's start")
			b.now += int64(d.RetryAfter) - 1
			b.deny(b.allow(1))
			b.now++
			b.admit(b.allow(1))
		}},
	{verb: "allow", rule: "window-shortened-forgets-a-window-that-is-not-the-previous-one",
		applies: kind(engine.KindSlidingCounter, false), everywhere: true, build: func(b *builder) {
			short := b.changed(threeQuarters)
			b.now = b.windowEnd()
			start := b.now
			b.admit(b.allow(b.limit()))
			held := arith.FloorDiv(start, short.Interval) * short.Interval
			b.expect(held < start, "a start that is not a multiple of the new length")
			b.as(short)
			b.now = held + 2*short.Interval - 1
			b.expect(b.deny(b.allow(b.limit())).RetryAfter == 1, "the previous window's count, to its last nanosecond")
			b.now++
			b.expect(b.admit(b.allow(b.limit())).Remaining == 0, "the whole limit two windows on")
		}},
	{verb: "allow", rule: "window-start-a-nanosecond-before-a-boundary-of-the-new-length-counts-until-it",
		applies: kind(engine.KindSlidingCounter, false), everywhere: true, build: func(b *builder) {
			boundary, limit, t := b.windowEnd(), b.limit(), b.interval()
			b.as(b.changed(func(q *engine.Params) { q.Interval = 1 })) // windows of a nanosecond
			b.now = boundary - 1
			b.admit(b.allow(limit))
			b.as(b.changed(func(q *engine.Params) { q.Limit = 2 * limit }))
			d := b.admit(b.allow(1))
			b.expect(d.Used == limit+1 && int64(d.ResetAfter) == t+1, "the count kept, in the window that ends at the boundary")
			b.now++
			b.expect(b.admit(b.allow(limit-1)).Remaining == 0, "the count the previous window's at the boundary")
		}},

	// The buckets read their level (or tokens in use) as it stands, and
	// the time since at the new rate.
	{verb: "allow", rule: "capacity-lowered-keeps-the-level-and-waits", applies: reservableBucket, everywhere: true,
		build: func(b *builder) {
			b.admit(b.allow(b.limit()))
			before := b.deny(b.check(1)).RetryAfter
			low := b.changed(func(q *engine.Params) { q.Limit /= 2 })
			b.as(low)
			d := b.deny(b.allow(1))
			b.expect(d.Used == low.Limit && d.RetryAfter > before, "full, and told to wait for the level held to drain")
			b.now += int64(d.RetryAfter) - 1
			b.deny(b.allow(1))
			b.now++
			b.admit(b.allow(1))
		}},
	{verb: "allow", rule: "rate-raised-counts-the-time-since-the-last-update-at-the-new-rate", applies: meter, everywhere: true,
		build: func(b *builder) {
			b.admit(b.allow(b.limit()))
			b.now += b.interval() / 2
			fast := b.changed(func(q *engine.Params) { q.Amount *= 2 })
			b.as(fast)
			b.expect(b.admit(b.allow(b.c.Params.Amount)).Remaining == 0, "half an interval at twice the rate drained")
			b.deny(b.allow(1))
		}},

	// The sliding log and the concurrency limit read their entries as
	// they stand.
	{verb: "allow", rule: "max-entries-lowered-below-the-entries-held-merges-into-the-newest",
		applies: kind(engine.KindSlidingLog, false), everywhere: true, build: func(b *builder) {
			start := b.now
			for i := range int64(4) {
				b.now = start + i
				b.admit(b.allow(1))
			}
			b.as(b.changed(func(q *engine.Params) { q.MaxEntries = 2 }))
			b.now = start + 4
			b.admit(b.allow(1))
			b.now = start + b.interval() + 3 // the four entries' window passed
			b.expect(b.deny(b.allow(b.limit()-1)).RetryAfter == 1, "the newest entry holds two")
			b.now++
			b.expect(b.admit(b.allow(b.limit())).Remaining == 0, "every entry gone")
		}},
	{verb: "allow", rule: "max-entries-lowered-below-the-leases-held-admits-none-until-below", applies: leases, everywhere: true,
		build: func(b *builder) {
			start := b.now
			var held []int64
			for i := range int64(3) {
				b.now = start + i
				held = append(held, b.admit(b.allow(0.5)).At)
			}
			b.as(b.changed(func(q *engine.Params) { q.MaxEntries = 1 }))
			d := b.deny(b.allow(0.5))
			b.expect(d.Used == 1.5 && int64(d.RetryAfter) == held[2]-b.now, "the leases kept: told to retry when all have expired")
			for _, at := range held[:2] {
				b.admit(b.release(at))
				b.deny(b.allow(0.5))
			}
			b.admit(b.release(held[2]))
			b.admit(b.allow(0.5))
		}},
	{verb: "allow", rule: "max-entries-lowered-below-the-waiters-keeps-their-places", applies: leases, everywhere: true,
		build: func(b *builder) {
			held := b.admit(b.allow(b.limit())).At
			first := b.deny(b.wait(1, 0, patience)).At
			second := b.deny(b.wait(1, 0, patience)).At
			b.as(b.changed(func(q *engine.Params) { q.MaxEntries = 1 }))
			b.expect(b.deny(b.wait(1, 0, patience)).At == 0, "no place in a line longer than the new maximum")
			b.expect(b.deny(b.wait(1, second, patience)).At == second, "its place kept")
			b.admit(b.release(held))
			b.deny(b.wait(1, second, patience))
			b.admit(b.wait(1, first, patience))
			b.deny(b.wait(1, second, patience))
		}},
	{verb: "allow", rule: "limit-lowered-below-the-leases-held-admits-none-until-below", applies: leases, everywhere: true,
		build: func(b *builder) {
			a := b.admit(b.allow(1)).At
			b.now++
			c := b.admit(b.allow(1)).At
			b.as(b.changed(func(q *engine.Params) { q.Limit = 1 }))
			d := b.deny(b.allow(1))
			b.expect(d.Used == 1 && int64(d.RetryAfter) == c-b.now, "the leases kept, over the new limit")
			b.admit(b.release(a))
			b.deny(b.allow(1))
			b.admit(b.release(c))
			b.admit(b.allow(1))
		}},
}

// Limits that change.

// gcra reports whether a is GCRA.
func gcra(a algorithm) bool { return a.p.Kind == engine.KindGCRA }

// reservableBucket reports whether a is a bucket: leaky, or of tokens.
func reservableBucket(a algorithm) bool {
	return a.p.Kind == engine.KindLeakyBucket || a.p.Kind == engine.KindTokenBucket
}

// named reports whether a is the algorithm named name.
func named(name string) func(algorithm) bool {
	return func(a algorithm) bool { return a.name == name }
}

// tenfold raises the rate of p tenfold: a tenth of the interval.
func tenfold(p *engine.Params) { p.Interval /= 10 }

// tenfoldSlower lowers the rate of p tenfold: ten times the interval.
func tenfoldSlower(p *engine.Params) { p.Interval *= 10 }

// threeQuarters shortens p's window to three quarters: a length that does
// not divide the old one, and of which a few old windows are a multiple.
func threeQuarters(p *engine.Params) { p.Interval = p.Interval / 4 * 3 }

// tie returns a time held at interval t, and a new interval, at which
// GCRA's conversion of the time is a whole, even number of nanoseconds and
// a half, exactly: half, the number, which is not zero, so that the time
// unconverted is another.
func tie(t int64) (held, to int64, half float64) {
	for to = t / 2; to < t; to++ {
		for held = 1; held < 1000; held++ {
			x := float64(held) / float64(t) * float64(to)
			if whole := math.Floor(x); x-whole == 0.5 && whole > 0 && math.Mod(whole, 2) == 0 {
				return held, to, whole
			}
		}
	}
	panic("vectors: no tie")
}
