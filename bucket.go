package sluice

import (
	"context"

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
	err = b.do(ctx, key, VerbFill, cost, &d)
	return d, err
}

// stepMeter is the leaky bucket, and the token bucket with continuous
// refill, which is the same meter counting the tokens in use. Decisions are
// made in the time domain: a cost fits once the excess over the limit has
// had time to leak, so the instant of admission and RetryAfter agree to the
// nanosecond.
func (p *Params) stepMeter(s *State, op Op, d *Decision) {
	elapsed := op.Now - s.Time
	level := p.leaked(*s, elapsed)
	last := max(s.Time, op.Now)
	// A fill-up may cost more than the capacity: that never fits. A clock
	// that stepped back has leaked nothing, but what fits still fits.
	fits := op.Cost <= p.Limit && max(elapsed, 0) >= p.drain(s.A+op.Cost-p.Limit)
	switch {
	case op.Verb == VerbFill:
		d.Allowed = fits
		level = p.fill(level, op.Cost)
		*s = State{Time: last, A: level}
	case fits:
		d.Allowed = true
		level = p.fill(level, op.Cost)
		if op.Verb == VerbAllow {
			*s = State{Time: last, A: level}
		}
	default:
		d.RetryAfter = after(s.Time+p.drain(s.A+op.Cost-p.Limit), op.Now)
	}
	p.describe(d, level)
	d.ResetAfter = after(last+p.drain(level), op.Now)
}

// drain returns how long x units take to leak away.
func (p *Params) drain(x float64) int64 {
	if x <= p.slack() {
		return 0
	}
	return arith.CeilNanos(x * float64(p.Interval) / p.Amount)
}

// leaked returns the level of s after elapsed nanoseconds. A negative
// elapsed time (a clock that stepped backwards) leaks nothing.
func (p *Params) leaked(s State, elapsed int64) float64 {
	switch {
	case elapsed <= 0:
		return s.A
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
