package sluice_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"

	"github.com/sluice-go/sluice/engine"
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
//     that does not fit) and lasts exactly the penalty; a check, a cancel,
//     a partial grant, an exhaust, a charge and a refund never start one,
//     and the last three leave the block as they found it;
//   - while blocked nothing is admitted: RetryAfter, a booking's Delay and
//     ResetAfter reach the block's end at least;
//   - a counted denial leaves the key full (no Remaining);
//   - a denied Allow or check (an exhaust, a charge and a refund are
//     checks) is admitted at exactly its RetryAfter, and not a nanosecond
//     earlier, on the key as the decision left it;
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
func withVariant(p engine.Params, v strictVariant, rng *rand.Rand) engine.Params {
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
				traces := traceCount(60)
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
					require.Greater(t, total.exact[verb], 10, "%v decided exactly", verb)
				}
				if v.penalty {
					require.Positive(t, total.never, "costs that never fit decided")
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
func strictTrace(base engine.Params, v strictVariant, seed uint64) (strictStats, error) {
	rng := rand.New(rand.NewPCG(seed, 0x5751c7))
	p := withVariant(base, v, rng)
	m, err := reference.NewStrict(p)
	if err != nil {
		return strictStats{}, err
	}
	c := &strictChecker{checker: checker{p: p, model: m, where: fmt.Sprintf("strict seed %d", seed)}, strict: m}
	err = runTrace(rng, p, c)
	return c.results(), err
}

// invalid sends an operation Step rejects, as the property tests do; one
// that overflows under the penalty is still decided, and is checked as any
// other decision. Under a penalty, half of them are such overflows: an
// Allow or a reservation of twice the limit.
func (c *strictChecker) invalid(rng *rand.Rand, now int64) error {
	op, want := c.drawInvalid(rng, now)
	if c.p.Penalty > 0 && rng.IntN(2) == 0 {
		op, want = engine.Op{Verb: engine.VerbAllow, Cost: 2 * c.p.Limit, Now: now}, sluice.ErrCostExceedsLimit
		if c.p.Reservable() && rng.IntN(2) == 0 {
			op.Verb, op.MaxDelay = engine.VerbReserve, rng.Int64N(guarantees.Period(c.p)+1)
		}
	}
	if c.p.Overflows(op, want) {
		c.strictStats.never++
		_, err := c.apply(op)
		return err
	}
	return c.rejects(op, want)
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
	// Blocks started, decisions made in a block, denials counted, and
	// costs that never fit decided under a penalty.
	started, inBlock, counted, never int
}

func (s *strictStats) add(o strictStats) {
	s.traceStats.add(o.traceStats)
	s.started += o.started
	s.inBlock += o.inBlock
	s.counted += o.counted
	s.never += o.never
}

func (s strictStats) String() string {
	return fmt.Sprintf("%v; %d blocks started, %d decisions in a block, %d denials counted, %d costs that never fit",
		s.traceStats, s.started, s.inBlock, s.counted, s.never)
}

// nextTime draws the time of the next operation: as the checker does, and
// often on the edges of the key's block: a nanosecond before its end, on
// it, just after, and back inside it.
func (c *strictChecker) nextTime(rng *rand.Rand, now int64, last engine.Decision) int64 {
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
func (c *strictChecker) apply(op engine.Op) (engine.Decision, error) {
	c.ops = append(c.ops, formatOp(op))
	before := cloneState(c.state)
	next, got, err := c.p.Step(cloneState(c.state), op)
	if err != nil && !c.p.Overflows(op, err) {
		return got, c.fail("Step: %v", err)
	}
	if err := exhaustRules(c.p, op, next, got); err != nil {
		return got, c.fail("%v", err)
	}
	if err := settleRules(c.p, op, before, next, got); err != nil {
		return got, c.fail("%v", err)
	}
	want := c.strict.Decide(op)
	lenient, err := reference.CompareStrict(c.p, op, got, want)
	if err != nil {
		return got, c.fail("%v\ngot  %+v\nwant %+v (Used %v)\nstate before %+v, after %+v", err, got, want, ratString(want.Used), before, next)
	}
	if c.tally(op, got, lenient, want.At) {
		defer c.strict.Load(next)
	}
	recorded := c.p.Records(op.Verb, &got)
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
	// A cost that never fits is neither counted nor retried; a settlement
	// is retried as the check of nothing it is, whatever it cost.
	if !lenient && (op.Cost <= c.p.Limit || settles(op.Verb)) {
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
// force (but an exhaust's, a charge's and a refund's, which leave the
// block as they found it, an ended one included: see blockRules), and a
// key fresh but for its block lives until the block's end.
func checkStrictTransition(before, next engine.State, op engine.Op, d engine.Decision) error {
	switch {
	case next.Until != 0 && next.Until <= op.Now && op.Verb != engine.VerbExhaust && !settles(op.Verb):
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
func (c *strictChecker) blockRules(op engine.Op, before, next engine.State, d engine.Decision, recorded bool) error {
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
	case (op.Verb == engine.VerbExhaust || settles(op.Verb)) && next.Until != before.Until && (next.Until != 0 || !isZero(next)):
		// Unless it left the key fresh, and so the zero State.
		return fmt.Errorf("a %v changed the block until %d to %d", op.Verb, before.Until, next.Until)
	case !was && d.Blocked:
		// A block starts here: only at an overflow, for the penalty.
		end = next.Until
		overflow := op.Verb == engine.VerbAllow || op.Verb == engine.VerbReserve || op.Verb == engine.VerbFill
		switch {
		case !overflow:
			return fmt.Errorf("a %v started a block", op.Verb)
		case op.Verb != engine.VerbFill && d.Allowed:
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
	case op.Verb == engine.VerbReserve && d.Allowed && d.Delay < wait:
		return fmt.Errorf("a reservation in a block until %d acts after %v", end, d.Delay)
	case op.Verb != engine.VerbReserve && op.Verb != engine.VerbCancel && (d.Allowed || d.RetryAfter < wait):
		return fmt.Errorf("a blocked key admitted, or said to retry before the block ends in %v", wait)
	case d.ResetAfter < wait:
		return fmt.Errorf("ResetAfter %v ends before the block, in %v", d.ResetAfter, wait)
	}
	return nil
}

// countedDenial checks that a counted denial left the key full.
func (c *strictChecker) countedDenial(op engine.Op, d engine.Decision) error {
	if !c.p.CountDenied || d.Allowed || op.Verb != engine.VerbAllow && op.Verb != engine.VerbReserve {
		return nil
	}
	c.strictStats.counted++
	_, left, err := c.p.Step(cloneState(c.state), engine.Op{Verb: engine.VerbCheck, Now: op.Now})
	if err != nil {
		return err
	}
	if left.Remaining > c.p.Limit*reference.Band {
		return fmt.Errorf("a counted denial left %v of the limit %v", left.Remaining, c.p.Limit)
	}
	return nil
}

// retryExact checks that a denied Allow, check or exhaust of a cost, or a
// charge or a refund (a check of nothing: in debt, or blocked), is
// admitted after exactly its RetryAfter, on the key as the decision left
// it: a nanosecond earlier it is denied.
func (c *strictChecker) retryExact(op engine.Op, d engine.Decision) error {
	if d.Allowed || op.Verb != engine.VerbAllow && op.Verb != engine.VerbCheck && op.Verb != engine.VerbExhaust && !settles(op.Verb) {
		return nil
	}
	cost := op.Cost
	if settles(op.Verb) {
		cost = 0
	}
	at := op.Now + int64(d.RetryAfter)
	for _, t := range []int64{at - 1, at} {
		if t < op.Now || t > maxTime {
			continue
		}
		_, then, err := c.p.Step(cloneState(c.state), engine.Op{Verb: engine.VerbCheck, Cost: cost, Now: t})
		if err != nil {
			return err
		}
		if then.Allowed != (t == at) {
			return fmt.Errorf("denied with RetryAfter %v, but a check %v later decides Allowed = %v", d.RetryAfter, time.Duration(t-op.Now), then.Allowed)
		}
	}
	return nil
}

// settles reports whether verb is a charge or a refund.
func settles(verb engine.Verb) bool { return verb == engine.VerbCharge || verb == engine.VerbRefund }

// ratString formats an exact amount for failure messages.
func ratString(x interface{ FloatString(int) string }) string {
	if x == nil || reflect.ValueOf(x).IsNil() {
		return "<nil>"
	}
	return x.FloatString(12)
}

// Each of the following pins one way in which Params.Step departed from
// the definitions of penalties and counted denials, on the smallest trace
// that shows it.

// blockedKey returns the state of a key of p, which has a penalty, that
// took its whole limit at now and then overflowed it: blocked from now.
func blockedKey(t *testing.T, p engine.Params, now int64) engine.State {
	t.Helper()
	st, d, err := p.Step(engine.State{}, engine.Op{Verb: engine.VerbAllow, Cost: p.Limit, Now: now})
	require.NoError(t, err)
	require.True(t, d.Allowed)
	st, d, err = p.Step(st, engine.Op{Verb: engine.VerbAllow, Cost: p.Limit, Now: now})
	require.NoError(t, err)
	require.True(t, d.Blocked, "the overflow starts a block")
	return st
}

// TestExhaustsAndSettlementsReportAndKeepABlockInForce: an exhaust is
// decided as a check of its cost on the key it leaves full, a charge or a
// refund as a check of nothing on the key it leaves, and a check reports
// a block in force, a cost that fits included; each records (a
// settlement the cost it moved), and leaves the block as it found it, in
// force or ended: a charge into debt is no overflow, and starts none.
// Filling up or settling a bucket's point must not drop the block with
// the rest of the bucket's state.
func TestExhaustsAndSettlementsReportAndKeepABlockInForce(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC).UnixNano()
	for _, alg := range reservingAlgorithms(t) {
		p := alg.params
		period := guarantees.Period(p)
		p.Penalty = 10 * period
		t.Run(alg.name, func(t *testing.T) {
			st := blockedKey(t, p, now)
			for _, op := range []engine.Op{
				{Verb: engine.VerbExhaust, Now: now + 1},
				{Verb: engine.VerbExhaust, Now: now + 1, MaxDelay: period},
				{Verb: engine.VerbExhaust, Now: now + 1, MaxDelay: 20 * period},
				{Verb: engine.VerbRefund, Cost: p.Limit, Now: now + 1},     // the key emptied, but blocked
				{Verb: engine.VerbRefund, Cost: 0x1p1000, Now: now + 1},    // more than it holds
				{Verb: engine.VerbCharge, Cost: 3 * p.Limit, Now: now + 1}, // in debt, and blocked
				{Verb: engine.VerbCharge, Cost: 0x1p1000, Now: now + 1},    // up to the ceiling
			} {
				what := fmt.Sprintf("%v of %v over %v", op.Verb, op.Cost, time.Duration(op.MaxDelay))
				next, d, err := p.Step(cloneState(st), op)
				require.NoError(t, err)
				require.True(t, d.Blocked, "%s: the block in force is reported", what)
				require.False(t, d.Allowed, what)
				if settles(op.Verb) {
					require.Positive(t, d.Granted, what)
				}
				require.GreaterOrEqual(t, int64(d.RetryAfter), st.Until-now-1, "%s: RetryAfter reaches the block's end", what)
				require.Equal(t, st.Until, next.Until, "%s: the block is kept (state %+v)", what, next)
			}
			// After the block, a charge into debt is denied, starts no
			// block, and leaves the ended one as it was.
			after := st.Until + period
			next, d, err := p.Step(cloneState(st), engine.Op{Verb: engine.VerbCharge, Cost: 3 * p.Limit, Now: after})
			require.NoError(t, err)
			require.False(t, d.Blocked)
			require.False(t, d.Allowed, "in debt")
			require.Equal(t, 3*p.Limit, d.Granted)
			require.Equal(t, st.Until, next.Until, "the ended block is kept (state %+v)", next)
		})
	}
}

// TestACountedDenialSaysWhenTheRequestIsAdmitted: a denial that counts
// fills the key, so its RetryAfter must wait for the cost from the full
// key. Said from the key before the fill, it sends a client that follows
// it back too early, to be denied and filled again, forever.
func TestACountedDenialSaysWhenTheRequestIsAdmitted(t *testing.T) {
	const s = int64(time.Second)
	p := engine.Params{Kind: engine.KindGCRA, Limit: 2, Interval: s, CountDenied: true}
	now := int64(1000 * s)
	st, d, err := p.Step(engine.State{}, engine.Op{Verb: engine.VerbAllow, Cost: 2, Now: now})
	require.NoError(t, err)
	require.True(t, d.Allowed)
	now += s / 2 // half a unit has leaked
	st, d, err = p.Step(st, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now})
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.Zero(t, d.Remaining, "the denial filled the key")
	require.Equal(t, time.Second, d.RetryAfter, "a whole unit must leak from the full key")
	for range 8 { // a client that retries exactly when told
		if st, d, err = p.Step(st, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now + int64(d.RetryAfter)}); d.Allowed {
			break
		}
		now += int64(d.RetryAfter)
	}
	require.NoError(t, err)
	require.True(t, d.Allowed, "a client that retries when told is admitted")
}

// TestABlockedRequestDescribesTheKeyUntouched: a request a block denies
// records nothing, so its Used, Remaining and ResetAfter describe the key
// as it stands, not as if the cost had been admitted.
func TestABlockedRequestDescribesTheKeyUntouched(t *testing.T) {
	const s = int64(time.Second)
	p := engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: s, Penalty: 60 * s}
	now := int64(1000 * s)
	st, _, err := p.Step(engine.State{}, engine.Op{Verb: engine.VerbAllow, Cost: 5, Now: now})
	require.NoError(t, err)
	st, d, err := p.Step(st, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now})
	require.NoError(t, err)
	require.True(t, d.Blocked)
	for _, verb := range []engine.Verb{engine.VerbCheck, engine.VerbAllow} {
		_, d, err = p.Step(st, engine.Op{Verb: verb, Cost: 1, Now: now + 30*s}) // the bucket has drained
		require.NoError(t, err)
		require.True(t, d.Blocked)
		require.False(t, d.Allowed)
		require.Equal(t, 30*time.Second, d.RetryAfter)
		require.Zero(t, d.Used, "%v: nothing is in use", verb)
		require.Equal(t, 5.0, d.Remaining, "%v", verb)
	}
}

// TestACountedDenialInABlockFillsTheKeyToItsLimit: a request a block
// denies with denials counted fills the key to its limit, not to its
// limit less the request's cost.
func TestACountedDenialInABlockFillsTheKeyToItsLimit(t *testing.T) {
	const s = int64(time.Second)
	p := engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: s, Penalty: 60 * s, CountDenied: true}
	now := int64(1000 * s)
	st, _, err := p.Step(engine.State{}, engine.Op{Verb: engine.VerbAllow, Cost: 5, Now: now})
	require.NoError(t, err)
	st, _, err = p.Step(st, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now})
	require.NoError(t, err)
	st, d, err := p.Step(st, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now + 30*s})
	require.NoError(t, err)
	require.True(t, d.Blocked)
	require.Zero(t, d.Remaining, "the key is full")
	require.Equal(t, 5*s, st.Time-(now+30*s), "the TAT is a whole burst ahead")
}

