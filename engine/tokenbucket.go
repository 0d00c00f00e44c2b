package engine

import (
	"math"
	"time"
)

// stepIntervalRefill is the token bucket whose tokens arrive rate.Amount
// at a time, once per whole Interval since the last refill.
//
// As for the meter, the state is a point: s.A tokens in use at s.Time, a
// refill instant. After it, tokens arrive every Interval; before it, the
// refills between a time and the point had not come yet. A reservation
// books a point at a future refill instant.
func (p *Params) stepIntervalRefill(s *State, op *Op, d *Decision) {
	if op.Verb == VerbCancel {
		// Given back a nanosecond late: the point moves to a nanosecond
		// after the refill before it (with the tokens its instant's refill
		// brings still in use), so that the refills, and the turn it
		// frees, come a nanosecond after its own, and a booking of that
		// turn leaves another point, which this cancel, made again, cannot
		// mistake for its own.
		if op.Now < op.At && s.Time == op.At {
			d.Allowed = true
			*s = State{Time: op.At - p.Interval + 1, A: max(s.A-op.Cost, 0) + p.Amount}
		}
		used, last := p.refillPoint(*s, op.Now)
		p.describe(d, p.usedAt(used, last, op.Now))
		d.ResetAfter = after(last+p.refills(used)*p.Interval, op.Now)
		return
	}
	used, last := p.refillPoint(*s, op.Now)
	fitAt := last + p.refillsTo(used+op.Cost-p.Limit)*p.Interval
	later := op.Verb == VerbReserve && op.At > max(fitAt, op.Now)
	if later {
		fitAt = op.At // booked no earlier than op.At, between refills
	}
	at := op.Now // when the cost is recorded
	switch {
	case op.Now >= fitAt:
		d.Allowed = true
	case op.Verb == VerbReserve && fitAt-op.Now <= op.MaxDelay:
		d.Allowed, d.Delay, d.At = true, time.Duration(fitAt-op.Now), fitAt
		at = fitAt
	case op.Verb == VerbReserve:
		d.RetryAfter = after(fitAt-op.MaxDelay, op.Now)
	default:
		d.RetryAfter = after(fitAt, op.Now)
	}
	if d.Allowed {
		if at >= last {
			used, last = p.refillPoint(State{Time: last, A: used}, at)
		}
		if later {
			// Booked between refills, its point lies before its instant,
			// where a cancel could not tell it from a later booking: it
			// cannot be given back.
			d.At = 0
		}
		used = p.fill(used, op.Cost)
		if op.Verb != VerbCheck && (used > 0 || last > op.Now) {
			*s = State{Time: last, A: used} // a point after now is kept, even empty
		}
	}
	p.describe(d, p.usedAt(used, last, op.Now))
	d.ResetAfter = after(last+p.refills(used)*p.Interval, op.Now)
}

// refillPoint returns the point of s as seen at now: advanced by the whole
// refills since it (a full bucket's refill clock starting again at now, as
// a fresh key's does, since it gains nothing by waiting), or s itself if
// it lies after now.
func (p *Params) refillPoint(s State, now int64) (used float64, last int64) {
	used, last = s.A, s.Time
	if now < last {
		return used, last
	}
	if used > 0 && now > last {
		k := (now - last) / p.Interval
		used = max(used-float64(k)*p.Amount, 0)
		last += k * p.Interval
	}
	if used <= p.slack() {
		used, last = 0, now
	}
	return used, last
}

// usedAt returns the tokens in use at now of the point (used, last): more
// by the refills still to come before it, if it lies after now.
func (p *Params) usedAt(used float64, last, now int64) float64 {
	if last <= now {
		return used
	}
	return used + float64((last-now+p.Interval-1)/p.Interval)*p.Amount
}

// refillsTo returns how many refills after a point it takes until an
// excess of x tokens over the burst is gone: zero or fewer when there is
// room already, negative when there was room that many refills before it.
func (p *Params) refillsTo(x float64) int64 {
	return p.refillCount(math.Ceil((x - p.slack()) / p.Amount))
}

// refills returns how many refills it takes to free x tokens.
func (p *Params) refills(x float64) int64 {
	if x <= p.slack() {
		return 0
	}
	return p.refillCount(math.Ceil((x - p.slack()) / p.Amount))
}

// refillCount converts a whole count of refills to an int64, capped at the
// refills of maxSpan and one more. Only a key read under a slower limit
// than it was charged under (see settle.go) holds more than the refills
// of maxSpan bring: its wait is then capped, at maxSpan and less than an
// interval more, as a bucket's drain is (see arith.CeilNanos), instead of
// overflowing.
func (p *Params) refillCount(n float64) int64 {
	if n*float64(p.Interval) > maxSpan {
		return maxSpan/p.Interval + 1
	}
	return int64(n)
}
