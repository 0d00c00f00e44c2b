package sluice_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/guarantees"
	"github.com/sluice-go/sluice/internal/reference"
)

// The strict property tests replay the random traces of the property
// tests (every verb the algorithm runs, reservations booked no earlier
// than an instant, cancels in any order, partial grants, nanosecond times,
// a clock stepping back) on Params with a penalty, with denials counted,
// and with both, for every algorithm, against reference.Strict: the exact
// model of the two options written from their definitions around the
// algorithm's own model. Each decision is compared with
// reference.CompareStrict, with the tolerances of reference.Compare (see
// proof_test.go), and Blocked exactly. Beside the model, each step is held
// to what the definitions say directly:
//
//   - a key blocked before a request is blocked after it, and its block
//     does not move (never extended from inside); a block starts only at
//     an overflow (an Allow denied, a reservation not booked, a fill-up
//     that does not fit) and lasts exactly the penalty; a check, a cancel
//     and a partial grant never start one;
//   - while blocked nothing is admitted: RetryAfter, a booking's Delay and
//     ResetAfter reach the block's end at least;
//   - a counted denial leaves the key full (no Remaining);
//   - a denied Allow or check is admitted at exactly its RetryAfter, and
//     not a nanosecond earlier, on the key as the decision left it;
//   - a decision that records nothing (Params.Records) leaves the state
//     as it was, bit for bit.

// strictVariant is one way of making an algorithm strict.
type strictVariant struct {
	name    string
	penalty bool
	count   bool
}

var strictVariants = []strictVariant{
	{"penalty", true, false},
	{"counted denials", false, true},
	{"penalty and counted denials", true, true},
}

// withVariant returns p under v, with a penalty drawn from rng around p's
// time scale: a nanosecond, a third of a period, a period, a little more
// than two, ten.
func withVariant(p sluice.Params, v strictVariant, rng *rand.Rand) sluice.Params {
	p.CountDenied = v.count
	if v.penalty {
		period := guarantees.Period(p)
		penalties := [...]int64{1, period/3 + 1, period, 2*period + 13, 10 * period}
		p.Penalty = min(penalties[rng.IntN(len(penalties))], 1<<60)
	}
	return p
}

func TestStrictStepMatchesReference(t *testing.T) {
	for ai, alg := range testAlgorithms(t) {
		for vi, v := range strictVariants {
			t.Run(alg.name+", "+v.name, func(t *testing.T) {
				t.Parallel()
				failures := 0
				var total strictStats
				traces := traceCount(150)
				for trace := range traces {
					seed := uint64(ai)<<40 | uint64(vi)<<32 | uint64(trace)
					stats, err := strictTrace(alg.params, v, seed)
					total.add(stats)
					if err != nil {
						t.Error(err)
						if failures++; failures == 3 {
							t.FailNow()
						}
					}
				}
				t.Logf("%d traces: %v", traces, total)
				for _, verb := range algorithmVerbs(alg.params) {
					require.Greater(t, total.exact[verb], 20, "%v decided exactly", verb)
				}
				if v.penalty {
					require.Positive(t, total.started, "blocks started")
					require.Positive(t, total.inBlock, "decisions in a block")
				}
				if v.count {
					require.Positive(t, total.counted, "counted denials")
				}
			})
		}
	}
}

// strictTrace replays the random trace of seed against p under v and the
// strict model.
func strictTrace(base sluice.Params, v strictVariant, seed uint64) (strictStats, error) {
	rng := rand.New(rand.NewPCG(seed, 0x5751c7))
	p := withVariant(base, v, rng)
	m, err := reference.NewStrict(p)
	if err != nil {
		return strictStats{}, err
	}
	c := &strictChecker{checker: checker{p: p, model: m, where: fmt.Sprintf("strict seed %d", seed)}, strict: m}
	costs := costMode(rng.IntN(int(numCostModes)))
	now := startTime(rng, p)
	var last sluice.Decision
	for range 30 + rng.IntN(120) {
		now = c.nextTime(rng, now, last)
		switch r := rng.IntN(100); {
		case r < 3:
			c.reset()
			continue
		case r < 5:
			if err := c.invalid(rng, now); err != nil {
				return c.results(), err
			}
			continue
		}
		if last, err = c.apply(c.drawOp(rng, costs, now)); err != nil {
			return c.results(), err
		}
	}
	return c.results(), nil
}