// TestAStepThatRecordsNothingKeepsAnEndedBlock: a check (or a partial
// grant of nothing) records nothing, so stores do not write the state
// back; Step must return it unchanged, as it does without a penalty, or a
// key kept by Step and the same key in a store differ once the clock
// steps back into the block.
func TestAStepThatRecordsNothingKeepsAnEndedBlock(t *testing.T) {
	const s = int64(time.Second)
	p := engine.Params{Kind: engine.KindFixedWindow, Limit: 1, Interval: 10 * s, Penalty: 5 * s}
	now := int64(1000 * s) // the window's start: full until now+10s
	st, _, err := p.Step(engine.State{}, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now})
	require.NoError(t, err)
	st, d, err := p.Step(st, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now})
	require.NoError(t, err)
	require.True(t, d.Blocked)
	for _, op := range []engine.Op{
		{Verb: engine.VerbCheck, Cost: 1, Now: now + 6*s},
		{Verb: engine.VerbAtMost, Cost: 2, Now: now + 6*s}, // nothing fits
	} {
		next, d, err := p.Step(cloneState(st), op)
		require.NoError(t, err)
		require.False(t, p.Records(op.Verb, &d), "%v records nothing", op.Verb)
		require.Equal(t, st, next, "%v changed the state", op.Verb)
	}
}

