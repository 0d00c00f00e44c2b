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
	"github.com/sluice-go/sluice/internal/guarantees"
	"github.com/sluice-go/sluice/internal/reference"
)

// The property tests replay seeded random traces against the production
// code and against the exact models of internal/reference, and compare
// every decision with reference.Compare. Its tolerances, stated there:
//
//   - Allowed identical, unless the exact decision lies within
//     reference.Band (1e-12) of a threshold, relative to the limit (or, for
//     GCRA, to the product c*T it rounds). Only then may the float code
//     decide either way, and the model then loads the production state.
//   - GCRA, fixed window, sliding log: durations identical to the
//     nanosecond.
//   - Leaky and token buckets, sliding counter: durations within 1 ns plus
//     the Band converted to time (1e-12 of the time the whole limit takes
//     to drain) plus 2^-46 of the duration: 1.01 ns for the buckets
//     measured in seconds here, 2.6 µs for the monthly budget, whose
//     month is 2.6e15 ns.
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
	Params() sluice.Params
	Close() error
}

// testAlgorithm is one configured algorithm of the property tests.
type testAlgorithm struct {
	name   string
	params sluice.Params
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
			return sluice.NewTokenBucket(sluice.PerSecond(4), sluice.WithBurst(10))
		}},
		{"token bucket 0.5/3s burst 1.25", func() (limiterParams, error) {
			return sluice.NewTokenBucket(sluice.Per(0.5, 3*s), sluice.WithBurst(1.25))
		}},
		{"token bucket interval refill 4/s burst 10", func() (limiterParams, error) {
			return sluice.NewTokenBucket(sluice.PerSecond(4), sluice.WithBurst(10), sluice.WithIntervalRefill())
		}},
		{"token bucket interval refill 1.5/250ms burst 4.25", func() (limiterParams, error) {
			return sluice.NewTokenBucket(sluice.Per(1.5, 250*time.Millisecond), sluice.WithBurst(4.25), sluice.WithIntervalRefill())
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
		algs = append(algs, testAlgorithm{name: c.name, params: lim.Params()})
		require.NoError(t, lim.Close())
	}
	return algs
}

func TestStepMatchesReference(t *testing.T) {
	for ai, alg := range testAlgorithms(t) {
		t.Run(alg.name, func(t *testing.T) {
			t.Parallel()
			failures := 0
			for trace := range traceCount(1200) {
				seed := uint64(ai)<<32 | uint64(trace)
				if err := stepTrace(alg.params, seed); err != nil {
					t.Error(err)
					if failures++; failures == 3 {
						t.FailNow()
					}
				}
			}
		})
	}
}

// stepTrace replays the random trace of seed against p.Step and the
// reference model.
func stepTrace(p sluice.Params, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	c, err := newChecker(p, fmt.Sprintf("seed %d", seed))
	if err != nil {
		return err
	}
	costs := costMode(rng.IntN(int(numCostModes)))
	now := startTime(rng, p)
	var last sluice.Decision
	for range 30 + rng.IntN(120) {
		now = nextTime(rng, p, now, last)
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
		op := sluice.Op{Verb: drawVerb(rng, p), Now: now}
		op.Cost = drawCost(rng, p, costs, op.Verb)
		if last, err = c.apply(op); err != nil {
			return err
		}
	}
	return nil
}

// checker replays operations against Params.Step and the reference model
// of the same algorithm, and checks each decision and state.
type checker struct {
	p     sluice.Params
	model reference.Model
	state sluice.State
	where string
	ops   []string
}

func newChecker(p sluice.Params, where string) (*checker, error) {
	m, err := reference.New(p)
	if err != nil {
		return nil, err
	}
	return &checker{p: p, model: m, where: where}, nil
}

func (c *checker) reset() {
	c.ops = append(c.ops, "reset")
	c.state = sluice.State{}
	c.model.Reset()
}

// fail describes a failure with what reproduces it.
func (c *checker) fail(format string, args ...any) error {
	return fmt.Errorf("%s\nreproduce: %s, params %#v, ops (Now in ns):\n\t%s",
		fmt.Sprintf(format, args...), c.where, c.p, strings.Join(c.ops, "\n\t"))
}

