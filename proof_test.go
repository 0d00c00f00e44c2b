package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/guarantees"
	"github.com/sluice-go/sluice/internal/reference"
)

// The property tests replay seeded random traces against the production
// code and against the exact models of internal/reference, and compare
// every decision with reference.Compare. The traces mix every verb an
// algorithm runs: Allow, Check and Fill, reservations with random maximum
// delays, cancels of the trace's earlier reservations in any order (some
// twice, some after their instant, some of an instant nothing was booked
// for), and partial grants of up to several times the limit; at
// nanosecond times that step back as well as forward, often to just
// before a booked instant. The tolerances, stated in reference.Compare:
//
//   - Allowed and Granted identical, unless the exact decision lies
//     within reference.Band (1e-12) of a threshold, relative to the limit
//     (or, for GCRA, to the product c*T it rounds). Only then may the
//     float code decide either way, and the model then loads the
//     production state.
//   - GCRA, interval refill, fixed window, sliding log: durations
//     (RetryAfter, ResetAfter, Delay, and so At) identical to the
//     nanosecond.
//   - Leaky bucket, continuous token bucket, sliding counter: durations
//     within 1 ns plus the Band converted to time (1e-12 of the time the
//     whole limit takes to drain) plus 2^-46 of the duration: 1.01 ns for
//     the buckets measured in seconds here, 2.6 µs for the monthly budget,
//     whose month is 2.6e15 ns. When a booked instant differs by that
//     rounding, the model loads the production state, so that later
//     cancels name the same booking on both sides.
//   - Used within 1e-12 of the limit.
//
// A failure prints the seed, the params and the operations that lead to it.

// longRun reports whether SLUICE_LONG=1 asks for the long version of the
// property tests.
func longRun() bool { return os.Getenv("SLUICE_LONG") == "1" }

// traceCount scales n, the number of traces replayed in a default run, to
// the run: 20 times more under SLUICE_LONG=1, 4 times fewer under the race
// detector (whose instrumentation of math/big makes each trace about ten
// times slower).
func traceCount(n int) int {
	switch {
	case longRun():
		return 20 * n
	case raceEnabled:
		return max(n/4, 1)
	}
	return n
}

// limiterParams is what every limiter has beside its verbs.
type limiterParams interface {
	Params() (engine.Params, bool)
	Close() error
}

// fixedParams returns l's Params, which must be fixed.
func fixedParams(t testing.TB, l limiterParams) engine.Params {
	t.Helper()
	p, fixed := l.Params()
	require.True(t, fixed, "a limiter of one algorithm and no calendar decides under fixed Params")
	return p
}

// testAlgorithm is one configured algorithm of the property tests.
type testAlgorithm struct {
	name   string
	params engine.Params
}

// testAlgorithms returns the configurations the property tests run, each
// built by its constructor so that the Params tested are the ones users
// get: round numbers, awkward rates whose interval rounds, fractional
// limits, windows a few nanoseconds long, and a monthly budget.
func testAlgorithms(t testing.TB) []testAlgorithm {
	const s = time.Second
	cases := []struct {
		name  string
		build func() (limiterParams, error)
	}{
		{"leaky bucket 3 at 1.5/s", func() (limiterParams, error) { return sluice.NewLeakyBucket(3, sluice.Per(1.5, s)) }},
		{"leaky bucket 30.5 at 3.25/7s", func() (limiterParams, error) { return sluice.NewLeakyBucket(30.5, sluice.Per(3.25, 7*s)) }},
		{"leaky bucket 1000 per month", func() (limiterParams, error) {
			return sluice.NewLeakyBucket(1000, sluice.Per(1000, 30*24*time.Hour))
		}},
		{"GCRA 10/s burst 5", func() (limiterParams, error) { return sluice.NewGCRA(sluice.PerSecond(10), 5) }},
		{"GCRA 3/s burst 2.5", func() (limiterParams, error) { return sluice.NewGCRA(sluice.PerSecond(3), 2.5) }},
		{"GCRA 7/49ns burst 1", func() (limiterParams, error) { return sluice.NewGCRA(sluice.Per(7, 49), 1) }},
		{"token bucket 4/s burst 10", func() (limiterParams, error) {
			return sluice.NewTokenBucket(sluice.PerSecond(4), 10)
		}},
		{"token bucket 0.5/3s burst 1.25", func() (limiterParams, error) {
			return sluice.NewTokenBucket(sluice.Per(0.5, 3*s), 1.25)
		}},
		{"token bucket interval refill 4/s burst 10", func() (limiterParams, error) {
			return sluice.NewTokenBucket(sluice.PerSecond(4), 10, sluice.WithIntervalRefill())
		}},
		{"token bucket interval refill 1.5/250ms burst 4.25", func() (limiterParams, error) {
			return sluice.NewTokenBucket(sluice.Per(1.5, 250*time.Millisecond), 4.25, sluice.WithIntervalRefill())
		}},
		{"fixed window 5/s", func() (limiterParams, error) { return sluice.NewFixedWindow(5, s) }},
		{"fixed window 5/s anchored", func() (limiterParams, error) { return sluice.NewFixedWindow(5, s, sluice.WithAnchoredWindows()) }},
		{"fixed window 2.5/3ns", func() (limiterParams, error) { return sluice.NewFixedWindow(2.5, 3) }},
		{"sliding log 5/s", func() (limiterParams, error) { return sluice.NewSlidingLog(5, s) }},
		{"sliding log 7.5/3s 4 entries", func() (limiterParams, error) {
			return sluice.NewSlidingLog(7.5, 3*s, sluice.WithMaxEntries(4))
		}},
		{"sliding log 3/10ns 1 entry", func() (limiterParams, error) { return sluice.NewSlidingLog(3, 10, sluice.WithMaxEntries(1)) }},
		{"sliding counter 5/s", func() (limiterParams, error) { return sluice.NewSlidingCounter(5, s) }},
		{"sliding counter 12.25/2s", func() (limiterParams, error) { return sluice.NewSlidingCounter(12.25, 2*s) }},
		{"sliding counter 2/7ns", func() (limiterParams, error) { return sluice.NewSlidingCounter(2, 7) }},
	}
	algs := make([]testAlgorithm, 0, len(cases))
	for _, c := range cases {
		lim, err := c.build()
		require.NoError(t, err, c.name)
		algs = append(algs, testAlgorithm{name: c.name, params: fixedParams(t, lim)})
		require.NoError(t, lim.Close())
	}
	return algs
}