// The strict bound tests drive every algorithm with denials counted (and
// with a penalty as well) with guarantees.StrictAdversaries, and each that
// reserves with guarantees.ShapingAdversaries too, and count each
// admission at the instant its caller may act, less the bookings a cancel
// gave back, as the shaping bound tests do: the cost admitted in any
// interval must stay within the algorithm's documented guarantee, for
// counted denials admit nothing more. Under a penalty, nothing decided
// during a block is admitted, and a reservation booked then acts at the
// block's end at the earliest; each block lasts exactly the penalty and
// starts after the last one ended.

func TestCountedDenialsKeepEveryGuarantee(t *testing.T) {
	start := time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC).UnixNano()
	for _, alg := range testAlgorithms(t) {
		for _, v := range []strictVariant{strictVariants[1], strictVariants[2]} {
			p := alg.params
			p.CountDenied = true
			if v.penalty {
				p.Penalty = guarantees.Period(p) + 7
			}
			t.Run(alg.name+", "+v.name, func(t *testing.T) {
				t.Parallel()
				period := guarantees.Period(p)
				lengths := []int64{1, max(p.Interval/3, 1), p.Interval, period, period * 5 / 2, 10 * period}
				check := func(t *testing.T, admitted []guarantees.Admission, cost float64, where string) {
					t.Helper()
					for _, d := range lengths {
						got, bound := guarantees.MaxInWindow(admitted, d), guarantees.Bound(p, d, cost)
						require.LessOrEqual(t, got, bound+boundSlack*p.Limit,
							"%s: %v admitted in an interval of %v, guaranteed at most %v", where, got, time.Duration(d), bound)
					}
				}
				costs := boundCosts(p)
				if raceEnabled {
					costs = costs[:1] // unit costs: the race detector makes the rest slow
				}
				for _, cost := range costs {
					for _, adv := range guarantees.StrictAdversaries(p, cost) {
						where := fmt.Sprintf("%s, cost %v", adv.Name, cost)
						k := guarantees.NewStrictKey(p)
						require.NoError(t, adv.Run(k, start), where)
						check(t, k.Admitted(), cost, where)
						requireNothingAdmittedInABlock(t, p, k, where)
						requireCountedWindowLimit(t, p, k, where)
					}
					if !p.Reservable() {
						continue
					}
					for _, adv := range guarantees.ShapingAdversaries(p, cost) {
						where := fmt.Sprintf("%s, cost %v", adv.Name, cost)
						k := guarantees.NewKey(p)
						require.NoError(t, adv.Run(k, start), where)
						check(t, k.Admitted(), cost, where)
					}
				}
			})
		}
	}
}