// apply runs op on both sides and compares them.
func (c *checker) apply(op sluice.Op) (sluice.Decision, error) {
	c.ops = append(c.ops, fmt.Sprintf("{Verb: %v, Cost: %v, Now: %d}", op.Verb, op.Cost, op.Now))
	before := cloneState(c.state)
	next, got, err := c.p.Step(cloneState(c.state), op)
	if err != nil {
		return got, c.fail("Step: %v", err)
	}
	want := c.model.Apply(op)
	lenient, err := reference.Compare(c.p, op, got, want)
	if err != nil {
		return got, c.fail("%v\ngot  %+v\nwant %+v", err, got, want)
	}
	if lenient {
		// The float code took a side the exact decision was too close to
		// call: follow it.
		defer c.model.Load(next)
	}
	recorded := op.Verb == sluice.VerbFill || op.Verb == sluice.VerbAllow && got.Allowed
	if !recorded {
		if !reflect.DeepEqual(next, before) {
			return got, c.fail("a %v that records nothing changed the state from %+v to %+v", op.Verb, before, next)
		}
		return got, nil
	}
	if err := checkTransition(before, next, got); err != nil {
		return got, c.fail("%v", err)
	}
	c.state = next
	return got, nil
}

// invalid sends an operation Step must reject, and requires the error and
// an unchanged state.
func (c *checker) invalid(rng *rand.Rand, now int64) error {
	ops := []struct {
		op   sluice.Op
		want error
	}{
		{sluice.Op{Verb: sluice.VerbAllow, Cost: c.p.Limit * 2, Now: now}, sluice.ErrCostExceedsLimit},
		{sluice.Op{Verb: sluice.VerbCheck, Cost: math.Nextafter(c.p.Limit, math.Inf(1)), Now: now}, sluice.ErrCostExceedsLimit},
		{sluice.Op{Verb: sluice.VerbAllow, Cost: -1, Now: now}, sluice.ErrInvalidCost},
		{sluice.Op{Verb: sluice.VerbAllow, Cost: math.NaN(), Now: now}, sluice.ErrInvalidCost},
		{sluice.Op{Verb: sluice.VerbCheck, Cost: math.Inf(1), Now: now}, sluice.ErrInvalidCost},
		{sluice.Op{Verb: sluice.Verb(9), Cost: 1, Now: now}, sluice.ErrUnsupported},
		{sluice.Op{Verb: sluice.VerbAllow, Cost: 1, Now: -1}, sluice.ErrTimeOutOfRange},
		{sluice.Op{Verb: sluice.VerbCheck, Cost: 0, Now: maxTime + 1}, sluice.ErrTimeOutOfRange},
	}
	if c.p.Kind != sluice.KindLeakyBucket {
		ops = append(ops, struct {
			op   sluice.Op
			want error
		}{sluice.Op{Verb: sluice.VerbFill, Cost: 1, Now: now}, sluice.ErrUnsupported})
	}
	o := ops[rng.IntN(len(ops))]
	c.ops = append(c.ops, fmt.Sprintf("invalid {Verb: %v, Cost: %v, Now: %d}", o.op.Verb, o.op.Cost, o.op.Now))
	before := cloneState(c.state)
	next, _, err := c.p.Step(cloneState(c.state), o.op)
	if !errors.Is(err, o.want) {
		return c.fail("Step(%+v) error = %v, want %v", o.op, err, o.want)
	}
	if !reflect.DeepEqual(next, before) {
		return c.fail("a rejected operation changed the state from %+v to %+v", before, next)
	}
	return nil
}