// reservingAlgorithms returns the test algorithms that book reservations:
// the GCRA and the buckets.
func reservingAlgorithms(t testing.TB) []testAlgorithm {
	var algs []testAlgorithm
	for _, alg := range testAlgorithms(t) {
		if alg.params.Reservable() {
			algs = append(algs, alg)
		}
	}
	return algs
}

func TestStepMatchesReference(t *testing.T) {
	for ai, alg := range testAlgorithms(t) {
		t.Run(alg.name, func(t *testing.T) {
			t.Parallel()
			failures := 0
			var total traceStats
			for trace := range traceCount(1200) {
				seed := uint64(ai)<<32 | uint64(trace)
				stats, err := stepTrace(alg.params, seed)
				total.add(stats)
				if err != nil {
					t.Error(err)
					if failures++; failures == 3 {
						t.FailNow()
					}
				}
			}
			t.Logf("%d traces: %v", traceCount(1200), total)
			// Enough of each verb the algorithm runs was decided exactly,
			// not only leniently.
			for _, verb := range algorithmVerbs(alg.params) {
				require.Greater(t, total.exact[verb], 100, "%v decided exactly", verb)
			}
		})
	}
}

// stepTrace replays the random trace of seed against p.Step and the
// reference model.
func stepTrace(p engine.Params, seed uint64) (traceStats, error) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	c, err := newChecker(p, fmt.Sprintf("seed %d", seed))
	if err != nil {
		return traceStats{}, err
	}
	err = runTrace(rng, p, c)
	return c.stats, err
}

// A tracer checks one random trace's decisions: a checker, or a
// strictChecker.
type tracer interface {
	nextTime(rng *rand.Rand, now int64, last engine.Decision) int64
	reset()
	invalid(rng *rand.Rand, now int64) error
	drawOp(rng *rand.Rand, costs costMode, now int64) engine.Op
	drawExhaust(rng *rand.Rand, costs costMode, now int64) engine.Op
	drawSettle(rng *rand.Rand, costs costMode, now int64) engine.Op
	apply(op engine.Op) (engine.Decision, error)
}

// runTrace drives c through a random trace of p drawn from rng: decisions
// of every verb (for the algorithms that book ahead, one in sixteen an
// exhaust, and one in eight a charge or a refund), with now and then a
// reset or an invalid call.
func runTrace(rng *rand.Rand, p engine.Params, c tracer) error {
	costs := costMode(rng.IntN(int(numCostModes)))
	now := startTime(rng, p)
	var last engine.Decision
	for range 30 + rng.IntN(120) {
		now = c.nextTime(rng, now, last)
		switch r := rng.IntN(100); {
		case r < 3:
			c.reset()
			continue
		case r < 5:
			if err := c.invalid(rng, now); err != nil {
				return err
			}
			continue
		}
		var op engine.Op
		switch r := rng.IntN(16); {
		case !p.Reservable() || r > 2:
			op = c.drawOp(rng, costs, now)
		case r == 0:
			op = c.drawExhaust(rng, costs, now)
		default:
			op = c.drawSettle(rng, costs, now)
		}
		var err error
		if last, err = c.apply(op); err != nil {
			return err
		}
	}
	return nil
}

// algorithmVerbs returns the verbs p runs.
func algorithmVerbs(p engine.Params) []engine.Verb {
	verbs := []engine.Verb{engine.VerbAllow, engine.VerbCheck, engine.VerbAtMost}
	if p.Kind == engine.KindLeakyBucket {
		verbs = append(verbs, engine.VerbFill)
	}
	if p.Reservable() {
		verbs = append(verbs, engine.VerbReserve, engine.VerbCancel, engine.VerbExhaust, engine.VerbCharge, engine.VerbRefund)
	}
	return verbs
}

// checker replays operations against Params.Step and the reference model
// of the same algorithm, and checks each decision and state.
type checker struct {
	p     engine.Params
	model reference.Model
	state engine.State
	where string
	ops   []string
	// booked holds the trace's booked reservations, as the cancels that
	// would give them back, in booking order.
	booked []engine.Op
	// lastReserve is the trace's latest reservation, and lastRefused its
	// RetryAfter if it was refused.
	lastReserve engine.Op
	lastRefused int64
	stats       traceStats
}

// traceStats counts what a trace decided: the decisions compared exactly
// and those too close to a threshold to compare (lenient), per verb, and
// the booked instants on which the float code's rounding differed from
// the exact one (by a nanosecond, or up to 2^-46 of a long delay, within
// the tolerance), which the model then followed.
type traceStats struct {
	exact, lenient [engine.VerbRefund + 1]int
	followed       int
	// What the shaping verbs did: reservations that had to wait, cancels
	// that gave their cost back, grants of part of the cost.
	delayed, givenBack, partial int
	// What the settlements did: charges that left the key in debt (a
	// check of nothing denied, unblocked), charges and refunds that moved
	// less than their cost (the ceiling, or what the key held), refunds
	// that left the key fresh.
	debts, settledPart, emptied int
}

func (s *traceStats) add(o traceStats) {
	for v := range s.exact {
		s.exact[v] += o.exact[v]
		s.lenient[v] += o.lenient[v]
	}
	s.followed += o.followed
	s.delayed += o.delayed
	s.givenBack += o.givenBack
	s.partial += o.partial
	s.debts += o.debts
	s.settledPart += o.settledPart
	s.emptied += o.emptied
}

// count counts decision d on op.
func (s *traceStats) count(op engine.Op, d engine.Decision) {
	if op.Verb == engine.VerbCharge || op.Verb == engine.VerbRefund {
		switch {
		case d.Granted < op.Cost:
			s.settledPart++
		case op.Verb == engine.VerbCharge && !d.Allowed && !d.Blocked:
			s.debts++
		}
		if op.Verb == engine.VerbRefund && d.ResetAfter == 0 {
			s.emptied++
		}
		return
	}
	switch {
	case d.Delay > 0:
		s.delayed++
	case op.Verb == engine.VerbCancel && d.Allowed:
		s.givenBack++
	case d.Granted > 0 && d.Granted < op.Cost:
		s.partial++
	}
}