// requireCountedWindowLimit checks the fixed window's own guarantee, at
// most the limit in each window, in the windows the key counted its
// admissions in: a denial that counts, or a blocked fill-up, opens an
// anchored window too.
func requireCountedWindowLimit(t *testing.T, p engine.Params, k *guarantees.StrictKey, where string) {
	t.Helper()
	if p.Kind != engine.KindFixedWindow {
		return
	}
	sums := map[int64]float64{}
	for i, b := range k.Bookings() {
		sums[k.Window(i)] += b.Cost
	}
	for w, sum := range sums {
		require.LessOrEqual(t, sum, p.Limit, "%s: window starting at %d admitted %v", where, w, sum)
	}
}

// requireNothingAdmittedInABlock requires that k admitted nothing while
// blocked: no request decided in a block was admitted, but for
// reservations acting at its end or later; and that its blocks each
// lasted the penalty, one after another.
func requireNothingAdmittedInABlock(t *testing.T, p engine.Params, k *guarantees.StrictKey, where string) {
	t.Helper()
	for i, b := range k.Bookings() {
		end := k.DecidedInBlock(i)
		if end == 0 {
			continue
		}
		require.Equal(t, engine.VerbReserve, b.Verb, "%s: booking %d (%+v) admitted by a key blocked until %d", where, i, b, end)
		require.GreaterOrEqual(t, b.Acts, end, "%s: reservation %d (%+v) booked in a block acts before its end", where, i, b)
	}
	blocks := k.Blocks()
	if p.Penalty == 0 {
		require.Empty(t, blocks, where)
		return
	}
	for i, b := range blocks {
		require.Equal(t, p.Penalty, b.Until-b.From, "%s: block %d", where, i)
		if i > 0 {
			require.GreaterOrEqual(t, b.From, blocks[i-1].Until, "%s: block %d starts inside block %d", where, i, i-1)
		}
	}
}

