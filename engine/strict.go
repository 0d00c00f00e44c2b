package engine

import (
	"time"
)

// decideStrict is the algorithm under a penalty (Params.Penalty) or with
// denials counted (Params.CountDenied), around decideKind.
//
// A block is a gate in front of the algorithm: while it lasts, an Allow or
// a check is denied (decided as a check, and describing the key as it
// stands), a reservation books no earlier than the block's end, and a
// fill-up still records its cost (the work was done) but is reported as
// not fitting. A check reports a block in force, never one it would start,
// since it records nothing; nor does it clear a block that has ended.
//
// An Allow or a reservation whose cost exceeds the limit (which only a
// penalty lets through, see Overflows) is an overflow that never fits: it
// is denied, describing the key as it stands, and starts the block.
func (p *Params) decideStrict(s *State, op *Op, d *Decision) {
	p.carryOnce(s, op)
	until := s.Until
	if until <= op.Now {
		until = 0 // ended: the key is not blocked
	}
	kept := *s
	kop := *op // the op the algorithm decides
	never := op.Cost > p.Limit && (op.Verb == VerbAllow || op.Verb == VerbReserve)
	switch {
	case never:
		p.decideKind(s, &Op{Verb: VerbCheck, Now: op.Now}, d)
		d.Allowed = false
		if until != 0 {
			d.RetryAfter = max(d.RetryAfter, time.Duration(until-op.Now))
		}
	case until != 0 && (op.Verb == VerbAllow || op.Verb == VerbCheck):
		p.decideKind(s, &Op{Verb: VerbCheck, Cost: op.Cost, Now: op.Now}, d)
		if d.Allowed {
			// The cost would fit but for the block: describe the key as it
			// stands, not as the request would leave it.
			retry := d.RetryAfter
			*d = Decision{}
			p.decideKind(s, &Op{Verb: VerbCheck, Now: op.Now}, d)
			d.RetryAfter = retry
		}
		d.Allowed = false
		d.RetryAfter = max(d.RetryAfter, time.Duration(until-op.Now))
	case until != 0 && op.Verb == VerbReserve:
		kop.At = max(op.At, until) // no earlier than the block's end
		p.decideKind(s, &kop, d)
	default:
		p.decideKind(s, op, d)
		if until != 0 && op.Verb == VerbFill {
			d.Allowed = false
			d.RetryAfter = max(d.RetryAfter, time.Duration(until-op.Now))
		}
	}
	d.Blocked = until != 0
	overflow := !d.Allowed && (op.Verb == VerbAllow || op.Verb == VerbReserve || op.Verb == VerbFill)
	if overflow && p.CountDenied && op.Verb != VerbFill && !never {
		p.fillUp(s, &kop, d)
		if until != 0 {
			wait := time.Duration(until - op.Now)
			if op.Verb == VerbReserve {
				wait -= time.Duration(op.MaxDelay) // until a reservation as long would book
			}
			d.RetryAfter = max(d.RetryAfter, wait)
		}
	}
	if overflow && p.Penalty > 0 && until == 0 {
		until = op.Now + p.Penalty
		d.Blocked = true
		wait := time.Duration(p.Penalty)
		if op.Verb == VerbReserve && !never {
			wait -= time.Duration(op.MaxDelay) // until a reservation as long would book
		}
		d.RetryAfter = max(d.RetryAfter, wait)
	}
	if until != 0 {
		// No store forgets a key before its block ends.
		d.ResetAfter = max(d.ResetAfter, time.Duration(until-op.Now))
	}
	if p.Records(op.Verb, d) {
		s.Until = until
	} else {
		s.Until = kept.Until // recording nothing, a step changes nothing
	}
}

// fillUp records a denied request as far as the limit allows: the key is
// full at op.Now. The decision then says when the request would be
// admitted from the full key.
func (p *Params) fillUp(s *State, op *Op, d *Decision) {
	now := op.Now
	switch p.Kind {
	case KindGCRA, KindLeakyBucket, KindTokenBucket:
		p.fullAt(s, now)
	case KindSlidingCounter:
		if d.Remaining > 0 {
			start, cur, prev := p.counterWindow(s, now)
			*s = State{Time: start, A: cur + d.Remaining, B: prev}
		}
	default: // the fixed window and the sliding log count amounts: the room fits
		if d.Remaining > 0 {
			var filled Decision
			p.decideKind(s, &Op{Verb: VerbAllow, Cost: d.Remaining, Now: now}, &filled)
		}
	}
	// Decided again on the full key: the same request, recording nothing.
	again := *op
	if again.Verb == VerbAllow {
		again.Verb = VerbCheck
	}
	t := *s
	var e Decision
	p.decideKind(&t, &again, &e)
	d.Used, d.Remaining, d.RetryAfter, d.ResetAfter = e.Used, e.Remaining, e.RetryAfter, e.ResetAfter
	if e.RetryAfter == 0 {
		// The denial and the decision on the full key may round apart (a
		// meter in debt decides the one from its point and the other from
		// now): a denial still waits, a nanosecond.
		d.RetryAfter = 1
	}
}

// fullAt records the whole limit of a reservable algorithm's key as in
// use at t, keeping whatever the key holds beyond it: the key's state
// becomes the later of its own and that of a key filled up at t.
func (p *Params) fullAt(s *State, t int64) {
	switch {
	case p.Kind == KindGCRA:
		s.Time, s.A = max(s.Time, t+p.gcraNanos(p.Limit)), float64(p.Interval)
	case p.IntervalRefill:
		used, last := p.refillPoint(*s, t)
		if last <= t {
			// Never lower: a cancel may leave more in use than the burst.
			*s = State{Time: last, A: max(used, p.Limit)}
		} else {
			s.A = max(used, p.Limit-p.usedAt(0, last, t))
		}
	default:
		// Full at t: the level's line through (t, limit), kept at the
		// point if that lies after t and the line is higher there.
		full := State{Time: t, A: p.Limit}
		if s.Time <= t {
			full.A = max(p.levelAt(*s, t), p.Limit)
			*s = full
		} else {
			s.A = max(s.A, p.levelAt(full, s.Time))
		}
	}
}
