package sluice_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/guarantees"
)

// What the property traces send beside Allow, Check and Fill: reservations
// with maximum delays drawn around the algorithm's time scale and on the
// very nanosecond that decides whether a booking comes within them,
// cancels of the trace's earlier reservations in any order, and partial
// grants of up to several times the limit.

// drawVerb draws the verb of the next operation among those p runs; a
// cancel only if something was booked.
func drawVerb(rng *rand.Rand, p engine.Params, booked bool) engine.Verb {
	switch r := rng.IntN(100); {
	case r < 12:
		return engine.VerbCheck
	case r < 24 && p.Kind == engine.KindLeakyBucket:
		return engine.VerbFill
	case r >= 24 && r < 44 && p.Reservable():
		return engine.VerbReserve
	case r >= 44 && r < 56 && p.Reservable() && booked:
		return engine.VerbCancel
	case r >= 56 && r < 68:
		return engine.VerbAtMost
	}
	return engine.VerbAllow
}

// drawOp draws the trace's next operation at now.
func (c *checker) drawOp(rng *rand.Rand, costs costMode, now int64) engine.Op {
	op := engine.Op{Verb: drawVerb(rng, c.p, len(c.booked) > 0), Now: now}
	switch op.Verb {
	case engine.VerbCancel:
		op = c.drawCancel(rng)
		op.Now = now
	case engine.VerbReserve:
		op.Cost = drawCost(rng, c.p, costs, op.Verb)
		op.MaxDelay = c.drawDelay(rng, now)
		if rng.IntN(5) == 0 {
			// Booked no earlier than an instant, as a group books: often
			// before the instant the algorithm needs, or before now.
			scale := guarantees.Period(c.p)
			op.At = max(now+rng.Int64N(2*scale)-scale/2, 0)
		}
		c.lastReserve = op
	case engine.VerbAtMost:
		op.Cost = drawAtMostCost(rng, c.p, costs)
	default:
		op.Cost = drawCost(rng, c.p, costs, op.Verb)
	}
	return op
}

// drawCancel draws a cancel of one of the trace's booked reservations:
// the latest one or any earlier one, perhaps given back already; now and
// then one of an instant nothing was booked for, or with another cost
// than was booked.
func (c *checker) drawCancel(rng *rand.Rand) engine.Op {
	op := c.booked[len(c.booked)-1]
	if rng.IntN(2) == 0 {
		op = c.booked[rng.IntN(len(c.booked))]
	}
	switch rng.IntN(20) {
	case 0:
		op.At++
	case 1:
		op.At--
	case 2:
		op.Cost = min(op.Cost*2, c.p.Limit)
	}
	return op
}

// drawDelay draws a reservation's maximum delay: none; around the
// algorithm's time scale; longer than any booking; and, after a
// reservation was refused, exactly what the refusal said it would take
// to book now, or one nanosecond less.
func (c *checker) drawDelay(rng *rand.Rand, now int64) int64 {
	scale := guarantees.Period(c.p)
	switch r := rng.IntN(20); {
	case r < 3:
		return 0
	case r < 11:
		return rng.Int64N(scale)
	case r < 15:
		return scale + rng.Int64N(4*scale)
	case r < 16:
		return 1 << 60
	}
	last := c.lastReserve
	if last.Verb != engine.VerbReserve || last.At != 0 || c.lastRefused == 0 {
		return rng.Int64N(2 * scale)
	}
	// The refused booking's instant, if nothing was recorded since.
	at := last.Now + last.MaxDelay + c.lastRefused
	return min(max(at-now-rng.Int64N(2), 0), 1<<60)
}

// drawAtMostCost draws what a partial grant asks for: a cost as Allow
// would (at most the limit), or up to three times the limit, whole or
// fractional.
func drawAtMostCost(rng *rand.Rand, p engine.Params, mode costMode) float64 {
	if rng.IntN(3) > 0 {
		return drawCost(rng, p, mode, engine.VerbAtMost)
	}
	c := rng.Float64() * 3 * p.Limit
	if mode == unitCosts || mode == integerCosts {
		c = math.Ceil(c)
	}
	return c
}