// TestCountedDenialsAdmitNothingToAFloodOfTheGCRAOrAContinuousBucket
// floods a key of the GCRA and of the leaky and token buckets, full after
// a burst, for a long time (a hundred periods, or 20,000 requests), a
// request every gap nanoseconds, where gap is shorter than the time the
// rate takes to free one request: with denials counted each denial fills
// the key again, and nothing is admitted while the flood lasts
// (docs/limits.md). Without the option the same flood gets a request
// through every time one has been freed; and a client that sends exactly
// at the rate is admitted every time.
func TestCountedDenialsAdmitNothingToAFloodOfTheGCRAOrAContinuousBucket(t *testing.T) {
	start := time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC).UnixNano()
	for _, alg := range testAlgorithms(t) {
		p := alg.params
		if p.Kind != engine.KindGCRA && p.Kind != engine.KindLeakyBucket && (p.Kind != engine.KindTokenBucket || p.IntervalRefill) {
			continue
		}
		t.Run(alg.name, func(t *testing.T) {
			for _, cost := range boundCosts(p) {
				// The time the rate takes to free one request.
				frees := int64(math.Ceil(cost * float64(p.Interval)))
				if p.Kind != engine.KindGCRA {
					frees = int64(math.Ceil(cost * float64(p.Interval) / p.Amount))
				}
				with := p
				with.CountDenied = true
				for _, gap := range []int64{frees - max(frees/100, 1), frees / 2, frees / 10} { // 1% faster than the rate, twice, ten times
					if gap < 1 {
						continue
					}
					requests := min(100*guarantees.Period(p)/gap, 20000)
					where := fmt.Sprintf("cost %v every %v, %d requests", cost, time.Duration(gap), requests)
					require.Zero(t, flood(t, with, start, gap, requests, cost, true), "%s, denials counted", where)
					require.Positive(t, flood(t, p, start, gap, requests, cost, true), "%s: without the option the flood gets through as requests are freed", where)
				}
				require.Equal(t, 1000, flood(t, with, start, frees, 1000, cost, false), "cost %v every %v, from rest at the rate: never denied", cost, time.Duration(frees))
			}
		})
	}
}

