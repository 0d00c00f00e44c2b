package reference

import (
	"fmt"
	"math"
	"time"

	"github.com/sluice-go/sluice/engine"
)

// Band is the relative margin within which the production code's float
// arithmetic may decide either way: a decision whose Margin is at most Band
// is not compared. The production code compares amounts with a slack of
// 2^-48 (about 3.6e-15) of the limit and rounds durations up after
// forgiving the same relative error; its float levels also carry a few
// units of float rounding (2^-52 of the limit each) per operation since
// the last time the comparison synchronised. Band = 1e-12 (about 2^-40)
// leaves a factor of 256 over the slack, and is still a million times
// finer than one nanosecond of leak at the rates the tests use.
const Band = 1e-12

// durationSlack is the relative error the production code forgives a float
// duration before rounding it up (2^-48, see arith.CeilNanos), with
// a factor of 4 for the rounding of the float duration itself.
const durationSlack = 0x1p-46

// Compare checks the production decision got against the exact decision
// want for p. It first checks the invariants every decision keeps (no NaN,
// Used and Remaining within [0, Limit], durations not negative, RetryAfter
// zero iff admitted). Then, if want lies within [Band] of a threshold, it
// reports lenient and compares nothing else: the caller should then load
// the production state into the model. Otherwise it requires the same
// Allowed and Granted (a charge's or a refund's within the float rounding
// of what the key held, see [grantedSlack]), Used within Band of the
// limit, a lease's At (its identity) to the nanosecond, and durations
// (RetryAfter, ResetAfter, a reservation's Delay, and its At as Delay
// after now) equal to the nanosecond when they are exact instants (GCRA,
// refills, windows, log entries, leases), or within 1 ns plus the Band
// converted to time at the drain rate plus 2^-46 of the duration when
// they come from float amounts (the meters, the sliding counter's
// RetryAfter); a booking's ResetAfter, which counts from its instant,
// within that plus the difference of the booked instants. A bucket that
// has held more than its limit (a debt) widens the Band of thresholds,
// Used and the meters' durations by 2^-46 of the most it held (see
// [debtSlack]).
func Compare(p engine.Params, op engine.Op, got engine.Decision, want Decision) (lenient bool, err error) {
	if err := Invariants(p, op, got); err != nil {
		return false, err
	}
	debt := debtSlack(p, want)
	if want.Margin <= Band+debt/p.Limit {
		return true, nil
	}
	if got.Allowed != want.Allowed {
		return false, fmt.Errorf("Allowed = %v, want %v (margin %.3g)", got.Allowed, want.Allowed, want.Margin)
	}
	if diff := math.Abs(got.Granted - want.Granted); diff > grantedSlack(p, op, want) {
		return false, fmt.Errorf("Granted = %v, want %v (margin %.3g, held %v)", got.Granted, want.Granted, want.Margin, want.Held)
	}
	if (got.At == 0) != (want.At == 0) || p.Kind == engine.KindConcurrency && got.At != want.At {
		// A lease's At is its identity: an instant, to the nanosecond.
		return false, fmt.Errorf("At = %d, want %d", got.At, want.At)
	}
	used, _ := want.Used.Float64()
	if clamped := min(max(used, 0), p.Limit); math.Abs(got.Used-clamped) > Band*p.Limit+debt {
		return false, fmt.Errorf("Used = %v, want %v", got.Used, clamped)
	}
	for _, dur := range []struct {
		name      string
		got, want int64
		slack     float64 // added to the tolerance, when there is one
	}{
		{"RetryAfter", int64(got.RetryAfter), want.RetryAfter, 0},
		// A reservation's reset counts from its booked instant: the
		// instant's own rounding (within Delay's tolerance, which the
		// caller then follows) carries into it.
		{"ResetAfter", int64(got.ResetAfter), want.ResetAfter, math.Abs(float64(got.At - want.At))},
		{"Delay", int64(got.Delay), want.Delay, 0},
	} {
		tol := 0.0
		if want.Drain > 0 {
			tol = 1 + (Band*p.Limit+debt)*want.Drain + float64(dur.want)*durationSlack + dur.slack
		}
		if diff := math.Abs(float64(dur.got) - float64(dur.want)); diff > tol {
			return false, fmt.Errorf("%s = %v, want %v (tolerance %.3gns)", dur.name, time.Duration(dur.got), time.Duration(dur.want), tol)
		}
	}
	return false, nil
}

// debtSlack is how far the production's amounts may lie from the exact
// ones beyond Band of the limit, for a bucket whose state has held more
// than its limit (a debt: see [peaker]): 2^-46 of the most it held,
// want.Held, a few units in the last place of it. Thresholds are that
// much nearer (a margin relative to the limit within Band plus that
// share of it), Used may differ by that much, and durations computed
// from float amounts by that much at the drain rate. Zero for the GCRA,
// whose state is integer nanoseconds, and for a key that never held more
// than its limit.
func debtSlack(p engine.Params, want Decision) float64 {
	if p.Kind == engine.KindGCRA || want.Held <= p.Limit {
		return 0
	}
	return durationSlack * want.Held
}