func (s traceStats) String() string {
	var b strings.Builder
	for v := engine.VerbAllow; v <= engine.VerbRefund; v++ {
		if s.exact[v]+s.lenient[v] > 0 {
			fmt.Fprintf(&b, "%v %d exact, %d lenient; ", v, s.exact[v], s.lenient[v])
		}
	}
	fmt.Fprintf(&b, "%d reservations waited, %d cancels gave back, %d partial grants; %d charges left debt, %d settlements moved part of their cost, %d refunds emptied the key; %d booked instants followed",
		s.delayed, s.givenBack, s.partial, s.debts, s.settledPart, s.emptied, s.followed)
	return b.String()
}

func newChecker(p engine.Params, where string) (*checker, error) {
	m, err := reference.New(p)
	if err != nil {
		return nil, err
	}
	return &checker{p: p, model: m, where: where}, nil
}

func (c *checker) reset() {
	c.ops = append(c.ops, "reset")
	c.state = engine.State{}
	c.model.Reset()
	c.booked = c.booked[:0]
}

// fail describes a failure with what reproduces it.
func (c *checker) fail(format string, args ...any) error {
	return reproducible(c.where, c.p, c.ops, format, args...)
}

// reproducible is a proof's failure, described by format and args, with
// what reproduces it: where the trace began, its Params and its ops.
func reproducible(where string, p engine.Params, ops []string, format string, args ...any) error {
	return fmt.Errorf("%s\nreproduce: %s, params %#v, ops (Now in ns):\n\t%s",
		fmt.Sprintf(format, args...), where, p, strings.Join(ops, "\n\t"))
}

// apply runs op on both sides and compares them.
func (c *checker) apply(op engine.Op) (engine.Decision, error) {
	c.ops = append(c.ops, formatOp(op))
	before := cloneState(c.state)
	next, got, err := c.p.Step(cloneState(c.state), op)
	if err != nil {
		return got, c.fail("Step: %v", err)
	}
	if err := c.sameAsAllow(op, next, got); err != nil {
		return got, c.fail("%v", err)
	}
	if err := exhaustRules(c.p, op, next, got); err != nil {
		return got, c.fail("%v", err)
	}
	if err := settleRules(c.p, op, before, next, got); err != nil {
		return got, c.fail("%v", err)
	}
	want := c.model.Apply(op)
	lenient, err := reference.Compare(c.p, op, got, want)
	if err != nil {
		return got, c.fail("%v\ngot  %+v\nwant %+v", err, got, want)
	}
	if c.tally(op, got, lenient, want.At) {
		defer c.model.Load(next)
	}
	if !recorded(op.Verb, got) {
		if !reflect.DeepEqual(next, before) {
			return got, c.fail("a %v that records nothing (%+v) changed the state from %+v to %+v", op.Verb, got, before, next)
		}
		return got, nil
	}
	if err := checkTransition(before, next, op, got); err != nil {
		return got, c.fail("%v", err)
	}
	c.state = next
	return got, nil
}

// tally counts decision got on op, which Compare found lenient or not
// against a model that booked at wantAt, and keeps a booked reservation's
// cancel for the trace. It reports whether the model must then follow the
// production state: when the float code took a side the exact decision
// was too close to call, or rounded a booked instant to the next
// nanosecond (within the tolerance Compare allows), so that a cancel of
// that booking means the same on both sides.
func (c *checker) tally(op engine.Op, got engine.Decision, lenient bool, wantAt int64) (follow bool) {
	switch {
	case lenient:
		c.stats.lenient[op.Verb]++
		follow = true
	case got.At != wantAt:
		c.stats.exact[op.Verb]++
		c.stats.followed++
		follow = true
	default:
		c.stats.exact[op.Verb]++
	}
	c.stats.count(op, got)
	if op.Verb == engine.VerbReserve {
		c.lastRefused = int64(got.RetryAfter)
		if got.At != 0 {
			c.booked = append(c.booked, engine.Op{Verb: engine.VerbCancel, Cost: op.Cost, At: got.At})
		}
	}
	return follow
}

// recorded reports whether the Store contract says decision d on verb
// changed the key's state: stores write the state back exactly then.
func recorded(verb engine.Verb, d engine.Decision) bool {
	return reference.Records(verb, reference.Decision{Allowed: d.Allowed, Granted: d.Granted})
}

// formatOp writes op as a test would construct it.
func formatOp(op engine.Op) string {
	switch op.Verb {
	case engine.VerbReserve:
		return fmt.Sprintf("{Verb: %v, Cost: %v, Now: %d, MaxDelay: %d, At: %d}", op.Verb, op.Cost, op.Now, op.MaxDelay, op.At)
	case engine.VerbExhaust:
		return fmt.Sprintf("{Verb: %v, Cost: %v, Now: %d, MaxDelay: %d}", op.Verb, op.Cost, op.Now, op.MaxDelay)
	case engine.VerbCancel:
		return fmt.Sprintf("{Verb: %v, Cost: %v, Now: %d, At: %d}", op.Verb, op.Cost, op.Now, op.At)
	}
	return fmt.Sprintf("{Verb: %v, Cost: %v, Now: %d}", op.Verb, op.Cost, op.Now)
}

// invalid sends an operation Step must reject, and requires the error and
// an unchanged state.
func (c *checker) invalid(rng *rand.Rand, now int64) error {
	op, want := c.drawInvalid(rng, now)
	return c.rejects(op, want)
}