// flood offers cost every gap nanoseconds, n times, through Step, and
// returns how many were admitted: from rest at start, or after a burst of
// the whole limit there if full.
func flood(t *testing.T, p engine.Params, start, gap, n int64, cost float64, full bool) int {
	t.Helper()
	var s engine.State
	if full {
		var err error
		s, _, err = p.Step(s, engine.Op{Verb: engine.VerbAllow, Cost: p.Limit, Now: start})
		require.NoError(t, err)
		start += gap
	}
	admitted := 0
	for i := range n {
		next, d, err := p.Step(s, engine.Op{Verb: engine.VerbAllow, Cost: cost, Now: start + i*gap})
		require.NoError(t, err)
		s = next
		if d.Allowed {
			admitted++
		}
	}
	return admitted
}

// TestACountedDenialFillsASlowBucket: a denial that counts fills the key
// to its limit whatever the rate. For a bucket that leaks a thousand a
// month, the room left, in float, is a hair more than what has leaked, and
// the denial must fill it all the same rather than count nothing: else a
// client flooding 1% faster than the rate gets 99% of its requests
// through, as if denials did not count.
func TestACountedDenialFillsASlowBucket(t *testing.T) {
	month := int64(30 * 24 * time.Hour)
	for _, p := range []engine.Params{
		{Kind: engine.KindLeakyBucket, Limit: 1000, Interval: month, Amount: 1000, CountDenied: true},
		{Kind: engine.KindTokenBucket, Limit: 1000, Interval: month, Amount: 1000, CountDenied: true},
	} {
		t.Run(p.Kind.String(), func(t *testing.T) {
			now := time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC).UnixNano()
			st, d, err := p.Step(engine.State{}, engine.Op{Verb: engine.VerbAllow, Cost: 1000, Now: now})
			require.NoError(t, err)
			require.True(t, d.Allowed)
			now += month / 1000 * 99 / 100 // 0.99 has leaked
			st, d, err = p.Step(st, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now})
			require.NoError(t, err)
			require.False(t, d.Allowed)
			require.True(t, p.Records(engine.VerbAllow, &d))
			require.Zero(t, d.Remaining, "the denial filled the key: %+v, state %+v", d, st)
			_, left, err := p.Step(st, engine.Op{Verb: engine.VerbCheck, Now: now})
			require.NoError(t, err)
			require.Zero(t, left.Remaining, "the key is full: %+v", st)
		})
	}
}

