package engine

import (
	"math"
	"time"

	"github.com/sluice-go/sluice/internal/arith"
)

func (p *Params) stepGCRA(s *State, op *Op, d *Decision) {
	t := p.Interval
	stored := s.Time // the TAT, in p's interval
	if s.A != float64(t) && s.A != 0 && stored > op.Now {
		// A check decides as converted, and records nothing. (A strict or
		// partial decision converts the state before its checks: see
		// carryOnce.)
		stored = p.carriedTAT(s, op.Now)
		if op.Verb != VerbCheck {
			s.Time, s.A = stored, float64(t)
		}
	}
	tau, whole := wholeNanos(p.Limit, t)
	if !whole {
		tau = p.gcraNanos(p.Limit)
	}
	tat := max(stored, op.Now)
	if op.Verb == VerbCancel {
		// The reservation is the key's last booking iff the TAT is still
		// the one it left: its instant plus the tolerance. It gives back
		// its cost less one nanosecond, so that the turn it frees comes a
		// nanosecond after its own: a booking of the freed turn then
		// leaves another TAT, which this cancel, made again (retried on a
		// lost reply), cannot mistake for its own.
		if op.Now < op.At && stored == op.At+tau {
			d.Allowed = true
			s.Time, s.A = s.Time-(p.gcraNanos(op.Cost)-1), float64(t)
			tat = max(s.Time, op.Now)
		}
	} else {
		c, whole := wholeNanos(op.Cost, t)
		if !whole {
			c = p.gcraNanos(op.Cost)
		}
		next := tat + c
		allowAt := next - tau
		later := op.Verb == VerbReserve && op.At > max(allowAt, op.Now)
		if later {
			// Booked no earlier than op.At, as an arrival then.
			allowAt, next = op.At, max(stored, op.At)+p.gcraNanos(op.Cost)
		}
		switch {
		case op.Now >= allowAt:
			d.Allowed = true
			tat = next
			if op.Verb != VerbCheck {
				s.Time, s.A = tat, float64(t)
			}
		case op.Verb != VerbReserve:
			d.RetryAfter = after(allowAt, op.Now)
		case allowAt-op.Now <= op.MaxDelay:
			// Booked for allowAt, which it now owns: the next booking's
			// instant comes c*T after it.
			d.Allowed, d.Delay, d.At = true, time.Duration(allowAt-op.Now), allowAt
			if later {
				// Booked later than the GCRA needed: its TAT is not its
				// instant plus the tolerance, and a cancel could not tell it
				// from a later booking, so it cannot be given back.
				d.At = 0
			}
			tat = next
			s.Time, s.A = tat, float64(t)
		default:
			d.RetryAfter = after(allowAt-op.MaxDelay, op.Now)
		}
	}
	backlog := tat - op.Now
	p.describe(d, float64(backlog)/float64(t))
	if d.Remaining > 0 {
		// Remaining from the nanosecond arithmetic, not Limit - Used, so
		// that a burst's last unit reads as exactly zero.
		d.Remaining = min(float64(tau-backlog)/float64(t), p.Limit)
	}
	d.ResetAfter = after(tat, op.Now)
}

// carryOnce converts a GCRA state for op, as the first of the steps it
// makes, some of them checks, so that they all decide on the state the
// store records (see Params.Carries).
func (p *Params) carryOnce(s *State, op *Op) {
	if p.Carries(s, op) {
		s.Time, s.A = p.carriedTAT(s, op.Now), float64(p.Interval)
	}
}

// carriedTAT returns the TAT of s, computed with another emission
// interval, the State's A, carried over to p's at now, before it: the cost
// it holds, (TAT - now) / A units, is kept, and takes p's interval per unit
// from now on (at most maxSpan in all). See [Params.Carries].
func (p *Params) carriedTAT(s *State, now int64) int64 {
	backlog := float64(s.Time-now) / s.A * float64(p.Interval)
	if backlog >= maxSpan {
		return now + maxSpan
	}
	return now + int64(math.Round(backlog))
}

// gcraNanos converts an amount to nanoseconds at the emission interval.
func (p *Params) gcraNanos(amount float64) int64 { return arith.Nanos(amount, p.Interval) }

// wholeNanos returns amount*interval and true for a whole amount below
// 2^11 at an interval below 2^42 ns (73 minutes): the product, below 2^53,
// is the float product gcraNanos rounds, exactly, with nothing to round.
func wholeNanos(amount float64, interval int64) (int64, bool) {
	n := int64(amount)
	return n * interval, float64(n) == amount && (uint64(n)>>11|uint64(interval)>>42) == 0
}
