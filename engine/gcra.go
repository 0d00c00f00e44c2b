package engine

import (
	"time"

	"github.com/sluice-go/sluice/internal/arith"
)

func (p *Params) stepGCRA(s *State, op *Op, d *Decision) {
	t := p.Interval
	tau := p.gcraNanos(p.Limit)
	tat := max(s.Time, op.Now)
	if op.Verb == VerbCancel {
		// The reservation is the key's last booking iff the TAT is still
		// the one it left: its instant plus the tolerance. It gives back
		// its cost less one nanosecond, so that the turn it frees comes a
		// nanosecond after its own: a booking of the freed turn then
		// leaves another TAT, which this cancel, made again (retried on a
		// lost reply), cannot mistake for its own.
		if op.Now < op.At && s.Time == op.At+tau {
			d.Allowed = true
			s.Time -= p.gcraNanos(op.Cost) - 1
			tat = max(s.Time, op.Now)
		}
	} else {
		next := tat + p.gcraNanos(op.Cost)
		allowAt := next - tau
		later := op.Verb == VerbReserve && op.At > max(allowAt, op.Now)
		if later {
			// Booked no earlier than op.At, as an arrival then.
			allowAt, next = op.At, max(s.Time, op.At)+p.gcraNanos(op.Cost)
		}
		switch {
		case op.Now >= allowAt:
			d.Allowed = true
			tat = next
			if op.Verb != VerbCheck {
				s.Time = tat
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
			s.Time = tat
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

// gcraNanos converts an amount to nanoseconds at the emission interval.
func (p *Params) gcraNanos(amount float64) int64 { return arith.Nanos(amount, p.Interval) }
