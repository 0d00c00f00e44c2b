package engine

import (
	"math"
	"time"

	"github.com/sluice-go/sluice/internal/arith"
)

// stepGCRA is the GCRA: it keeps a key's theoretical arrival time (TAT),
// its state's Time, at most the tolerance ahead of now, the burst's
// nanoseconds at the emission interval. An Allow or a check is DecideTAT's
// (which Decide calls itself on a state of p's interval), a reservation or
// a cancel its own.
func (p *Params) stepGCRA(s *State, op *Op, d *Decision) {
	t := p.Interval
	stored := s.Time
	if p.foreign(s, op.Now) {
		// A check decides as converted, and records nothing. (A strict or
		// partial decision converts the state before its checks: see
		// carryOnce.)
		stored = p.carriedTAT(s, op.Now)
		if op.Verb != VerbCheck {
			s.Time, s.A = stored, float64(t)
		}
	}
	if op.Verb != VerbReserve && op.Verb != VerbCancel {
		if tat := p.DecideTAT(stored, *op, d); d.Allowed && op.Verb == VerbAllow {
			s.Time, s.A = tat, float64(t)
		}
		return
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
		p.describeGCRA(d, tat, tau, op.Now)
		return
	}
	c, whole := wholeNanos(op.Cost, t)
	if !whole {
		c = p.gcraNanos(op.Cost)
	}
	next := tat + c
	allowAt := next - tau
	later := op.At > max(allowAt, op.Now)
	if later {
		// Booked no earlier than op.At, as an arrival then.
		allowAt, next = op.At, max(stored, op.At)+p.gcraNanos(op.Cost)
	}
	switch {
	case op.Now >= allowAt:
		d.Allowed = true
		tat = next
		s.Time, s.A = tat, float64(t)
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
	p.describeGCRA(d, tat, tau, op.Now)
}

// foreign reports whether s is a GCRA state whose TAT was computed with
// another emission interval than p's (recorded in its A) and is still
// ahead of now: one that a decision under p carries over (see
// [Params.Carries]).
func (p *Params) foreign(s *State, now int64) bool {
	return s.A != float64(p.Interval) && s.A != 0 && s.Time > now
}

// DecidesTAT reports whether Decide, for a request of verb under p on a
// GCRA key of p's interval, reads and writes the key's TAT alone, as
// DecideTAT decides it: for an Allow or a check of the GCRA without a
// penalty or counted denials.
func (p *Params) DecidesTAT(verb Verb) bool {
	return p.Kind == KindGCRA && p.Penalty == 0 && !p.CountDenied && verb-VerbAllow <= VerbCheck-VerbAllow
}

// DecideTAT is Decide for a store that keeps a GCRA key's state as its
// theoretical arrival time alone, tat, recorded at p's interval (zero for
// a key it does not hold): for p that Validate accepted and op that Check
// accepted, whose verb p DecidesTAT, it writes the decision into *d, which
// must be zero, and returns the TAT that an admitted Allow records. A TAT
// not after op.Now leaves the key fresh again, as Decide leaves the zero
// State.
func (p *Params) DecideTAT(tat int64, op Op, d *Decision) int64 {
	// The wholeNanos shortcuts, written out: no call on the usual path.
	tau, whole := wholeNanos(p.Limit, p.Interval)
	if !whole {
		tau = p.gcraNanos(p.Limit)
	}
	c, whole := wholeNanos(op.Cost, p.Interval)
	if !whole {
		c = p.gcraNanos(op.Cost)
	}
	tat = max(tat, op.Now)
	if next := tat + c; op.Now >= next-tau {
		d.Allowed = true
		tat = next
	} else {
		d.RetryAfter = after(next-tau, op.Now)
	}
	p.describeGCRA(d, tat, tau, op.Now)
	return tat
}

// describeGCRA fills in d's amounts and ResetAfter from the TAT a
// decision leaves, with the tolerance tau.
func (p *Params) describeGCRA(d *Decision, tat, tau, now int64) {
	backlog, t := tat-now, float64(p.Interval)
	p.describe(d, float64(backlog)/t)
	if d.Remaining > 0 {
		// Remaining from the nanosecond arithmetic, not Limit - Used, so
		// that a burst's last unit reads as exactly zero.
		d.Remaining = min(float64(tau-backlog)/t, p.Limit)
	}
	if backlog > 0 { // after(tat, now), written out to keep this inlined
		d.ResetAfter = time.Duration(backlog)
	}
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