// drawInvalid draws an operation Step must reject, and the error it gives.
func (c *checker) drawInvalid(rng *rand.Rand, now int64) (engine.Op, error) {
	type invalidOp struct {
		op   engine.Op
		want error
	}
	ops := []invalidOp{
		{engine.Op{Verb: engine.VerbAllow, Cost: c.p.Limit * 2, Now: now}, sluice.ErrCostExceedsLimit},
		{engine.Op{Verb: engine.VerbCheck, Cost: math.Nextafter(c.p.Limit, math.Inf(1)), Now: now}, sluice.ErrCostExceedsLimit},
		{engine.Op{Verb: engine.VerbAllow, Cost: -1, Now: now}, sluice.ErrInvalidCost},
		{engine.Op{Verb: engine.VerbAllow, Cost: math.NaN(), Now: now}, sluice.ErrInvalidCost},
		{engine.Op{Verb: engine.VerbCheck, Cost: math.Inf(1), Now: now}, sluice.ErrInvalidCost},
		{engine.Op{Verb: engine.VerbAtMost, Cost: math.Inf(1), Now: now}, sluice.ErrInvalidCost},
		{engine.Op{Verb: engine.VerbAtMost, Cost: -0.5, Now: now}, sluice.ErrInvalidCost},
		{engine.Op{Verb: engine.VerbRefund + 1, Cost: 1, Now: now}, sluice.ErrUnsupported},
		{engine.Op{Verb: 0, Cost: 1, Now: now}, sluice.ErrUnsupported},
		{engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: -1}, sluice.ErrTimeOutOfRange},
		{engine.Op{Verb: engine.VerbCheck, Cost: 0, Now: maxTime + 1}, sluice.ErrTimeOutOfRange},
		{engine.Op{Verb: engine.VerbAtMost, Cost: 1, Now: maxTime + 1}, sluice.ErrTimeOutOfRange},
	}
	if c.p.Kind != engine.KindLeakyBucket {
		ops = append(ops, invalidOp{engine.Op{Verb: engine.VerbFill, Cost: 1, Now: now}, sluice.ErrUnsupported})
	}
	if c.p.Limit < 1 {
		// No whole unit of a cost above such a limit ever fits.
		ops = append(ops, invalidOp{engine.Op{Verb: engine.VerbAtMost, Cost: 1, Now: now}, sluice.ErrCostExceedsLimit})
	}
	if c.p.Reservable() {
		ops = append(ops,
			invalidOp{engine.Op{Verb: engine.VerbReserve, Cost: c.p.Limit * 2, Now: now, MaxDelay: 1}, sluice.ErrCostExceedsLimit},
			invalidOp{engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: now, MaxDelay: -1}, sluice.ErrInvalidDelay},
			invalidOp{engine.Op{Verb: engine.VerbReserve, Cost: 0, Now: now, MaxDelay: 1<<60 + 1}, sluice.ErrInvalidDelay},
			invalidOp{engine.Op{Verb: engine.VerbReserve, Cost: math.NaN(), Now: now}, sluice.ErrInvalidCost},
			invalidOp{engine.Op{Verb: engine.VerbReserve, Cost: 0, Now: -1}, sluice.ErrTimeOutOfRange},
			invalidOp{engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: now, At: -1}, sluice.ErrTimeOutOfRange},
			invalidOp{engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: now, At: maxTime + 1<<60 + 1}, sluice.ErrTimeOutOfRange},
			invalidOp{engine.Op{Verb: engine.VerbCancel, Cost: 1, Now: now, At: -1}, sluice.ErrTimeOutOfRange},
			invalidOp{engine.Op{Verb: engine.VerbCancel, Cost: 1, Now: now, At: maxTime + 1<<60 + 1}, sluice.ErrTimeOutOfRange},
			invalidOp{engine.Op{Verb: engine.VerbCancel, Cost: c.p.Limit * 2, Now: now, At: now + 1}, sluice.ErrCostExceedsLimit},
			invalidOp{engine.Op{Verb: engine.VerbCancel, Cost: -1, Now: now, At: now + 1}, sluice.ErrInvalidCost},
			invalidOp{engine.Op{Verb: engine.VerbExhaust, Cost: 1, Now: now, MaxDelay: -1}, sluice.ErrInvalidDelay},
			invalidOp{engine.Op{Verb: engine.VerbExhaust, Cost: 0, Now: now, MaxDelay: 1<<60 + 1}, sluice.ErrInvalidDelay},
			invalidOp{engine.Op{Verb: engine.VerbExhaust, Cost: c.p.Limit * 2, Now: now}, sluice.ErrCostExceedsLimit},
			invalidOp{engine.Op{Verb: engine.VerbExhaust, Cost: math.NaN(), Now: now}, sluice.ErrInvalidCost},
			invalidOp{engine.Op{Verb: engine.VerbExhaust, Cost: 1, Now: maxTime + 1}, sluice.ErrTimeOutOfRange},
			invalidOp{engine.Op{Verb: engine.VerbCharge, Cost: math.NaN(), Now: now}, sluice.ErrInvalidCost},
			invalidOp{engine.Op{Verb: engine.VerbCharge, Cost: -1, Now: now}, sluice.ErrInvalidCost},
			invalidOp{engine.Op{Verb: engine.VerbCharge, Cost: math.Inf(1), Now: now}, sluice.ErrInvalidCost},
			invalidOp{engine.Op{Verb: engine.VerbRefund, Cost: math.NaN(), Now: now}, sluice.ErrInvalidCost},
			invalidOp{engine.Op{Verb: engine.VerbRefund, Cost: -0.5, Now: now}, sluice.ErrInvalidCost},
			invalidOp{engine.Op{Verb: engine.VerbRefund, Cost: math.Inf(1), Now: now}, sluice.ErrInvalidCost},
			invalidOp{engine.Op{Verb: engine.VerbCharge, Cost: 1, Now: -1}, sluice.ErrTimeOutOfRange},
			invalidOp{engine.Op{Verb: engine.VerbRefund, Cost: 1, Now: maxTime + 1}, sluice.ErrTimeOutOfRange},
		)
	} else {
		ops = append(ops,
			invalidOp{engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: now, MaxDelay: 1}, sluice.ErrUnsupported},
			invalidOp{engine.Op{Verb: engine.VerbReserve, Cost: 0, Now: now}, sluice.ErrUnsupported},
			invalidOp{engine.Op{Verb: engine.VerbCancel, Cost: 1, Now: now, At: now + 1}, sluice.ErrUnsupported},
			invalidOp{engine.Op{Verb: engine.VerbExhaust, Cost: 1, Now: now, MaxDelay: 1}, sluice.ErrUnsupported},
			invalidOp{engine.Op{Verb: engine.VerbCharge, Cost: 1, Now: now}, sluice.ErrUnsupported},
			invalidOp{engine.Op{Verb: engine.VerbRefund, Cost: 1, Now: now}, sluice.ErrUnsupported},
			invalidOp{engine.Op{Verb: engine.VerbCharge, Cost: c.p.Limit * 3, Now: now}, sluice.ErrUnsupported},
			invalidOp{engine.Op{Verb: engine.VerbRefund, Cost: 0, Now: now}, sluice.ErrUnsupported},
			// The cost is checked first, whatever the algorithm.
			invalidOp{engine.Op{Verb: engine.VerbCharge, Cost: math.NaN(), Now: now}, sluice.ErrInvalidCost},
			invalidOp{engine.Op{Verb: engine.VerbRefund, Cost: -1, Now: now}, sluice.ErrInvalidCost},
			invalidOp{engine.Op{Verb: engine.VerbCharge, Cost: math.Inf(1), Now: now}, sluice.ErrInvalidCost},
		)
	}
	o := ops[rng.IntN(len(ops))]
	return o.op, o.want
}