// results returns what the trace decided.
func (c *strictChecker) results() strictStats {
	s := c.strictStats
	s.traceStats = c.stats
	return s
}

// strictChecker replays operations against Params.Step and the strict
// model. It draws its operations and times as the property tests'
// checker does, and keeps its state in the checker's.
type strictChecker struct {
	checker
	strict *reference.Strict
	strictStats
}

// strictStats counts what a strict trace decided, beside traceStats.
type strictStats struct {
	traceStats
	// Blocks started, decisions made in a block, and denials counted.
	started, inBlock, counted int
}

func (s *strictStats) add(o strictStats) {
	s.traceStats.add(o.traceStats)
	s.started += o.started
	s.inBlock += o.inBlock
	s.counted += o.counted
}

func (s strictStats) String() string {
	return fmt.Sprintf("%v; %d blocks started, %d decisions in a block, %d denials counted",
		s.traceStats, s.started, s.inBlock, s.counted)
}

// nextTime draws the time of the next operation: as the checker does, and
// often on the edges of the key's block: a nanosecond before its end, on
// it, just after, and back inside it.
func (c *strictChecker) nextTime(rng *rand.Rand, now int64, last sluice.Decision) int64 {
	until := c.state.Until
	if until == 0 || rng.IntN(4) > 0 {
		return c.checker.nextTime(rng, now, last)
	}
	var next int64
	switch rng.IntN(4) {
	case 0:
		next = until - 1
	case 1:
		next = until
	case 2:
		next = until + rng.Int64N(guarantees.Period(c.p))
	default:
		next = until - 1 - rng.Int64N(max(c.p.Penalty, 1))
	}
	return min(max(next, 0), maxTime)
}

// apply runs op on both sides, compares them, and checks the step against
// the definitions.
func (c *strictChecker) apply(op sluice.Op) (sluice.Decision, error) {
	c.ops = append(c.ops, formatOp(op))
	before := cloneState(c.state)
	next, got, err := c.p.Step(cloneState(c.state), op)
	if err != nil {
		return got, c.fail("Step: %v", err)
	}
	want := c.strict.Decide(op)
	lenient, err := reference.CompareStrict(c.p, op, got, want)
	if err != nil {
		return got, c.fail("%v\ngot  %+v\nwant %+v (Used %v)\nstate before %+v, after %+v", err, got, want, ratString(want.Used), before, next)
	}
	switch {
	case lenient:
		c.stats.lenient[op.Verb]++
		defer c.strict.Load(next)
	case got.At != want.At:
		c.stats.exact[op.Verb]++
		c.stats.followed++
		defer c.strict.Load(next)
	default:
		c.stats.exact[op.Verb]++
	}
	c.stats.count(op, got)
	if op.Verb == sluice.VerbReserve {
		c.lastRefused = int64(got.RetryAfter)
		if got.At != 0 {
			c.booked = append(c.booked, sluice.Op{Verb: sluice.VerbCancel, Cost: op.Cost, At: got.At})
		}
	}
	recorded := c.p.Records(op.Verb, got)
	if err := c.blockRules(op, before, next, got, recorded); err != nil {
		return got, c.fail("%v\ndecision %+v\nstate before %+v, after %+v", err, got, before, next)
	}
	if !recorded {
		if !reflect.DeepEqual(next, before) {
			return got, c.fail("a %v that records nothing (%+v) changed the state from %+v to %+v", op.Verb, got, before, next)
		}
	} else {
		if err := checkStrictTransition(before, next, op, got); err != nil {
			return got, c.fail("%v", err)
		}
		c.state = next
	}
	if !lenient {
		if err := c.countedDenial(op, got); err != nil {
			return got, c.fail("%v\ndecision %+v, state %+v", err, got, c.state)
		}
		if err := c.retryExact(op, got); err != nil {
			return got, c.fail("%v\ndecision %+v, state %+v", err, got, c.state)
		}
	}
	return got, nil
}

// checkStrictTransition checks a recorded step's new state as
// checkTransition does, and its block: a state keeps only a block in
// force, and a key fresh but for its block lives until the block's end.
func checkStrictTransition(before, next sluice.State, op sluice.Op, d sluice.Decision) error {
	switch {
	case next.Until != 0 && next.Until <= op.Now:
		return fmt.Errorf("the state %+v keeps a block that has ended", next)
	case next.Until != 0 && isZero(next):
		if d.ResetAfter != time.Duration(next.Until-op.Now) {
			return fmt.Errorf("ResetAfter is %v, but the key is fresh but for its block until %d", d.ResetAfter, next.Until)
		}
		return nil
	}
	return checkTransition(before, next, op, d)
}