// grantedSlack is how far the production's Granted may lie from the exact
// one: nowhere for a partial grant, whose units are whole or its cost; for
// a charge or a refund, the float rounding of amounts up to what the key
// held, want.Held (a level, the tokens in use, a TAT's nanoseconds as a
// float64 and divided by T, the ceiling computed in float), a few units
// in the last place of it, and the slack of the limit the float code
// carries beside that: Band of the limit, and 2^-46 of what it held.
func grantedSlack(p engine.Params, op engine.Op, want Decision) float64 {
	if op.Verb != engine.VerbCharge && op.Verb != engine.VerbRefund {
		return 0
	}
	return Band*p.Limit + durationSlack*want.Held
}

// Invariants checks what every decision of p for op keeps, whatever the
// state: amounts within bounds, nothing remaining after an exhaust (within
// [Band] of the limit), and the fields of each verb consistent with one
// another (see [verbInvariants]).
func Invariants(p engine.Params, op engine.Op, d engine.Decision) error {
	check := verbInvariants
	if p.Kind == engine.KindConcurrency {
		check = func(op engine.Op, d engine.Decision) error { return leaseInvariants(p, op, d) }
	}
	if err := check(op, d); err != nil {
		return err
	}
	switch {
	case math.IsNaN(d.Used) || math.IsNaN(d.Remaining):
		return fmt.Errorf("NaN in %+v", d)
	case d.Limit != p.Limit:
		return fmt.Errorf("Limit = %v, want %v", d.Limit, p.Limit)
	case !(d.Used >= 0 && d.Used <= d.Limit):
		return fmt.Errorf("Used = %v outside [0, %v]", d.Used, d.Limit)
	case !(d.Remaining >= 0 && d.Remaining <= d.Limit):
		return fmt.Errorf("Remaining = %v outside [0, %v]", d.Remaining, d.Limit)
	case math.Abs(d.Remaining-(d.Limit-d.Used)) > remainingSlack(p):
		return fmt.Errorf("Remaining = %v, want Limit-Used = %v", d.Remaining, d.Limit-d.Used)
	case d.RetryAfter < 0 || d.ResetAfter < 0:
		return fmt.Errorf("negative duration in %+v", d)
	case op.Verb == engine.VerbExhaust && d.Remaining > Band*p.Limit:
		// Full at now + MaxDelay, the key holds its whole limit at now
		// already (see [key.exhaust]), whatever the cost checked.
		return fmt.Errorf("Remaining = %v after an exhaust", d.Remaining)
	}
	return nil
}

// verbInvariants checks the fields that depend on the verb: RetryAfter is
// zero iff the request was admitted (a fill-up and a cancel have nothing
// to retry, and a partial grant of nothing that fits is not admitted
// either); only a booked reservation has a Delay, at most its MaxDelay
// and no earlier than its Op.At, and an At when Delay is positive: the
// instant Delay after now, or for one given an Op.At, a mark of the
// booking at or before it; only a partial grant, a charge and a refund
// have Granted: for a partial grant, whole units less than the cost or
// the whole cost, and more than zero only when admitted; for a charge
// and a refund, from zero to the cost, admitted or not (a check of
// nothing on a key in debt, or blocked, is denied); an exhaust leaves the
// key full at MaxDelay from now, so its ResetAfter reaches that at least.
func verbInvariants(op engine.Op, d engine.Decision) error {
	switch {
	case op.Verb == engine.VerbFill || op.Verb == engine.VerbCancel:
		if d.RetryAfter != 0 {
			return fmt.Errorf("RetryAfter = %v for a %v", d.RetryAfter, op.Verb)
		}
	case op.Verb == engine.VerbAtMost && op.Cost == 0:
		if d.Allowed {
			return fmt.Errorf("Allowed for a partial grant of nothing")
		}
	case d.Allowed != (d.RetryAfter == 0):
		return fmt.Errorf("Allowed = %v with RetryAfter = %v", d.Allowed, d.RetryAfter)
	}
	if op.Verb != engine.VerbReserve || !d.Allowed {
		if d.Delay != 0 || d.At != 0 {
			return fmt.Errorf("Delay = %v, At = %d for a %v that booked nothing", d.Delay, d.At, op.Verb)
		}
	} else {
		switch {
		case d.Delay < 0 || int64(d.Delay) > op.MaxDelay:
			return fmt.Errorf("Delay = %v outside [0, MaxDelay %v]", d.Delay, time.Duration(op.MaxDelay))
		case op.At > op.Now+int64(d.Delay):
			return fmt.Errorf("Delay = %v books before Op.At %d", d.Delay, op.At)
		case d.Delay > 0 && op.At == 0 && d.At != op.Now+int64(d.Delay):
			return fmt.Errorf("At = %d, want now %d + Delay %v", d.At, op.Now, d.Delay)
		case d.Delay > 0 && d.At != 0 && d.At != op.Now+int64(d.Delay):
			// Booked from op.At: its instant, or none (the GCRA and the
			// interval-refill bucket cannot give such a booking back).
			return fmt.Errorf("At = %d, want now %d + Delay %v or none", d.At, op.Now, d.Delay)
		case d.Delay == 0 && d.At != 0:
			return fmt.Errorf("At = %d for a reservation that need not wait", d.At)
		}
	}
	if op.Verb == engine.VerbExhaust && int64(d.ResetAfter) < op.MaxDelay {
		return fmt.Errorf("ResetAfter = %v, but an exhaust leaves the key full %v from now", d.ResetAfter, time.Duration(op.MaxDelay))
	}
	switch {
	case op.Verb == engine.VerbCharge || op.Verb == engine.VerbRefund:
		// What it recorded or gave back, denied or not: none of it
		// beyond the cost.
		if !(d.Granted >= 0 && d.Granted <= op.Cost) {
			return fmt.Errorf("Granted = %v of a %v of %v", d.Granted, op.Verb, op.Cost)
		}
	case op.Verb != engine.VerbAtMost:
		if d.Granted != 0 {
			return fmt.Errorf("Granted = %v for a %v", d.Granted, op.Verb)
		}
	case d.Granted != 0 && !d.Allowed:
		return fmt.Errorf("Granted = %v but not Allowed", d.Granted)
	case d.Allowed && d.Granted != op.Cost && (d.Granted != math.Floor(d.Granted) || d.Granted < 1 || d.Granted >= op.Cost):
		return fmt.Errorf("Granted = %v of cost %v: neither the cost nor whole units less than it", d.Granted, op.Cost)
	}
	return nil
}