// TestCountedDenialsChangeNothingForUnitCostsInAFixedWindowOrALogThatDoesNotMerge
// offers the same traffic, in unit costs, to fixed windows and sliding
// logs with and without denials counted, and requires the same decisions
// (docs/limits.md: the windows admit as before). With unit costs a denial
// finds room only for the fraction of a fractional limit, and filling it
// leaves whole units of room as they were: a window's count, or a log's
// fractions (at most the limit's fraction in all), never deny a unit
// that would have been admitted. A log that merges entries (MaxEntries
// below the limit) is not covered: merging the fill into its newest entry
// moves that entry's time, and changes when its units leave.
func TestCountedDenialsChangeNothingForUnitCostsInAFixedWindowOrALogThatDoesNotMerge(t *testing.T) {
	start := time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC).UnixNano()
	algs := testAlgorithms(t)
	log, err := sluice.NewSlidingLog(7.5, 3*time.Second) // 8 entries: room for the fill
	require.NoError(t, err)
	algs = append(algs, testAlgorithm{"sliding log 7.5/3s", fixedParams(t, log)})
	for _, alg := range algs {
		p := alg.params
		if p.Kind != engine.KindFixedWindow && (p.Kind != engine.KindSlidingLog || float64(p.MaxEntries) < math.Ceil(p.Limit)) {
			continue
		}
		t.Run(alg.name, func(t *testing.T) {
			with := p
			with.CountDenied = true
			for _, times := range unitTraffic(p, start) {
				var plain, counted engine.State
				for i, now := range times.at {
					var a, b engine.Decision
					plain, a, err = p.Step(plain, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now})
					require.NoError(t, err)
					counted, b, err = with.Step(counted, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now})
					require.NoError(t, err)
					require.Equal(t, a.Allowed, b.Allowed, "%s, request %d: admitted without denials counted: %v", times.name, i, a.Allowed)
				}
			}
		})
	}
}

// unitTraffic returns the times of request patterns on p's key: floods at
// twice and ten times the rate, bursts of twice the limit on both sides
// of each boundary, and random traffic, over twenty windows.
func unitTraffic(p engine.Params, start int64) []struct {
	name string
	at   []int64
} {
	w := p.Interval
	horizon := 20 * w
	var out []struct {
		name string
		at   []int64
	}
	add := func(name string, at []int64) {
		out = append(out, struct {
			name string
			at   []int64
		}{name, at})
	}
	for _, k := range []int64{2, 10} {
		gap := max(w/int64(math.Ceil(p.Limit))/k, 1)
		var at []int64
		for now := start; now < start+horizon; now += gap {
			at = append(at, now)
		}
		add(fmt.Sprintf("flood at %d times the rate", k), at)
	}
	var bursts []int64
	for b := (start/w + 1) * w; b < start+horizon; b += w {
		for _, t := range []int64{b - 1, b} {
			for range 2 * int(math.Ceil(p.Limit)) {
				bursts = append(bursts, t)
			}
		}
	}
	add("bursts either side of each boundary", bursts)
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 0x0417))
		var at []int64
		for now := start; now < start+horizon; now += rng.Int64N(max(2*w/int64(math.Ceil(p.Limit)), 1)) {
			at = append(at, now)
		}
		add(fmt.Sprintf("random traffic, seed %d", seed), at)
	}
	return out
}