// drawExhaust draws an exhaust, as a service's answer reports the key
// limited: full now, within the algorithm's time scale, longer, or (now
// and then) for as long as a request may wait.
func (c *checker) drawExhaust(rng *rand.Rand, costs costMode, now int64) engine.Op {
	op := engine.Op{Verb: engine.VerbExhaust, Cost: drawCost(rng, c.p, costs, engine.VerbExhaust), Now: now}
	scale := guarantees.Period(c.p)
	switch r := rng.IntN(40); {
	case r < 12:
	case r < 30:
		op.MaxDelay = rng.Int64N(scale)
	case r < 39:
		op.MaxDelay = scale + rng.Int64N(4*scale)
	default:
		op.MaxDelay = 1 << 60
	}
	return op
}

// exhaustRules checks an exhaust's decision got and the state next it
// left against what its definition says in terms of checks, bit for bit:
// it is the decision of a check of its cost at now on that state (a
// block in force included); and the key is full at now + MaxDelay, where
// a check of nothing finds no room (within reference.Band of the limit).
func exhaustRules(p engine.Params, op engine.Op, next engine.State, got engine.Decision) error {
	if op.Verb != engine.VerbExhaust {
		return nil
	}
	_, check, err := p.Step(cloneState(next), engine.Op{Verb: engine.VerbCheck, Cost: op.Cost, Now: op.Now})
	if err != nil {
		return err
	}
	if check != got {
		return fmt.Errorf("an exhaust decided %+v; a check of its cost on the state it left decides %+v (state %+v)", got, check, next)
	}
	if t := op.Now + op.MaxDelay; t <= maxTime {
		_, full, err := p.Step(cloneState(next), engine.Op{Verb: engine.VerbCheck, Now: t})
		if err != nil {
			return err
		}
		if full.Remaining > reference.Band*p.Limit {
			return fmt.Errorf("an exhaust left %v of the limit %v at now + MaxDelay (state %+v)", full.Remaining, p.Limit, next)
		}
	}
	return nil
}

// drawSettle draws a charge or a refund, as a request's actual cost
// settles the estimate it was admitted with: usual costs, up to three
// times the limit (a debt, or a refund of more than the key holds), and
// now and then 2^1000, which reaches the ceiling of what the key may
// hold (a charge) or empties the key whatever it holds (a refund).
func (c *checker) drawSettle(rng *rand.Rand, costs costMode, now int64) engine.Op {
	op := engine.Op{Verb: engine.VerbCharge, Now: now}
	if rng.IntN(2) == 0 {
		op.Verb = engine.VerbRefund
	}
	switch r := rng.IntN(60); {
	case r == 0:
		op.Cost = 0x1p1000
	case r < 20:
		op.Cost = drawSettleCost(rng, c.p, costs)
	default:
		op.Cost = drawCost(rng, c.p, costs, op.Verb)
	}
	return op
}

// drawSettleCost draws a cost of up to three times the limit, of the
// trace's mode.
func drawSettleCost(rng *rand.Rand, p engine.Params, mode costMode) float64 {
	c := rng.Float64() * 3 * p.Limit
	switch mode {
	case unitCosts, integerCosts:
		return math.Ceil(c)
	case dyadicCosts:
		return math.Ceil(c*8) / 8
	}
	return math.Round(c*100) / 100
}