// leaseInvariants checks the fields of a concurrency limit's decision
// that depend on the verb, in place of [verbInvariants]: no Delay and no
// Granted ever; RetryAfter zero iff an acquisition or a check is admitted,
// and always for a release, an extension or a leaving, which have nothing
// to retry; an At only for a lease taken (an admitted acquisition of a
// cost above zero) or extended, at least Interval after now, and then the
// latest identity the key handed out, so that ResetAfter reaches it at
// least (exactly, unless a waiter's deadline lies later); or for a denied
// acquisition with a patience, which waits in the line: a ticket from 1
// to 2^53, and a deadline a patience from now, which ResetAfter reaches at
// least.
func leaseInvariants(p engine.Params, op engine.Op, d engine.Decision) error {
	var takes bool // whether the decision hands out an identity
	switch op.Verb {
	case engine.VerbCancel, engine.VerbExtend, engine.VerbLeave:
		if d.RetryAfter != 0 {
			return fmt.Errorf("RetryAfter = %v for a %v", d.RetryAfter, op.Verb)
		}
		takes = op.Verb == engine.VerbExtend && d.Allowed
	default:
		if d.Allowed != (d.RetryAfter == 0) {
			return fmt.Errorf("Allowed = %v with RetryAfter = %v", d.Allowed, d.RetryAfter)
		}
		takes = op.Verb == engine.VerbAllow && d.Allowed && op.Cost > 0
	}
	waits := op.Verb == engine.VerbAllow && !d.Allowed && d.At != 0
	switch {
	case d.Delay != 0 || d.Granted != 0:
		return fmt.Errorf("Delay = %v, Granted = %v for a lease's %v", d.Delay, d.Granted, op.Verb)
	case waits && (op.MaxDelay <= 0 || d.At < 1 || d.At > 1<<53):
		return fmt.Errorf("ticket %d for a %v denied with a patience of %v", d.At, op.Verb, time.Duration(op.MaxDelay))
	case waits && int64(d.ResetAfter) < op.MaxDelay:
		return fmt.Errorf("ResetAfter = %v, but the waiter stays in line %v from now", d.ResetAfter, time.Duration(op.MaxDelay))
	case !takes && !waits && d.At != 0:
		return fmt.Errorf("At = %d for a %v that took no lease (allowed %v, cost %v)", d.At, op.Verb, d.Allowed, op.Cost)
	case takes && d.At < op.Now+p.Interval:
		return fmt.Errorf("At = %d for a lease taken at %d with a time to live of %v", d.At, op.Now, time.Duration(p.Interval))
	case takes && int64(d.ResetAfter) < d.At-op.Now:
		return fmt.Errorf("ResetAfter = %v, but the lease handed out expires %v from now", d.ResetAfter, time.Duration(d.At-op.Now))
	}
	return nil
}

// remainingSlack is how far Remaining may be from Limit-Used: the float
// rounding of the subtraction, and for GCRA one nanosecond's worth of cost,
// since it measures Remaining against the burst rounded to nanoseconds
// (round(burst*T)/T), not against the limit.
func remainingSlack(p engine.Params) float64 {
	if p.Kind == engine.KindGCRA {
		return 1 / float64(p.Interval)
	}
	return p.Limit * 0x1p-50
}