// TestCountedDenialsStarveAFloodOfASlidingCounter floods sliding counters
// at ten times their rate, in unit costs, for fifty windows. A denial
// finds the fraction of room the weighted previous window leaves, and
// filling it raises the current count, which the next window weighs in
// turn: with denials counted the flood gets almost nothing through after
// its first windows, as under the GCRA, where without the option it gets
// some through in every window. (docs/limits.md says the
// windows admit as before with unit costs: the sliding counter does not.)
func TestCountedDenialsStarveAFloodOfASlidingCounter(t *testing.T) {
	start := time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC).UnixNano()
	for _, alg := range testAlgorithms(t) {
		p := alg.params
		if p.Kind != engine.KindSlidingCounter {
			continue
		}
		t.Run(alg.name, func(t *testing.T) {
			gap := max(p.Interval/int64(math.Ceil(p.Limit))/10, 1)
			n := 50 * p.Interval / gap
			with := p
			with.CountDenied = true
			plain, counted := flood(t, p, start, gap, n, 1, false), flood(t, with, start, gap, n, 1, false)
			t.Logf("%d requests: %d admitted without denials counted, %d with", n, plain, counted)
			require.LessOrEqual(t, float64(counted), 2*p.Limit, "with denials counted: the first windows' worth at most")
			require.GreaterOrEqual(t, plain, 10*counted, "without the option the flood gets through in every window")
		})
	}
}

// TestCountedDenialsLetAFloodThroughAtEachRefillOfAnIntervalRefillBucket
// floods interval-refill token buckets, full after a burst, at ten times
// their rate in unit costs. A refill brings Amount tokens at once, and the
// first requests after it take whole units of them before a denial fills
// what is left: with denials counted the flood still gets floor(Amount)
// requests through at every refill, where without the option it gets the
// whole rate (Amount a refill). (docs/limits.md says the buckets admit
// nothing to such a flood: the interval-refill bucket does.)
func TestCountedDenialsLetAFloodThroughAtEachRefillOfAnIntervalRefillBucket(t *testing.T) {
	start := time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC).UnixNano()
	for _, alg := range testAlgorithms(t) {
		p := alg.params
		if !p.IntervalRefill {
			continue
		}
		t.Run(alg.name, func(t *testing.T) {
			gap := max(int64(float64(p.Interval)/p.Amount)/10, 1)
			n := 50 * p.Interval / gap
			with := p
			with.CountDenied = true
			plain, counted := flood(t, p, start, gap, n, 1, true), flood(t, with, start, gap, n, 1, true)
			t.Logf("%d requests over 50 refills: %d admitted without denials counted, %d with", n, plain, counted)
			refills := float64((start+gap+(n-1)*gap)/p.Interval - start/p.Interval)
			require.InDelta(t, refills*math.Floor(p.Amount), float64(counted), math.Floor(p.Amount)+1, "floor(Amount) at each refill")
			require.InDelta(t, refills*p.Amount, float64(plain), p.Amount+1, "Amount at each refill")
		})
	}
}

// TestACountedDenialOfAReservationInABlockSaysWhenItWouldBook: a refused
// reservation's RetryAfter is when a reservation with the same MaxDelay
// would be booked. In a block it is booked no earlier than the block's
// end, so it books once the end comes within its MaxDelay: the end less
// the MaxDelay, not the end, with denials counted as without.
func TestACountedDenialOfAReservationInABlockSaysWhenItWouldBook(t *testing.T) {
	const ms = int64(time.Millisecond)
	for _, count := range []bool{false, true} {
		p := engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: 100 * ms, Penalty: 1000 * ms, CountDenied: count}
		now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC).UnixNano()
		st, _, err := p.Step(engine.State{}, engine.Op{Verb: engine.VerbAllow, Cost: 5, Now: now})
		require.NoError(t, err)
		st, d, err := p.Step(st, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now})
		require.NoError(t, err)
		require.True(t, d.Blocked, "blocked for a second")
		reserve := engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: now, MaxDelay: 300 * ms}
		st, d, err = p.Step(st, reserve)
		require.NoError(t, err)
		require.False(t, d.Allowed, "the block ends beyond the MaxDelay")
		require.Equal(t, 700*time.Millisecond, d.RetryAfter, "denials counted: %v", count)
		reserve.Now += int64(d.RetryAfter)
		_, d, err = p.Step(st, reserve)
		require.NoError(t, err)
		require.True(t, d.Allowed, "booked when told, denials counted: %v", count)
		require.Equal(t, 300*time.Millisecond, d.Delay)
	}
}