// nextTime draws the time of the trace's next operation: as nextTime
// does, and often just before one of the trace's booked instants (where
// a cancel still gives the cost back and a request sees the booked point
// ahead of it), one nanosecond before it, or on it.
func (c *checker) nextTime(rng *rand.Rand, now int64, last engine.Decision) int64 {
	n := len(c.booked)
	if n == 0 || rng.IntN(4) > 0 {
		return nextTime(rng, c.p, now, last)
	}
	at := c.booked[n-1].At
	if rng.IntN(2) == 0 {
		at = c.booked[rng.IntN(n)].At
	}
	var next int64
	switch rng.IntN(4) {
	case 0:
		next = at - 1
	case 1:
		next = at
	default:
		next = at - 1 - rng.Int64N(guarantees.Period(c.p))
	}
	return min(max(next, 0), maxTime)
}

// TestPartialGrantOfNothingRecordsNothing asks for a partial grant of a
// cost of zero on a key whose state is older than its reset: the whole
// cost, zero, fits, yet nothing is granted, so the grant is not Allowed
// (as go-redis/redis_rate's AllowAtMost reports 0 allowed). The Store
// contract records a partial grant only when Granted > 0 (Verb.Records),
// and stores write nothing back then, so Step must return the state
// unchanged, as it does for a check; a Step that moves or forgets it
// instead leaves a key kept by Step and the same key in a store in
// different states, which a clock stepping back then tells apart.
func TestPartialGrantOfNothingRecordsNothing(t *testing.T) {
	start := time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC).UnixNano()
	for _, alg := range testAlgorithms(t) {
		p := alg.params
		t.Run(alg.name, func(t *testing.T) {
			s, d, err := p.Step(engine.State{}, engine.Op{Verb: engine.VerbAllow, Cost: p.Limit / 2, Now: start})
			require.NoError(t, err)
			require.True(t, d.Allowed)
			later := start + int64(d.ResetAfter) + 10*guarantees.Period(p)
			next, d, err := p.Step(cloneState(s), engine.Op{Verb: engine.VerbAtMost, Cost: 0, Now: later})
			require.NoError(t, err)
			require.False(t, d.Allowed, "a grant of nothing is not admitted")
			require.Zero(t, d.Granted)
			require.False(t, p.Records(engine.VerbAtMost, &d), "the contract records nothing")
			require.Equal(t, s, next, "Step changed the state of a decision that records nothing")
		})
	}
}