// settleRules checks a charge's or a refund's decision got and the state
// next it left, from the state before, against what their definition
// says in terms of checks, bit for bit: the cost moved is from zero to
// the cost; the decision is that of a check of nothing at now on the
// state left (a block in force included), with Granted (but for a level
// left within 2^-48 of the limit of zero, which the decision describes
// and the state, fresh, forgets); and a charge never frees anything (but
// such a level, which the fresh state forgets, a charge of nothing
// included), nor a refund fills: a check of nothing on the state left, at now and
// later, finds at least as much in use as on the state before (at most,
// for a refund), and waits and resets at least as long (at most). Exactly so for the GCRA, whose TAT is integer nanoseconds,
// and at now for the amounts of the buckets, which both sides read from
// the same float amount; but each side reads the buckets' durations, and
// the amounts later than now, from its own point, in float arithmetic
// whose durations forgive 2^-48 of the time from the point: they may
// differ by reference.Band of the limit and 2^-46 of the most either
// state holds (a debt may hold a billion times the limit), and a meter's
// durations by a nanosecond and 2^-46 of themselves and of the time that
// most takes to leak; an interval-refill bucket's, which count whole
// refills, by a refill once it has held more than its burst. A refund of
// a meter that holds more than its rate leaks in 2^60 ns (read under a
// slower limit than it was charged under) is held to the decision alone:
// it moves the instant the debt is forgiven (see beyondSpan).
func settleRules(p engine.Params, op engine.Op, before, next engine.State, got engine.Decision) error {
	if op.Verb != engine.VerbCharge && op.Verb != engine.VerbRefund {
		return nil
	}
	if !(got.Granted >= 0 && got.Granted <= op.Cost) {
		return fmt.Errorf("a %v of %v moved %v", op.Verb, op.Cost, got.Granted)
	}
	_, check, err := p.Step(cloneState(next), engine.Op{Verb: engine.VerbCheck, Now: op.Now})
	if err != nil {
		return err
	}
	check.Granted = got.Granted
	if isZero(next) && got.ResetAfter == 0 && math.Abs(got.Used-check.Used) <= p.Limit*0x1p-48 {
		// Left with a level the float code counts as nothing (at most
		// 2^-48 of the limit), which it describes and then forgets: the
		// zero State describes no level at all.
		check.Used, check.Remaining = got.Used, got.Remaining
	}
	if check != got {
		return fmt.Errorf("a %v decided %+v; a check of nothing on the state it left decides %+v (state %+v)", op.Verb, got, check, next)
	}
	if op.Verb == engine.VerbRefund && beyondSpan(p, before) {
		return nil // it may leave a longer wait: see beyondSpan
	}
	scale := max(p.Limit, before.A, next.A) // the most either state holds
	if p.Kind == engine.KindGCRA {
		scale = p.Limit // the TAT is a time: the state's A is its interval
	}
	meter := p.Kind != engine.KindGCRA && !p.IntervalRefill
	period := guarantees.Period(p)
	for _, t := range []int64{op.Now, op.Now + 1, op.Now + period/3, op.Now + period, op.Now + int64(got.RetryAfter), op.Now + int64(got.ResetAfter) - 1} {
		if t < op.Now || t > maxTime {
			continue
		}
		_, was, err := p.Step(cloneState(before), engine.Op{Verb: engine.VerbCheck, Now: t})
		if err != nil {
			return err
		}
		_, is, err := p.Step(cloneState(next), engine.Op{Verb: engine.VerbCheck, Now: t})
		if err != nil {
			return err
		}
		more, less := is, was // a charge leaves more in use
		if op.Verb == engine.VerbRefund {
			more, less = was, is
		}
		amount := 0.0
		if isZero(next) {
			// Left fresh, and so forgotten, with at most 2^-48 of the
			// limit in use at now, rounding noise (a charge of nothing
			// included): the zero State holds none of it.
			amount = p.Limit * 0x1p-48
		}
		durs := func(time.Duration) float64 { return 0 }
		if t > op.Now && p.Kind != engine.KindGCRA {
			amount = reference.Band*p.Limit + scale*0x1p-46
			if p.IntervalRefill && scale > p.Limit {
				durs = func(time.Duration) float64 { return float64(p.Interval) }
			}
		}
		if meter {
			drain := float64(p.Interval) / p.Amount
			durs = func(d time.Duration) float64 { return 1 + (float64(d)+scale*drain)*0x1p-46 }
		}
		switch {
		case more.Used < less.Used-amount:
			return fmt.Errorf("a %v left %v in use %v after now, where the key held %v (state %+v, now %+v)", op.Verb, is.Used, time.Duration(t-op.Now), was.Used, before, next)
		case float64(more.ResetAfter) < float64(less.ResetAfter)-durs(less.ResetAfter):
			return fmt.Errorf("a %v left a reset of %v %v after now, where the key had %v (state %+v, now %+v)", op.Verb, is.ResetAfter, time.Duration(t-op.Now), was.ResetAfter, before, next)
		case float64(more.RetryAfter) < float64(less.RetryAfter)-durs(less.RetryAfter):
			return fmt.Errorf("a %v left a wait of %v %v after now, where the key had %v (state %+v, now %+v)", op.Verb, is.RetryAfter, time.Duration(t-op.Now), was.RetryAfter, before, next)
		}
	}
	return nil
}

// beyondSpan reports whether s, the state of a meter (the leaky bucket,
// the token bucket refilled continuously), holds more at its point than
// p's rate leaks in 2^60 ns, give or take the float rounding: a debt
// charged under a faster limit, read under p (see change_proof_test.go).
// Its level is forgiven whole 2^60 ns after its point, where the
// durations of the production's float code saturate (see
// arith.CeilNanos). A refund moves the point to now, and with it that
// instant, later: the key it leaves may wait longer than the key before
// it, whose debt was forgiven sooner; and so it may if the refund brings
// the level back within what p leaks in 2^60 ns, which then leaks at p's
// rate, forgiven no more. A charge moves the point, and so the instant,
// later too, but leaves more in use, as the rules require. (The
// interval-refill bucket caps its counts of refills instead, counted from
// its last refill before the instant read, which a settlement does not
// move: it forgives nothing.)
func beyondSpan(p engine.Params, s engine.State) bool {
	if p.Kind == engine.KindGCRA || p.IntervalRefill {
		return false
	}
	return s.A*float64(p.Interval)/p.Amount > (1<<60)*(1-0x1p-40)
}

// heldBeyondSpan reports whether s, a bucket's state read at now under
// p, holds more than p frees in 2^60 ns: a meter's level at a point less
// than 2^60 ns before now (or after it) beyond what p's rate leaks in
// 2^60 ns (see beyondSpan), or more tokens in use than the refills of
// 2^60 ns bring.
func heldBeyondSpan(p engine.Params, s engine.State, now int64) bool {
	switch {
	case p.Kind == engine.KindGCRA || !p.Reservable():
		return false
	case p.IntervalRefill:
		return s.A > float64(1<<60/p.Interval)*p.Amount
	}
	return now-s.Time < 1<<60 && beyondSpan(p, s)
}

// rejects requires Step to reject op with want, leaving the state as it
// was.
func (c *checker) rejects(op engine.Op, want error) error {
	c.ops = append(c.ops, "invalid "+formatOp(op))
	return stepRejects(c.p, c.state, op, want, c.fail)
}

// stepRejects requires Step of p to reject op on s with want, leaving s
// as it was; fail describes a failure.
func stepRejects(p engine.Params, s engine.State, op engine.Op, want error, fail func(format string, args ...any) error) error {
	before := cloneState(s)
	next, _, err := p.Step(cloneState(s), op)
	if !errors.Is(err, want) {
		return fail("Step(%+v) error = %v, want %v", op, err, want)
	}
	if !reflect.DeepEqual(next, before) {
		return fail("a rejected operation changed the state from %+v to %+v", before, next)
	}
	return nil
}