// blockRules checks the step's block against the definitions of a
// penalty.
func (c *strictChecker) blockRules(op sluice.Op, before, next sluice.State, d sluice.Decision, recorded bool) error {
	now := op.Now
	was := before.Until > now
	end := before.Until
	switch {
	case c.p.Penalty == 0 && (d.Blocked || next.Until != 0):
		return fmt.Errorf("blocked without a penalty")
	case was && !d.Blocked:
		return fmt.Errorf("a key blocked until %d decided unblocked", before.Until)
	case was && recorded && next.Until != before.Until:
		return fmt.Errorf("a block until %d moved to %d from inside", before.Until, next.Until)
	case !was && d.Blocked:
		// A block starts here: only at an overflow, for the penalty.
		end = next.Until
		overflow := op.Verb == sluice.VerbAllow || op.Verb == sluice.VerbReserve || op.Verb == sluice.VerbFill
		switch {
		case !overflow:
			return fmt.Errorf("a %v started a block", op.Verb)
		case op.Verb != sluice.VerbFill && d.Allowed:
			return fmt.Errorf("an admission started a block")
		case !recorded || next.Until != now+c.p.Penalty:
			return fmt.Errorf("a block started at %d ends at %d, not a penalty of %v later", now, next.Until, time.Duration(c.p.Penalty))
		}
		c.strictStats.started++
	}
	if !d.Blocked {
		return nil
	}
	if was {
		c.strictStats.inBlock++
	}
	wait := time.Duration(end - now)
	switch {
	case op.Verb == sluice.VerbReserve && d.Allowed && d.Delay < wait:
		return fmt.Errorf("a reservation in a block until %d acts after %v", end, d.Delay)
	case op.Verb != sluice.VerbReserve && op.Verb != sluice.VerbCancel && (d.Allowed || d.RetryAfter < wait):
		return fmt.Errorf("a blocked key admitted, or said to retry before the block ends in %v", wait)
	case d.ResetAfter < wait:
		return fmt.Errorf("ResetAfter %v ends before the block, in %v", d.ResetAfter, wait)
	}
	return nil
}

// countedDenial checks that a counted denial left the key full.
func (c *strictChecker) countedDenial(op sluice.Op, d sluice.Decision) error {
	if !c.p.CountDenied || d.Allowed || op.Verb != sluice.VerbAllow && op.Verb != sluice.VerbReserve {
		return nil
	}
	c.strictStats.counted++
	_, left, err := c.p.Step(cloneState(c.state), sluice.Op{Verb: sluice.VerbCheck, Now: op.Now})
	if err != nil {
		return err
	}
	if left.Remaining > c.p.Limit*reference.Band {
		return fmt.Errorf("a counted denial left %v of the limit %v", left.Remaining, c.p.Limit)
	}
	return nil
}

// retryExact checks that a denied Allow or check of a cost is admitted
// after exactly its RetryAfter, on the key as the decision left it: a
// nanosecond earlier it is denied.
func (c *strictChecker) retryExact(op sluice.Op, d sluice.Decision) error {
	if d.Allowed || op.Verb != sluice.VerbAllow && op.Verb != sluice.VerbCheck {
		return nil
	}
	at := op.Now + int64(d.RetryAfter)
	for _, t := range []int64{at - 1, at} {
		if t < op.Now || t > maxTime {
			continue
		}
		_, then, err := c.p.Step(cloneState(c.state), sluice.Op{Verb: sluice.VerbCheck, Cost: op.Cost, Now: t})
		if err != nil {
			return err
		}
		if then.Allowed != (t == at) {
			return fmt.Errorf("denied with RetryAfter %v, but a check %v later decides Allowed = %v", d.RetryAfter, time.Duration(t-op.Now), then.Allowed)
		}
	}
	return nil
}

// ratString formats an exact amount for failure messages.
func ratString(x interface{ FloatString(int) string }) string {
	if x == nil || reflect.ValueOf(x).IsNil() {
		return "<nil>"
	}
	return x.FloatString(12)
}
