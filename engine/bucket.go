package engine

import (
	"time"

	"github.com/sluice-go/sluice/internal/arith"
)

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
func (p *Params) stepMeter(s *State, op *Op, d *Decision) {
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
