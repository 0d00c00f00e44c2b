package sluice

import "time"

// decideStrict is the algorithm under a penalty (Params.Penalty) or with
// denials counted (Params.CountDenied), around decideKind.
//
// A block is a gate in front of the algorithm: while it lasts, an Allow or
// a partial grant is decided as a check and denied, a reservation books no
// earlier than the block's end, and a fill-up still records its cost (the
// work was done) but is reported as not fitting. A check reports a block
// in force, never one it would start, since it records nothing.
func (p *Params) decideStrict(s *State, op Op, d *Decision) {
	until := s.Until
	if until <= op.Now {
		until = 0 // ended: the key is not blocked
	}
	kop := op
	if until != 0 {
		switch op.Verb {
		case VerbAllow:
			kop.Verb = VerbCheck
		case VerbReserve:
			kop.At = max(op.At, until)
		}
	}
	kept := *s
	p.decideKind(s, kop, d)
	if until != 0 && kop.Verb == VerbCheck && op.Verb != VerbCheck {
		*s = kept // decided as a check
	}
	if until != 0 {
		d.Blocked = true
		if op.Verb == VerbAllow || op.Verb == VerbCheck || op.Verb == VerbFill {
			d.Allowed = false
			d.RetryAfter = max(d.RetryAfter, time.Duration(until-op.Now))
		}
	}
	if d.Allowed || op.Verb != VerbAllow && op.Verb != VerbReserve && op.Verb != VerbFill {
		p.keepBlock(s, op, d, until)
		return
	}
	// An overflow: a denied Allow or reservation, or a fill-up that did not
	// fit.
	if p.CountDenied && op.Verb != VerbFill && d.Remaining > 0 {
		// As much of the cost as fits is recorded: the key is full.
		var full Decision
		p.decideKind(s, Op{Verb: VerbAllow, Cost: d.Remaining, Now: op.Now}, &full)
		d.Used, d.Remaining, d.ResetAfter = full.Used, full.Remaining, max(d.ResetAfter, full.ResetAfter)
	}
	if p.Penalty > 0 && until == 0 {
		until = op.Now + p.Penalty
		d.Blocked = true
		wait := time.Duration(p.Penalty)
		if op.Verb == VerbReserve {
			wait -= time.Duration(op.MaxDelay) // until a reservation as long would book
		}
		d.RetryAfter = max(d.RetryAfter, wait)
	}
	p.keepBlock(s, op, d, until)
}

// keepBlock keeps a block in the state and in the decision's ResetAfter,
// so that no store forgets a blocked key.
func (p *Params) keepBlock(s *State, op Op, d *Decision, until int64) {
	if until == 0 {
		s.Until = 0
		return
	}
	s.Until = until
	d.ResetAfter = max(d.ResetAfter, time.Duration(until-op.Now))
}
