package sluice

import (
	"context"
	"time"

	"github.com/sluice-go/sluice/internal/arith"
)

// LeakyBucket is a leaky bucket meter: each key has a level that requests
// fill and that leaks away linearly at a constant rate, never below zero.
// Levels and costs are float64, so it meters requests, rows or money alike.
//
// It has three verbs. [LeakyBucket.Fillup] always records its cost (clamping
// the level at capacity) and reports whether the bucket is full: use it to
// account for work already done. CanAccept reports whether a cost would fit
// now, changing nothing. Allow is the atomic "CanAccept, then Fillup": it
// records the cost only if it fits, which closes the race two concurrent
// spenders would have between the two calls.
//
// State per key: the level and the time it was measured. A key whose level
// has leaked to zero is forgotten.
//
// Guarantee: the cost admitted by Allow in any interval of length d is at
// most capacity + rate*d.
//
// A LeakyBucket is safe for concurrent use.
type LeakyBucket struct {
	limiter
}

// NewLeakyBucket returns a leaky bucket with the given capacity that leaks
// at rate: NewLeakyBucket(1000, sluice.Per(1000, 30*24*time.Hour)) is a
// monthly budget of 1000 units.
func NewLeakyBucket(capacity float64, leak Rate, opts ...Option) (*LeakyBucket, error) {
	if err := leak.validate(); err != nil {
		return nil, err
	}
	p := Params{Kind: KindLeakyBucket, Limit: capacity, Interval: int64(leak.Period), Amount: leak.Amount}
	l, err := newLimiter(p, opts)
	if err != nil {
		return nil, err
	}
	return &LeakyBucket{l}, nil
}

// Fillup adds cost to key's level unconditionally, clamping the level at
// capacity, and returns the level reached (Decision.Used). The fill-up
// reached capacity, the instant the level would have reached or passed it,
// iff the decision's Full reports true; Allowed reports whether the whole
// cost fitted. A cost larger than the capacity is allowed here: it fills
// the bucket.
func (b *LeakyBucket) Fillup(ctx context.Context, key string, cost float64) (d Decision, err error) {
	err = b.do(ctx, key, Op{Verb: VerbFill, Cost: cost, Now: b.clock.now()}, &d)
	return d, err
}

// stepMeter is the leaky bucket, and the token bucket with continuous
// refill, which is the same meter counting the tokens in use. Decisions are
// made in the time domain: a cost fits once the excess over the limit has
// had time to leak, so the instant of admission and RetryAfter agree to the
// nanosecond.
//
// The state is a point on the key's level over time: the level s.A at
// s.Time, leaking at the rate after it and, before it, higher by what
// leaks in between. A reservation books a point in the future, and a
// decision made before that point (or by a clock that stepped back) reads
// the level there, so nothing admitted now can overtake what was booked
// for later.
func (p *Params) stepMeter(s *State, op Op, d *Decision) {
	if op.Verb == VerbCancel {
		// The reservation is the key's last booking iff the point is still
		// at its instant. Its cost is given back a nanosecond late: the
		// point moves to the next nanosecond, so that the turn it frees
		// comes after its own, and a booking of that turn leaves another
		// point, which this cancel, made again, cannot mistake for its own.
		if op.Now < op.At && s.Time == op.At {
			d.Allowed = true
			*s = State{Time: op.At + 1, A: max(s.A-op.Cost, 0)}
		}
		p.describe(d, p.levelAt(*s, op.Now))
		d.ResetAfter = p.emptyAfter(*s, op.Now)
		return
	}
	fitAt := s.Time + p.span(s.A+op.Cost-p.Limit)
	if op.Verb == VerbReserve && op.At > max(fitAt, op.Now) {
		fitAt = op.At // booked no earlier than op.At
	}
	// A fill-up may cost more than the capacity: that never fits.
	fits := op.Cost <= p.Limit && op.Now >= fitAt
	at := op.Now // when the cost is recorded
	switch {
	case fits:
		d.Allowed = true
	case op.Verb == VerbReserve && fitAt-op.Now <= op.MaxDelay:
		d.Allowed, d.Delay, d.At = true, time.Duration(fitAt-op.Now), fitAt
		at = fitAt
	case op.Verb == VerbReserve:
		d.RetryAfter = after(fitAt-op.MaxDelay, op.Now)
	case op.Verb != VerbFill:
		d.RetryAfter = after(fitAt, op.Now)
	}
	level := p.levelAt(*s, op.Now)
	if op.Verb == VerbFill || d.Allowed {
		// The point moves to the later of the old one and the instant
		// recorded; before the old one, the cost adds to its level.
		last := max(s.Time, at)
		filled := p.fill(p.levelAt(*s, last), op.Cost)
		if op.Verb != VerbCheck {
			*s = State{Time: last, A: filled}
		}
		if last == op.Now {
			level = filled
		} else {
			level = p.levelAt(State{Time: last, A: filled}, op.Now)
		}
		d.ResetAfter = after(last+p.drain(filled), op.Now)
	} else {
		d.ResetAfter = p.emptyAfter(*s, op.Now)
	}
	p.describe(d, level)
}

// emptyAfter returns how long from now until s has leaked to zero.
func (p *Params) emptyAfter(s State, now int64) time.Duration {
	if s.Time > now {
		return after(s.Time+p.drain(s.A), now)
	}
	return after(now+p.drain(p.levelAt(s, now)), now)
}

// drain returns how long x units take to leak away.
func (p *Params) drain(x float64) int64 {
	if x <= p.slack() {
		return 0
	}
	return arith.CeilNanos(x * float64(p.Interval) / p.Amount)
}

// span returns when, relative to a state's point, an excess of x over the
// limit has leaked: drain(x) for an excess, and for room to spare (x < 0)
// how long before the point the level was still low enough, rounded
// towards the point so that it never admits early.
func (p *Params) span(x float64) int64 {
	if x >= -p.slack() {
		return p.drain(x)
	}
	return -arith.FloorNanos(-x * float64(p.Interval) / p.Amount)
}

// levelAt returns the level of s at t: leaked after the point, never below
// zero, and before it higher by what leaks from t to the point.
func (p *Params) levelAt(s State, t int64) float64 {
	elapsed := t - s.Time
	switch {
	case elapsed == 0:
		return s.A
	case elapsed < 0:
		return s.A + float64(-elapsed)*p.Amount/float64(p.Interval)
	case elapsed >= p.drain(s.A):
		return 0
	}
	return max(s.A-float64(elapsed)*p.Amount/float64(p.Interval), 0)
}

// fill adds cost to level, clamping at the limit.
func (p *Params) fill(level, cost float64) float64 {
	level += cost
	if level >= p.Limit-p.slack() {
		return p.Limit
	}
	return level
}