// sameAsAllow checks the decision got and state next that Step gave for a
// reservation or partial grant op against what the definitions say in
// terms of Allow and Check from the same state, bit for bit:
//
//   - Allow's RetryAfter is the wait until the earliest instant it would
//     admit the cost, and a reservation waits for that instant or for its
//     Op.At, the earliest instant to book, if that is later;
//   - a reservation that need not wait is that Allow: the same decision
//     and state, whatever its MaxDelay;
//   - one that must wait is booked iff the wait is at most MaxDelay, with
//     that Delay (and At now plus it, without an Op.At), and refused
//     otherwise with the wait less MaxDelay as RetryAfter and the state
//     unchanged;
//   - a partial grant of g > 0 is Allow of g: the same decision and state,
//     with Granted g; one of nothing is a check of one unit (or of the
//     cost, if less), not admitted, with the state unchanged.
func (c *checker) sameAsAllow(op engine.Op, next engine.State, got engine.Decision) error {
	switch op.Verb {
	case engine.VerbReserve:
		allowed, allow, err := c.p.Step(cloneState(c.state), engine.Op{Verb: engine.VerbAllow, Cost: op.Cost, Now: op.Now})
		if err != nil {
			return err
		}
		wait := max(int64(allow.RetryAfter), op.At-op.Now)
		switch {
		case wait <= 0:
			if got != allow || !reflect.DeepEqual(next, allowed) {
				return fmt.Errorf("a reservation Allow admits now decided %+v with state %+v; Allow decided %+v with state %+v", got, next, allow, allowed)
			}
		case wait <= op.MaxDelay:
			if !got.Allowed || int64(got.Delay) != wait || op.At == 0 && got.At != op.Now+wait {
				return fmt.Errorf("a reservation within its MaxDelay of a wait of %v decided %+v", time.Duration(wait), got)
			}
		default:
			if got.Allowed || int64(got.RetryAfter) != wait-op.MaxDelay || !reflect.DeepEqual(next, c.state) {
				return fmt.Errorf("a reservation beyond its MaxDelay of a wait of %v decided %+v with state %+v", time.Duration(wait), got, next)
			}
		}
	case engine.VerbAtMost:
		verb, cost := engine.VerbAllow, got.Granted
		if got.Granted == 0 {
			verb, cost = engine.VerbCheck, min(op.Cost, 1)
		}
		then, want, err := c.p.Step(cloneState(c.state), engine.Op{Verb: verb, Cost: cost, Now: op.Now})
		if err != nil {
			return err
		}
		want.Granted = got.Granted
		want.Allowed = want.Allowed && got.Granted > 0 // a grant of nothing is not admitted
		if got != want || !reflect.DeepEqual(next, then) {
			return fmt.Errorf("a partial grant of %v decided %+v with state %+v; %v of %v decides %+v with state %+v", got.Granted, got, next, verb, cost, want, then)
		}
	}
	return nil
}

// TestABookingFromALaterInstantIsKeptAndOnlyAMeterGivesItBack books a
// reservation, from rest, no earlier than an instant later than the
// algorithm needs (Op.At, as a group books its limits at their common
// instant), with costs of zero and one, at a realistic time and at one
// just after the epoch. Every reserving algorithm books it from that
// instant and keeps it in the state the decision describes (a ResetAfter
// that is not zero, on a state that is not empty). A meter (the leaky
// bucket, the continuously refilled token bucket), whose point is the
// booking's instant, reports that instant as At, and a cancel by it before
// the instant gives the booking back. The GCRA and the interval-refill
// token bucket, whose state cannot tell the booking from a later one,
// report no At: nothing to cancel by, so nothing is given back.
func TestABookingFromALaterInstantIsKeptAndOnlyAMeterGivesItBack(t *testing.T) {
	realistic := time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC).UnixNano()
	for _, alg := range reservingAlgorithms(t) {
		p := alg.params
		for _, now := range []int64{realistic, 100} {
			for _, cost := range []float64{0, 1} {
				t.Run(fmt.Sprintf("%s/cost %v from %d", alg.name, cost, now), func(t *testing.T) {
					from := now + p.Interval + p.Interval/2
					s, d, err := p.Step(engine.State{}, engine.Op{Verb: engine.VerbReserve, Cost: cost, Now: now, MaxDelay: 1 << 60, At: from})
					require.NoError(t, err)
					require.True(t, d.Allowed)
					require.Equal(t, time.Duration(from-now), d.Delay, "booked from the instant asked")
					require.Positive(t, d.ResetAfter)
					require.NotEqual(t, engine.State{}, s, "the booking described by %+v was not kept", d)
					meter := p.Kind == engine.KindLeakyBucket || p.Kind == engine.KindTokenBucket && !p.IntervalRefill
					if !meter {
						require.Zero(t, d.At, "no instant to give back by")
						return
					}
					require.Equal(t, from, d.At)
					_, c, err := p.Step(s, engine.Op{Verb: engine.VerbCancel, Cost: cost, Now: now, At: d.At})
					require.NoError(t, err, "the cancel of %+v", d)
					require.True(t, c.Allowed, "the cancel of %+v gave nothing back", d)
				})
			}
		}
	}
}