// checkTransition checks a recorded step's new state: no NaN or negative
// amount, no time moving backwards (except for a cancel, which gives the
// reservation's cost back by moving the key's state to the line it would
// have followed without it, a nanosecond later, and a refund, which gives
// a GCRA's cost back by moving its TAT earlier), log entries in time
// order, and a state that is fresh again (ResetAfter zero) stored as the
// zero State.
func checkTransition(before, next engine.State, op engine.Op, d engine.Decision) error {
	fresh := isZero(next)
	switch {
	case math.IsNaN(next.A) || math.IsNaN(next.B) || next.A < 0 || next.B < 0:
		return fmt.Errorf("bad amounts in state %+v", next)
	case d.ResetAfter == 0 && !fresh:
		return fmt.Errorf("ResetAfter is 0 but the state %+v is not the zero State", next)
	case d.ResetAfter > 0 && fresh:
		return fmt.Errorf("ResetAfter is %v but the state is the zero State, a fresh key", d.ResetAfter)
	case op.Verb == engine.VerbCancel || op.Verb == engine.VerbRefund:
	case !isZero(before) && !fresh && next.Time < before.Time:
		return fmt.Errorf("state time moved backwards from %d to %d", before.Time, next.Time)
	}
	for i := 1; i < len(next.Log); i++ {
		if next.Log[i].Time < next.Log[i-1].Time {
			return fmt.Errorf("log out of time order: %+v", next.Log)
		}
	}
	if n, m := len(next.Log), len(before.Log); n > 0 && m > 0 && next.Log[n-1].Time < before.Log[m-1].Time {
		return fmt.Errorf("newest log entry moved backwards from %d to %d", before.Log[m-1].Time, next.Log[n-1].Time)
	}
	return nil
}

func isZero(s engine.State) bool { return s.Time == 0 && s.A == 0 && s.B == 0 && len(s.Log) == 0 }

func cloneState(s engine.State) engine.State {
	s.Log = append([]engine.Entry(nil), s.Log...)
	return s
}

// maxTime is the latest time a request may carry: 2^62 ns since the epoch.
const maxTime = 1 << 62

// startTime draws where a trace starts: mostly at a realistic time since
// the epoch (far above 2^53 ns), sometimes just after the epoch (where the
// zero State's time zero is close) or just before the latest time a
// request may carry.
func startTime(rng *rand.Rand, p engine.Params) int64 {
	base := time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC).UnixNano()
	switch rng.IntN(20) {
	case 0:
		return rng.Int64N(1000)
	case 1:
		return maxTime - 1000*guarantees.Period(p) - int64(100*24*time.Hour)
	}
	return base + rng.Int64N(int64(24*time.Hour))
}

// nextTime draws the time of the next operation: bursts at one instant,
// nanoseconds apart, steady traffic at the algorithm's own time scale, the
// exact instant the last denial said to retry (and one nanosecond before),
// just around a window or interval boundary, long idles, and a clock that
// steps back. It stays within the times a request may carry.
func nextTime(rng *rand.Rand, p engine.Params, now int64, last engine.Decision) int64 {
	scale := guarantees.Period(p)
	var next int64
	switch r := rng.IntN(100); {
	case r < 18:
		next = now
	case r < 28:
		next = now + 1 + rng.Int64N(1000)
	case r < 56:
		next = now + rng.Int64N(scale)
	case r < 68:
		next = now + 1
		if last.RetryAfter > 0 {
			next = now + int64(last.RetryAfter) - rng.Int64N(2)
		}
	case r < 78:
		next = (now/p.Interval+1)*p.Interval + rng.Int64N(3) - 1
	case r < 88:
		next = now + scale + rng.Int64N(4*scale)
	case r < 92:
		next = now + rng.Int64N(int64(48*time.Hour))
	default:
		next = now - 1 - rng.Int64N(scale) // the clock steps back
	}
	return min(max(next, 0), maxTime)
}

// costMode is the kind of costs a trace uses.
type costMode int

const (
	unitCosts    costMode = iota // 1
	integerCosts                 // 1 to the limit
	dyadicCosts                  // multiples of 1/8: exact in float, so float sums are exact
	decimalCosts                 // multiples of 0.01, like money: float sums round
	numCostModes
)

// drawCost draws a cost of the trace's mode, sometimes zero or the whole
// limit. Only fill-ups (which accept any cost) exceed the limit.
func drawCost(rng *rand.Rand, p engine.Params, mode costMode, verb engine.Verb) float64 {
	switch r := rng.IntN(20); {
	case r == 0:
		return 0
	case r == 1:
		return p.Limit
	case r == 2 && verb == engine.VerbFill:
		return p.Limit * 1.5
	}
	var c float64
	switch mode {
	case unitCosts:
		c = 1
	case integerCosts:
		c = float64(1 + rng.IntN(max(int(p.Limit), 1)))
	case dyadicCosts:
		c = float64(1+rng.IntN(max(int(8*p.Limit), 1))) / 8
	default:
		c = math.Round(rng.Float64()*p.Limit*100) / 100
	}
	return min(c, p.Limit)
}