// checkTransition checks a recorded step's new state: no NaN or negative
// amount, no time moving backwards, log entries in time order, and a state
// that is fresh again (ResetAfter zero) stored as the zero State.
func checkTransition(before, next sluice.State, d sluice.Decision) error {
	fresh := isZero(next)
	switch {
	case math.IsNaN(next.A) || math.IsNaN(next.B) || next.A < 0 || next.B < 0:
		return fmt.Errorf("bad amounts in state %+v", next)
	case d.ResetAfter == 0 && !fresh:
		return fmt.Errorf("ResetAfter is 0 but the state %+v is not the zero State", next)
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

func isZero(s sluice.State) bool { return s.Time == 0 && s.A == 0 && s.B == 0 && len(s.Log) == 0 }

func cloneState(s sluice.State) sluice.State {
	s.Log = append([]sluice.Entry(nil), s.Log...)
	return s
}

// maxTime is the latest time a request may carry: 2^62 ns since the epoch.
const maxTime = 1 << 62

// startTime draws where a trace starts: mostly at a realistic time since
// the epoch (far above 2^53 ns), sometimes just after the epoch (where the
// zero State's time zero is close) or just before the latest time a
// request may carry.
func startTime(rng *rand.Rand, p sluice.Params) int64 {
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
func nextTime(rng *rand.Rand, p sluice.Params, now int64, last sluice.Decision) int64 {
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

func drawVerb(rng *rand.Rand, p sluice.Params) sluice.Verb {
	switch r := rng.IntN(10); {
	case r < 2:
		return sluice.VerbCheck
	case r < 4 && p.Kind == sluice.KindLeakyBucket:
		return sluice.VerbFill
	}
	return sluice.VerbAllow
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
func drawCost(rng *rand.Rand, p sluice.Params, mode costMode, verb sluice.Verb) float64 {
	switch r := rng.IntN(20); {
	case r == 0:
		return 0
	case r == 1:
		return p.Limit
	case r == 2 && verb == sluice.VerbFill:
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
// CanAccept, Fillup, Reset, with their default MemStore and a simulated
// clock) through monotonic random traces, and compares each decision with
// the reference model and with Params.Step on a shadow state.
func TestLimitersMatchReference(t *testing.T) {
	ctx := context.Background()
	for ai, alg := range testAlgorithms(t) {
		t.Run(alg.name, func(t *testing.T) {
			t.Parallel()
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
				var last sluice.Decision
				for range 30 + rng.IntN(60) {
					now = max(now, nextTime(rng, alg.params, now, last))
					clk.now.Store(now)
					if rng.IntN(40) == 0 {
						require.NoError(t, lim.Reset(ctx, "k"))
						c.reset()
						continue
					}
					op := sluice.Op{Verb: drawVerb(rng, alg.params), Now: now}
					op.Cost = drawCost(rng, alg.params, costs, op.Verb)
					got, err := lim.do(ctx, op)
					require.NoError(t, err)
					want, err := c.apply(op)
					require.NoError(t, err)
					require.Equal(t, want, got, "the limiter and Params.Step disagree: %s", c.fail(""))
					last = got
				}
				require.NoError(t, lim.Close())
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
	sluice.Limiter
	fill  func(ctx context.Context, key string, cost float64) (sluice.Decision, error)
	close func() error
}

// newLimiter builds the limiter p describes with its constructor.
func newLimiter(t testing.TB, p sluice.Params, opts ...sluice.Option) *testLimiter {
	var (
		l   testLimiter
		err error
	)
	rate := sluice.Per(p.Amount, time.Duration(p.Interval))
	switch p.Kind {
	case sluice.KindLeakyBucket:
		var b *sluice.LeakyBucket
		b, err = sluice.NewLeakyBucket(p.Limit, rate, opts...)
		if err == nil {
			l = testLimiter{Limiter: b, fill: b.Fillup, close: b.Close}
		}
	case sluice.KindGCRA:
		var g *sluice.GCRA
		g, err = sluice.NewGCRA(sluice.Per(1, time.Duration(p.Interval)), p.Limit, opts...)
		if err == nil {
			l = testLimiter{Limiter: g, close: g.Close}
		}
	case sluice.KindTokenBucket:
		opts = append(opts, sluice.WithBurst(p.Limit))
		if p.IntervalRefill {
			opts = append(opts, sluice.WithIntervalRefill())
		}
		var b *sluice.TokenBucket
		b, err = sluice.NewTokenBucket(rate, opts...)
		if err == nil {
			l = testLimiter{Limiter: b, close: b.Close}
		}
	case sluice.KindFixedWindow:
		if p.Anchored {
			opts = append(opts, sluice.WithAnchoredWindows())
		}
		var w *sluice.FixedWindow
		w, err = sluice.NewFixedWindow(p.Limit, time.Duration(p.Interval), opts...)
		if err == nil {
			l = testLimiter{Limiter: w, close: w.Close}
		}
	case sluice.KindSlidingLog:
		var w *sluice.SlidingLog
		w, err = sluice.NewSlidingLog(p.Limit, time.Duration(p.Interval), append(opts, sluice.WithMaxEntries(p.MaxEntries))...)
		if err == nil {
			l = testLimiter{Limiter: w, close: w.Close}
		}
	case sluice.KindSlidingCounter:
		var w *sluice.SlidingCounter
		w, err = sluice.NewSlidingCounter(p.Limit, time.Duration(p.Interval), opts...)
		if err == nil {
			l = testLimiter{Limiter: w, close: w.Close}
		}
	}
	require.NoError(t, err)
	require.Equal(t, p, l.Limiter.(limiterParams).Params(), "the constructor rebuilds the same Params")
	return &l
}

// do runs op's verb on key "k" at the limiter's clock.
func (l *testLimiter) do(ctx context.Context, op sluice.Op) (sluice.Decision, error) {
	switch op.Verb {
	case sluice.VerbCheck:
		return l.CanAccept(ctx, "k", op.Cost)
	case sluice.VerbFill:
		return l.fill(ctx, "k", op.Cost)
	}
	return l.Allow(ctx, "k", op.Cost)
}

// Close closes the limiter's default store.
func (l *testLimiter) Close() error { return l.close() }