// TestLimitersMatchReference drives the limiters themselves (Allow,
// CanAccept, Fillup, Reserve and Reservation.Cancel, AllowAtMost, Reset,
// with their default MemStore and a simulated clock) through monotonic
// random traces, and compares each decision with the reference model and
// with Params.Step on a shadow state. A Reservation's Cancel calls the
// store only the first time, and only before its instant: the shadow
// state is then given the same cancel.
func TestLimitersMatchReference(t *testing.T) {
	ctx := context.Background()
	for ai, alg := range testAlgorithms(t) {
		t.Run(alg.name, func(t *testing.T) {
			t.Parallel()
			cancels := 0
			for trace := range traceCount(150) {
				seed := uint64(ai)<<32 | uint64(trace)
				rng := rand.New(rand.NewPCG(seed, 0x11e7))
				now := startTime(rng, alg.params)
				clk := &traceClock{}
				clk.now.Store(now)
				lim := newLimiter(t, alg.params, sluice.WithClock(clk))
				c, err := newChecker(alg.params, fmt.Sprintf("limiter seed %d", seed))
				require.NoError(t, err)
				costs := costMode(rng.IntN(int(numCostModes)))
				var (
					last     engine.Decision
					reserved []*reservation
				)
				for range 30 + rng.IntN(60) {
					now = max(now, c.nextTime(rng, now, last))
					clk.now.Store(now)
					if rng.IntN(40) == 0 {
						require.NoError(t, lim.Reset(ctx, "k"))
						c.reset()
						continue
					}
					op := c.drawOp(rng, costs, now)
					if op.Verb == engine.VerbCancel {
						r := drawReservation(rng, reserved, now)
						if r.Allowed && r.Delay > 0 && !r.given && now < r.At {
							cancels++
							_, err := c.apply(engine.Op{Verb: engine.VerbCancel, Cost: r.cost, Now: now, At: r.At})
							require.NoError(t, err)
						}
						require.NoError(t, r.Cancel(ctx))
						r.given = true
						continue
					}
					op.At = 0 // a limiter's Reserve books from now: only a group books later
					got, r, err := lim.do(ctx, op)
					require.NoError(t, err)
					if r != nil {
						reserved = append(reserved, &reservation{Reservation: r, cost: op.Cost})
					}
					want, err := c.apply(op)
					require.NoError(t, err)
					require.Equal(t, want, got, "the limiter and Params.Step disagree: %s", c.fail(""))
					last = got
				}
				require.NoError(t, lim.Close())
			}
			if alg.params.Reservable() {
				t.Logf("%d cancels called the store", cancels)
				require.Positive(t, cancels, "cancels that called the store")
			}
		})
	}
}

// traceClock is a simulated clock that a trace sets directly to each
// operation's time. (benbjohnson/clock's Mock yields for a millisecond of
// real time on every Set, too slow for thousands of operations.) The
// traces never Wait, and time moves only when they set it, so After
// returns a channel that never fires.
type traceClock struct{ now atomic.Int64 }

func (c *traceClock) Now() time.Time                       { return time.Unix(0, c.now.Load()) }
func (c *traceClock) After(time.Duration) <-chan time.Time { return nil }

// testLimiter is a limiter under test with its verbs addressed by Verb.
type testLimiter struct {
	*sluice.Limiter
	fill  func(ctx context.Context, key string, cost float64) (sluice.Decision, error)
	close func() error
}

// newLimiter builds the limiter p describes with its constructor.
func newLimiter(t testing.TB, p engine.Params, opts ...sluice.Option) *testLimiter {
	var (
		l   testLimiter
		err error
	)
	rate := sluice.Per(p.Amount, time.Duration(p.Interval))
	switch p.Kind {
	case engine.KindLeakyBucket:
		var b *sluice.Limiter
		b, err = sluice.NewLeakyBucket(p.Limit, rate, opts...)
		if err == nil {
			l = testLimiter{Limiter: b, fill: b.Fillup, close: b.Close}
		}
	case engine.KindGCRA:
		var g *sluice.Limiter
		g, err = sluice.NewGCRA(sluice.Per(1, time.Duration(p.Interval)), p.Limit, opts...)
		if err == nil {
			l = testLimiter{Limiter: g, close: g.Close}
		}
	case engine.KindTokenBucket:
		if p.IntervalRefill {
			opts = append(opts, sluice.WithIntervalRefill())
		}
		var b *sluice.Limiter
		b, err = sluice.NewTokenBucket(rate, p.Limit, opts...)
		if err == nil {
			l = testLimiter{Limiter: b, close: b.Close}
		}
	case engine.KindFixedWindow:
		if p.Anchored {
			opts = append(opts, sluice.WithAnchoredWindows())
		}
		var w *sluice.Limiter
		w, err = sluice.NewFixedWindow(p.Limit, time.Duration(p.Interval), opts...)
		if err == nil {
			l = testLimiter{Limiter: w, close: w.Close}
		}
	case engine.KindSlidingLog:
		var w *sluice.Limiter
		w, err = sluice.NewSlidingLog(p.Limit, time.Duration(p.Interval), append(opts, sluice.WithMaxEntries(p.MaxEntries))...)
		if err == nil {
			l = testLimiter{Limiter: w, close: w.Close}
		}
	case engine.KindSlidingCounter:
		var w *sluice.Limiter
		w, err = sluice.NewSlidingCounter(p.Limit, time.Duration(p.Interval), opts...)
		if err == nil {
			l = testLimiter{Limiter: w, close: w.Close}
		}
	}
	require.NoError(t, err)
	require.Equal(t, p, fixedParams(t, l.Limiter), "the constructor rebuilds the same Params")
	return &l
}

// do runs op's verb on key "k" at the limiter's clock.
// A reservation returns the Reservation that booked it.
func (l *testLimiter) do(ctx context.Context, op engine.Op) (engine.Decision, *sluice.Reservation, error) {
	var (
		d   sluice.Decision
		err error
	)
	switch op.Verb {
	case engine.VerbCheck:
		d, err = l.CanAccept(ctx, "k", op.Cost)
	case engine.VerbFill:
		d, err = l.fill(ctx, "k", op.Cost)
	case engine.VerbReserve:
		r, err := l.Reserve(ctx, "k", op.Cost, time.Duration(op.MaxDelay))
		return engine.Decision(r.Decision), r, err
	case engine.VerbAtMost:
		d, err = l.AllowAtMost(ctx, "k", op.Cost)
	default:
		d, err = l.Allow(ctx, "k", op.Cost)
	}
	return engine.Decision(d), nil, err
}

// drawReservation draws which of a trace's reservations to cancel: mostly
// one still waiting at now (the latest, or any), else any of them.
func drawReservation(rng *rand.Rand, reserved []*reservation, now int64) *reservation {
	var waiting []*reservation
	for _, r := range reserved {
		if r.Allowed && r.Delay > 0 && !r.given && now < r.At {
			waiting = append(waiting, r)
		}
	}
	switch {
	case len(waiting) == 0 || rng.IntN(4) == 0:
		return reserved[rng.IntN(len(reserved))]
	case rng.IntN(2) == 0:
		return waiting[len(waiting)-1]
	}
	return waiting[rng.IntN(len(waiting))]
}

// reservation is a Reservation of a trace, with what the trace knows of
// it: its cost, and whether it was cancelled already.
type reservation struct {
	*sluice.Reservation
	cost  float64
	given bool
}

// Close closes the limiter's default store.
func (l *testLimiter) Close() error { return l.close() }
