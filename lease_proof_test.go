package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/reference"
)

// The lease proofs replay seeded random traces of the concurrency limit
// against Params.Step, against a MemStore through a Limiter's leases, and
// against the exact model of internal/reference (written from the
// definition: a set of leases, each live until released or expired,
// identities unique while the key lives), and compare every decision with
// reference.Compare: Allowed identical unless the exact sum lies within
// reference.Band (1e-12 of the limit) above it (an exact fit is compared
// too: the float code's slack exists so that rounding never denies one),
// identities (Decision.At), RetryAfter and ResetAfter identical to the
// nanosecond, Used within 1e-12 of the limit. The traces mix
// acquisitions of random costs (zero, the whole limit, units, integers,
// eighths, cents, and a hair of 1e-11 to 1e-6 of the limit above or below
// the room left), checks, releases and extensions of live, released,
// extended, expired, reset and made-up identities, with any cost; at
// clock gaps from none to several times the time to live, on the very
// nanosecond a lease expires and the one before, at the instant a denial
// said to retry, and with a clock that steps back.
//
// Beside the model, each trace keeps the book of its holders (leaseBook)
// and checks the guarantee as they see it.

// leaseAlgorithms returns the concurrency limits the lease proofs run,
// each built by NewConcurrencyLimit so that the Params are the ones users
// get: one slot, leases bounded in number below the limit (so that the
// bound on entries decides before the cost does), a time to live of a few
// nanoseconds (identities handed out a nanosecond apart), fractional
// limits, and a hundred slots with the default bound on entries.
func leaseAlgorithms(t testing.TB) []testAlgorithm {
	cases := []struct {
		name  string
		limit float64
		ttl   time.Duration
		opts  []sluice.Option
	}{
		{"1 slot of 1s", 1, time.Second, nil},
		{"2 slots of 1m, 3 leases", 2, time.Minute, []sluice.Option{sluice.WithMaxEntries(3)}},
		{"5 slots of 30s, 3 leases", 5, 30 * time.Second, []sluice.Option{sluice.WithMaxEntries(3)}},
		{"2.5 of 7ns", 2.5, 7, nil},
		{"0.75 of 250ms", 0.75, 250 * time.Millisecond, nil},
		{"10 of 1h, 1 lease", 10, time.Hour, []sluice.Option{sluice.WithMaxEntries(1)}},
		{"100 of 10s", 100, 10 * time.Second, nil},
	}
	algs := make([]testAlgorithm, 0, len(cases))
	for _, c := range cases {
		lim, err := sluice.NewConcurrencyLimit(c.limit, c.ttl, c.opts...)
		require.NoError(t, err, c.name)
		algs = append(algs, testAlgorithm{name: c.name, params: lim.Params()})
		require.NoError(t, lim.Close())
	}
	return algs
}

// maxLeaseAt is the latest identity a release or an extension may name,
// 2^62 + 2^61 ns: far beyond the latest time plus the longest time to
// live, which each lease taken at one instant pushes a nanosecond on.
const maxLeaseAt = maxTime + 1<<61

// leaseVerbs are the verbs the concurrency limit runs.
var leaseVerbs = []engine.Verb{engine.VerbAllow, engine.VerbCheck, engine.VerbCancel, engine.VerbExtend}

// TestLeaseStepMatchesReference replays long random traces of each
// concurrency limit against Params.Step and the reference model, and
// checks the holders' bound at every instant of each.
func TestLeaseStepMatchesReference(t *testing.T) {
	for ai, alg := range leaseAlgorithms(t) {
		t.Run(alg.name, func(t *testing.T) {
			t.Parallel()
			traces := traceCount(240)
			var total leaseStats
			failures := 0
			for trace := range traces {
				seed := uint64(ai)<<32 | uint64(trace)
				stats, err := leaseStepTrace(alg.params, seed)
				total.add(stats)
				if err != nil {
					t.Error(err)
					if failures++; failures == 3 {
						t.FailNow()
					}
				}
			}
			t.Logf("%d traces: %v", traces, total)
			total.requireCoverage(t, alg.params, 100)
		})
	}
}

// leaseStepTrace replays the random trace of seed against p.Step and the
// reference model: 200 to 800 operations, with now and then a reset or an
// operation Step must reject.
func leaseStepTrace(p engine.Params, seed uint64) (leaseStats, error) {
	rng := rand.New(rand.NewPCG(seed, 0x1ea5e))
	c, err := newLeaseChecker(p, fmt.Sprintf("lease seed %d", seed))
	if err != nil {
		return leaseStats{}, err
	}
	costs := costMode(rng.IntN(int(numCostModes)))
	now := startTime(rng, p)
	var last engine.Decision
	for range 200 + rng.IntN(600) {
		now = c.nextTime(rng, now, last)
		switch r := rng.IntN(100); {
		case r < 2:
			c.reset()
			continue
		case r < 4:
			op, want := c.drawInvalid(rng, now)
			if err := c.rejects(op, want); err != nil {
				return c.stats, err
			}
			continue
		}
		if last, err = c.apply(c.drawOp(rng, costs, now)); err != nil {
			return c.stats, err
		}
	}
	return c.stats, nil
}

// TestLeasesThroughALimiterMatchStepAndReference drives a Limiter of each
// concurrency limit on its own MemStore (TryAcquire, Allow, CanAccept,
// Lease.Release and Lease.Extend of held, released and stale copies of
// leases, Reset, and releases and extensions of made-up identities sent
// to the store with Store.Apply), at a simulated clock that also steps
// back, and requires each decision to be Step's on a shadow state, which
// the reference model and the holders' book judge as in
// TestLeaseStepMatchesReference. A Lease that holds nothing (denied,
// released or refused already, or of a cost of zero) refuses a release
// or an extension with ErrNotHeld without asking the store.
func TestLeasesThroughALimiterMatchStepAndReference(t *testing.T) {
	ctx := context.Background()
	for ai, alg := range leaseAlgorithms(t) {
		t.Run(alg.name, func(t *testing.T) {
			t.Parallel()
			p := alg.params
			traces := traceCount(200)
			var total leaseStats
			unasked := 0 // releases and extensions a Lease refused itself
			for trace := range traces {
				seed := uint64(ai)<<32 | uint64(trace)
				rng := rand.New(rand.NewPCG(seed, 0x57073))
				store := sluice.NewMemStore(sluice.MemStoreConfig{})
				clk := &traceClock{}
				lim, err := sluice.NewConcurrencyLimit(p.Limit, time.Duration(p.Interval),
					sluice.WithMaxEntries(p.MaxEntries), sluice.WithClock(clk), sluice.WithStore(store))
				require.NoError(t, err)
				require.Equal(t, p, lim.Params(), "the constructor rebuilds the same Params")
				c, err := newLeaseChecker(p, fmt.Sprintf("limiter lease seed %d", seed))
				require.NoError(t, err)
				costs := costMode(rng.IntN(int(numCostModes)))
				now := startTime(rng, p)
				var (
					last   engine.Decision
					leases []traceLease // granted or not, and stale copies
				)
				for range 150 + rng.IntN(300) {
					now = c.nextTime(rng, now, last)
					clk.now.Store(now)
					op := c.drawOp(rng, costs, now)
					switch r := rng.IntN(100); {
					case r < 2:
						require.NoError(t, lim.Reset(ctx, "k"))
						c.reset()
						continue
					case op.Verb == engine.VerbAllow && r < 70:
						ls, err := lim.TryAcquire(ctx, "k", op.Cost)
						require.NoError(t, err)
						last = c.mirror(t, op, engine.Decision(ls.Decision))
						leases = append(leases, traceLease{Lease: ls, cost: op.Cost})
					case op.Verb == engine.VerbAllow:
						d, err := lim.Allow(ctx, "k", op.Cost) // a lease nobody names
						require.NoError(t, err)
						last = c.mirror(t, op, engine.Decision(d))
					case op.Verb == engine.VerbCheck:
						d, err := lim.CanAccept(ctx, "k", op.Cost)
						require.NoError(t, err)
						last = c.mirror(t, op, engine.Decision(d))
					case len(leases) > 0 && r < 75:
						// A release or an extension by a Lease: the one
						// kept, or a copy of it, which leaves the one kept
						// with the identity it had.
						i := c.drawLease(rng, leases, now)
						if rng.IntN(2) == 0 {
							leases = append(leases, leases[i])
							i = len(leases) - 1
						}
						if c.leaseEnds(t, &leases[i], op.Verb, now) {
							unasked++
						}
					default:
						// A made-up, stale or live identity, straight to
						// the store.
						got, err := store.Apply(ctx, "k", &p, op)
						require.NoError(t, err)
						last = c.mirror(t, op, got)
					}
					if len(leases) > 64 {
						leases = slices.Delete(leases, 0, 16)
					}
				}
				require.NoError(t, lim.Close())
				require.NoError(t, store.Close())
				total.add(c.stats)
			}
			t.Logf("%d traces: %v; %d releases and extensions refused by the Lease itself", traces, total, unasked)
			total.requireCoverage(t, p, 20)
			require.Positive(t, unasked, "releases and extensions of Leases that hold nothing")
		})
	}
}

// mirror applies op, which the limiter or its store decided as got, to
// the shadow state, and requires Step's decision, judged by the model and
// the book, to be got.
func (c *leaseChecker) mirror(t *testing.T, op engine.Op, got engine.Decision) engine.Decision {
	t.Helper()
	want, err := c.apply(op)
	require.NoError(t, err)
	c.requireSame(t, want, got, "the store and Params.Step disagree")
	return got
}

// requireSame requires decision got to be want, and otherwise fails with
// what and the trace so far (built only then: it is long).
func (c *leaseChecker) requireSame(t *testing.T, want, got engine.Decision, what string) {
	t.Helper()
	if got != want {
		require.Equal(t, want, got, "%s: %v", what, c.fail(""))
	}
}

// leaseEnds releases or extends (as verb says) the lease ls at now, and
// requires what the Lease reports: ErrNotHeld without asking the store
// for a Lease that holds nothing, and otherwise the store's decision as
// Step gives it on the shadow state, nil if the lease was held and
// ErrNotHeld if not. It reports whether the Lease refused without asking.
func (c *leaseChecker) leaseEnds(t *testing.T, ls *traceLease, verb engine.Verb, now int64) (unasked bool) {
	t.Helper()
	ctx := context.Background()
	op := engine.Op{Verb: verb, Cost: ls.cost, Now: now, At: ls.At}
	asks := ls.Allowed && ls.At != 0
	var err error
	if verb == engine.VerbExtend {
		err = ls.Extend(ctx)
	} else {
		err = ls.Release(ctx)
	}
	if !asks {
		require.ErrorIs(t, err, sluice.ErrNotHeld, "a Lease that holds nothing")
		return true
	}
	want, applyErr := c.apply(op)
	require.NoError(t, applyErr)
	if !want.Allowed {
		if !errors.Is(err, sluice.ErrNotHeld) {
			require.ErrorIs(t, err, sluice.ErrNotHeld, "%v of a lease not held: %v", verb, c.fail(""))
		}
		require.Zero(t, ls.At, "a Lease refused names nothing any more")
		return false
	}
	if err != nil {
		require.NoError(t, err, "%v of a held lease: %v", verb, c.fail(""))
	}
	if verb == engine.VerbExtend {
		c.requireSame(t, want, engine.Decision(ls.Decision), "the extended Lease and Params.Step disagree")
	} else {
		require.Zero(t, ls.At, "a released Lease names nothing any more")
	}
	return false
}

// drawLease draws which of a trace's Leases to release or extend: mostly
// one the book says is held at now, else any, granted or not.
func (c *leaseChecker) drawLease(rng *rand.Rand, leases []traceLease, now int64) int {
	if rng.IntN(5) > 0 {
		var held []int
		for i, ls := range leases {
			if c.book.holds(ls.At, now) {
				held = append(held, i)
			}
		}
		if len(held) > 0 {
			return held[rng.IntN(len(held))]
		}
	}
	return rng.IntN(len(leases))
}

// traceLease is a Lease of a trace, with its cost.
type traceLease struct {
	sluice.Lease
	cost float64
}

// leaseChecker replays operations of a concurrency limit against
// Params.Step and the reference model, checks each decision and state,
// and keeps the holders' book of the leases.
type leaseChecker struct {
	p     engine.Params
	model reference.Model
	state engine.State
	where string
	ops   []string
	book  leaseBook
	// seen holds the latest identities the trace handed out, resets and
	// all, from which releases and extensions draw.
	seen  []int64
	stats leaseStats
}

func newLeaseChecker(p engine.Params, where string) (*leaseChecker, error) {
	m, err := reference.New(p)
	if err != nil {
		return nil, err
	}
	return &leaseChecker{p: p, model: m, where: where, book: newLeaseBook(p)}, nil
}

// reset forgets the key, as a store's Reset does: its leases with it.
func (c *leaseChecker) reset() {
	c.ops = append(c.ops, "reset")
	c.state = engine.State{}
	c.model.Reset()
	c.book.forget()
}

// fail describes a failure with what reproduces it.
func (c *leaseChecker) fail(format string, args ...any) error {
	return reproducible(c.where, c.p, c.ops, format, args...)
}

// apply runs op on Step and the model and compares them; checks the state
// Step leaves; and keeps the book, which checks the bound.
func (c *leaseChecker) apply(op engine.Op) (engine.Decision, error) {
	c.ops = append(c.ops, formatLeaseOp(op))
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
		c.stats.lenient[op.Verb]++
		c.model.Load(next) // the float code took a side too close to call
	} else {
		c.stats.exact[op.Verb]++
	}
	rec := recorded(op.Verb, got)
	if rec != c.p.Records(op.Verb, &got) {
		return got, c.fail("the reference records %v of %+v, Params.Records %v", rec, got, !rec)
	}
	if !rec {
		if !reflect.DeepEqual(next, before) {
			return got, c.fail("a %v that records nothing (%+v) changed the state from %+v to %+v", op.Verb, got, before, next)
		}
	} else {
		if err := c.checkLeaseState(before, next, op, got); err != nil {
			return got, c.fail("%v", err)
		}
		c.state = next
	}
	c.stats.count(c.p, op, before, got)
	if err := c.book.keep(op, got, rec); err != nil {
		return got, c.fail("%v", err)
	}
	if got.At != 0 {
		c.seen = append(c.seen, got.At)
		if len(c.seen) > 64 {
			c.seen = slices.Delete(c.seen, 0, 16)
		}
	}
	held, n := c.book.held(op.Now)
	c.stats.most(c.p, held, n)
	return got, nil
}

// checkLeaseState checks the state a recorded decision d on op left: the
// zero State iff the key is fresh (ResetAfter zero); otherwise leases in
// strictly increasing order of expiry, no more than MaxEntries of them,
// each of a cost above zero, holding no more than the limit (plus the
// float slack) together, none later than the latest identity handed out
// (State.Time), which never goes back, and which ResetAfter reaches; and,
// after a decision that took, released or extended a lease, only leases
// live at now.
func (c *leaseChecker) checkLeaseState(before, next engine.State, op engine.Op, d engine.Decision) error {
	if isZero(next) != (d.ResetAfter == 0) {
		return fmt.Errorf("ResetAfter is %v with state %+v: the zero State iff fresh", d.ResetAfter, next)
	}
	if isZero(next) {
		return nil
	}
	sum := 0.0
	for i, e := range next.Log {
		switch {
		case i > 0 && e.Time <= next.Log[i-1].Time:
			return fmt.Errorf("leases out of order of expiry: %+v", next.Log)
		case !(e.Cost > 0):
			return fmt.Errorf("a lease of cost %v: %+v", e.Cost, next.Log)
		case e.Time > next.Time:
			return fmt.Errorf("a lease expires at %d, after the latest identity %d", e.Time, next.Time)
		case e.Time <= op.Now && (d.At != 0 || op.Verb == engine.VerbCancel):
			return fmt.Errorf("a lease expired at %d kept by a %v at %d: %+v", e.Time, op.Verb, op.Now, next.Log)
		}
		sum += e.Cost
	}
	switch {
	case next.A != 0 || next.B != 0 || next.Until != 0:
		return fmt.Errorf("a concurrency limit keeps only leases and a time: %+v", next)
	case len(next.Log) > c.p.MaxEntries:
		return fmt.Errorf("%d leases kept, more than MaxEntries %d", len(next.Log), c.p.MaxEntries)
	case sum > c.p.Limit*(1+boundSlack):
		return fmt.Errorf("leases of %v kept, more than the limit %v", sum, c.p.Limit)
	case next.Time < before.Time:
		return fmt.Errorf("the latest identity went back from %d to %d", before.Time, next.Time)
	case int64(d.ResetAfter) != next.Time-op.Now:
		return fmt.Errorf("ResetAfter = %v, but the latest identity %d is %v from now", d.ResetAfter, next.Time, time.Duration(next.Time-op.Now))
	}
	return nil
}

// rejects requires Step to reject op with want, leaving the state as it
// was.
func (c *leaseChecker) rejects(op engine.Op, want error) error {
	c.ops = append(c.ops, "invalid "+formatLeaseOp(op))
	return stepRejects(c.p, c.state, op, want, c.fail)
}

// drawInvalid draws an operation Step must reject for a concurrency
// limit, and the error it gives: the verbs it does not run (a lease is
// taken whole and now), costs out of range (a release's and an
// extension's too, though they play no part), identities and times out
// of range.
func (c *leaseChecker) drawInvalid(rng *rand.Rand, now int64) (engine.Op, error) {
	limit := c.p.Limit
	ops := []struct {
		op   engine.Op
		want error
	}{
		{engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: now, MaxDelay: 1}, sluice.ErrUnsupported},
		{engine.Op{Verb: engine.VerbFill, Cost: 1, Now: now}, sluice.ErrUnsupported},
		{engine.Op{Verb: engine.VerbAtMost, Cost: limit, Now: now}, sluice.ErrUnsupported},
		{engine.Op{Verb: engine.Verb(9), Cost: 1, Now: now}, sluice.ErrUnsupported},
		{engine.Op{Verb: engine.VerbAllow, Cost: limit * 2, Now: now}, sluice.ErrCostExceedsLimit},
		{engine.Op{Verb: engine.VerbCheck, Cost: math.Nextafter(limit, math.Inf(1)), Now: now}, sluice.ErrCostExceedsLimit},
		{engine.Op{Verb: engine.VerbCancel, Cost: limit * 2, Now: now, At: now + 1}, sluice.ErrCostExceedsLimit},
		{engine.Op{Verb: engine.VerbAllow, Cost: -1, Now: now}, sluice.ErrInvalidCost},
		{engine.Op{Verb: engine.VerbExtend, Cost: math.NaN(), Now: now, At: now + 1}, sluice.ErrInvalidCost},
		{engine.Op{Verb: engine.VerbCheck, Cost: math.Inf(1), Now: now}, sluice.ErrInvalidCost},
		{engine.Op{Verb: engine.VerbExtend, Cost: 1, Now: now, At: -1}, sluice.ErrTimeOutOfRange},
		{engine.Op{Verb: engine.VerbCancel, Cost: 0, Now: now, At: maxLeaseAt + 1}, sluice.ErrTimeOutOfRange},
		{engine.Op{Verb: engine.VerbAllow, Cost: 0, Now: -1}, sluice.ErrTimeOutOfRange},
		{engine.Op{Verb: engine.VerbCancel, Cost: 0, Now: maxTime + 1, At: now}, sluice.ErrTimeOutOfRange},
	}
	o := ops[rng.IntN(len(ops))]
	return o.op, o.want
}

// drawOp draws the trace's next operation at now: mostly acquisitions,
// and releases and extensions of any identity, with any cost; one
// acquisition or check in eight of a hair more or less than the room
// the key has left.
func (c *leaseChecker) drawOp(rng *rand.Rand, costs costMode, now int64) engine.Op {
	op := engine.Op{Verb: engine.VerbAllow, Now: now}
	switch r := rng.IntN(100); {
	case r < 42:
	case r < 54:
		op.Verb = engine.VerbCheck
	case r < 80:
		op.Verb, op.At = engine.VerbCancel, c.drawIdentity(rng, now)
	default:
		op.Verb, op.At = engine.VerbExtend, c.drawIdentity(rng, now)
	}
	op.Cost = drawCost(rng, c.p, costs, op.Verb)
	if op.At == 0 && rng.IntN(8) == 0 {
		op.Cost = c.drawHair(rng, now)
	}
	return op
}

// drawHair draws a cost a hair (1e-11 to 1e-6 of the limit, beyond
// reference.Band) above or below the room the key has left at now, as
// its state stands: a sum that misses the limit by that much must be
// decided exactly.
func (c *leaseChecker) drawHair(rng *rand.Rand, now int64) float64 {
	room := c.p.Limit
	for _, e := range c.state.Log {
		if e.Time > now {
			room -= e.Cost
		}
	}
	hair := c.p.Limit * [3]float64{1e-11, 1e-9, 1e-6}[rng.IntN(3)]
	if rng.IntN(2) == 0 {
		hair = -hair
	}
	return min(max(room+hair, hair, 0), c.p.Limit)
}

// drawIdentity draws the identity a release or an extension names:
// mostly a lease held at now, else one the trace handed out (released,
// extended since, expired, from before a reset, or held), one a
// nanosecond off it (often the next lease's, handed out at the same
// instant), zero, now (a lease expiring now is not live), or any instant
// within two times to live.
func (c *leaseChecker) drawIdentity(rng *rand.Rand, now int64) int64 {
	held := c.book.live(now)
	switch r := rng.IntN(20); {
	case r < 10 && len(held) > 0:
		return held[rng.IntN(len(held))]
	case r < 14 && len(c.seen) > 0:
		return c.seen[rng.IntN(len(c.seen))]
	case r < 16 && len(c.seen) > 0:
		return c.seen[rng.IntN(len(c.seen))] + 1 - 2*rng.Int64N(2)
	case r < 17:
		return 0
	case r < 18:
		return now
	}
	return now + 1 + rng.Int64N(2*c.p.Interval)
}

// nextTime draws the time of the trace's next operation: the same
// instant, nanoseconds later, within a time to live, on a held lease's
// expiry or the nanosecond before, at the instant the last denial said
// to retry or the one before, at the latest identity (when the key turns
// fresh) or around it, several times to live later, a long idle, or a
// clock that steps back by up to a time to live.
func (c *leaseChecker) nextTime(rng *rand.Rand, now int64, last engine.Decision) int64 {
	ttl := c.p.Interval
	next := now
	switch r := rng.IntN(100); {
	case r < 15:
	case r < 25:
		next = now + 1 + rng.Int64N(1000)
	case r < 45:
		next = now + rng.Int64N(ttl)
	case r < 57:
		if held := c.book.live(now); len(held) > 0 {
			next = held[rng.IntN(len(held))] - rng.Int64N(2)
		}
	case r < 65:
		if last.RetryAfter > 0 {
			next = now + int64(last.RetryAfter) - rng.Int64N(2)
		}
	case r < 69:
		if c.state.Time > 0 {
			next = c.state.Time + rng.Int64N(3) - 1
		}
	case r < 79:
		next = now + ttl + rng.Int64N(4*ttl)
	case r < 81:
		next = now + rng.Int64N(int64(48*time.Hour))
	default:
		next = now - 1 - rng.Int64N(ttl) // the clock steps back
	}
	return min(max(next, 0), maxTime)
}

// formatLeaseOp writes op as a test would construct it.
func formatLeaseOp(op engine.Op) string {
	switch op.Verb {
	case engine.VerbCancel, engine.VerbExtend:
		return fmt.Sprintf("{Verb: %v, Cost: %v, Now: %d, At: %d}", op.Verb, op.Cost, op.Now, op.At)
	case engine.VerbReserve:
		return fmt.Sprintf("{Verb: %v, Cost: %v, Now: %d, MaxDelay: %d}", op.Verb, op.Cost, op.Now, op.MaxDelay)
	}
	return fmt.Sprintf("{Verb: %v, Cost: %v, Now: %d}", op.Verb, op.Cost, op.Now)
}

// leaseStats counts what lease traces decided: the decisions compared
// exactly and those too close to the limit to compare (lenient), per
// verb; leases taken, and those whose identity had to move past the
// latest one (taken at an instant that already handed one out); denials
// for want of room in the limit and for want of an entry; releases and
// extensions made and refused; and the most the holders held at once.
type leaseStats struct {
	exact, lenient            [engine.VerbExtend + 1]int
	taken, bumped             int
	deniedCost, deniedEntries int
	released, unreleased      int
	extended, unextended      int
	mostHeld                  float64 // of the limit
	mostLeases                int
	heldFull, heldAllEntries  int
}

func (s *leaseStats) add(o leaseStats) {
	for v := range s.exact {
		s.exact[v] += o.exact[v]
		s.lenient[v] += o.lenient[v]
	}
	s.taken += o.taken
	s.bumped += o.bumped
	s.deniedCost += o.deniedCost
	s.deniedEntries += o.deniedEntries
	s.released += o.released
	s.unreleased += o.unreleased
	s.extended += o.extended
	s.unextended += o.unextended
	s.mostHeld = max(s.mostHeld, o.mostHeld)
	s.mostLeases = max(s.mostLeases, o.mostLeases)
	s.heldFull += o.heldFull
	s.heldAllEntries += o.heldAllEntries
}

// count counts decision d on op, made from state before.
func (s *leaseStats) count(p engine.Params, op engine.Op, before engine.State, d engine.Decision) {
	switch op.Verb {
	case engine.VerbAllow, engine.VerbCheck:
		switch {
		case d.At != 0:
			s.taken++
			if d.At > op.Now+p.Interval {
				s.bumped++
			}
		case d.Allowed:
		case op.Cost > 0 && liveLeases(before, op.Now) >= p.MaxEntries:
			s.deniedEntries++
		default:
			s.deniedCost++
		}
	case engine.VerbCancel:
		if d.Allowed {
			s.released++
		} else {
			s.unreleased++
		}
	case engine.VerbExtend:
		if d.Allowed {
			s.extended++
		} else {
			s.unextended++
		}
	}
}

// most notes what the holders hold after a decision.
func (s *leaseStats) most(p engine.Params, cost float64, n int) {
	s.mostHeld = max(s.mostHeld, cost/p.Limit)
	s.mostLeases = max(s.mostLeases, n)
	if cost >= p.Limit*(1-boundSlack) {
		s.heldFull++
	}
	if n == p.MaxEntries {
		s.heldAllEntries++
	}
}

// liveLeases is how many leases of s are live at now.
func liveLeases(s engine.State, now int64) int {
	n := 0
	for _, e := range s.Log {
		if e.Time > now {
			n++
		}
	}
	return n
}

func (s leaseStats) String() string {
	var b strings.Builder
	for _, v := range leaseVerbs {
		fmt.Fprintf(&b, "%v %d exact, %d lenient; ", v, s.exact[v], s.lenient[v])
	}
	fmt.Fprintf(&b, "%d leases taken (%d past the latest identity), %d denied for the limit, %d for an entry; "+
		"%d released, %d not held; %d extended, %d not held; held at most %.4g of the limit, %d leases; "+
		"%d times the whole limit held, %d times every entry",
		s.taken, s.bumped, s.deniedCost, s.deniedEntries, s.released, s.unreleased, s.extended, s.unextended,
		s.mostHeld, s.mostLeases, s.heldFull, s.heldAllEntries)
	return b.String()
}

// requireCoverage requires the traces of p to have decided at least n of
// each verb exactly, and to have pushed the key where its rules matter:
// leases taken past the latest identity, releases and extensions made
// and refused, the whole limit held, denials for want of room in the
// limit (unless one lease is all a key holds), and, where MaxEntries
// binds before the limit does, every entry held and a denial for want of
// one.
func (s leaseStats) requireCoverage(t *testing.T, p engine.Params, n int) {
	t.Helper()
	for _, v := range leaseVerbs {
		require.Greater(t, s.exact[v], n, "%v decided exactly", v)
	}
	for name, count := range map[string]int{
		"leases taken past the latest identity": s.bumped,
		"releases":                              s.released,
		"releases of leases not held":           s.unreleased,
		"extensions":                            s.extended,
		"extensions of leases not held":         s.unextended,
		"the whole limit held":                  s.heldFull,
	} {
		require.Positive(t, count, name)
	}
	if p.MaxEntries > 1 {
		// With one entry, a lease that fits the limit alone always fits.
		require.Positive(t, s.deniedCost, "denials for the limit")
	}
	if float64(p.MaxEntries) < p.Limit {
		require.Positive(t, s.heldAllEntries, "every entry held")
		require.Positive(t, s.deniedEntries, "denials for want of an entry")
	}
}

// leaseBook is what the holders of a key's leases know, kept from the
// decisions alone: every identity handed out while the key lived, with
// its cost and expiry, and whether its holder gave it up (released it, or
// extended it to a new identity). A lease is held from its grant until
// it is given up or expires, whichever comes first, by the holders' time,
// the latest clock reading seen: it never steps back, so a lease that
// expired stays expired for its holder even if the store's clock steps
// back. A reset forgets the key and its leases.
//
// After every decision, the book checks the guarantee: the leases held
// hold no more than the limit (plus the float slack of boundSlack) and
// number no more than MaxEntries; the store counts every one of them
// (Decision.Used); it releases and extends exactly the identities handed
// out and not given up, never a lease it refuses (each one held is live
// on the store); it never hands out an identity twice while the key
// lives. Between two decisions the leases held only expire, so the most
// held at any instant is the most held right after some decision: the
// check covers every instant of the trace.
type leaseBook struct {
	limit      float64
	maxEntries int
	clock      int64
	issued     map[int64]*bookLease
}

type bookLease struct {
	cost   float64
	expiry int64
	given  bool // released, or extended to another identity
}

func newLeaseBook(p engine.Params) leaseBook {
	return leaseBook{limit: p.Limit, maxEntries: p.MaxEntries, issued: map[int64]*bookLease{}}
}

// forget drops the book: the key is forgotten, or fresh, and identities
// start over.
func (b *leaseBook) forget() { clear(b.issued) }

// holds reports whether the lease of identity at is held at now.
func (b *leaseBook) holds(at, now int64) bool {
	l := b.issued[at]
	return l != nil && !l.given && l.expiry > max(b.clock, now)
}

// live returns the identities of the leases held at now.
func (b *leaseBook) live(now int64) []int64 {
	var ids []int64
	for id := range b.issued {
		if b.holds(id, now) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids) // map order is random: keep the traces seeded
	return ids
}

// held returns the cost and number of the leases held at now.
func (b *leaseBook) held(now int64) (cost float64, n int) {
	for _, id := range b.live(now) {
		cost += b.issued[id].cost
		n++
	}
	return cost, n
}

// keep books decision d on op, which records iff rec, and checks the
// guarantee after it.
func (b *leaseBook) keep(op engine.Op, d engine.Decision, rec bool) error {
	b.clock = max(b.clock, op.Now)
	given := func() (*bookLease, error) {
		l := b.issued[op.At]
		if l == nil || l.given {
			return nil, fmt.Errorf("a %v of identity %d, which no holder holds, was allowed", op.Verb, op.At)
		}
		l.given = true
		return l, nil
	}
	switch {
	case op.Verb == engine.VerbAllow && d.At != 0:
		if err := b.grant(d.At, op.Cost); err != nil {
			return err
		}
	case (op.Verb == engine.VerbCancel || op.Verb == engine.VerbExtend) && !d.Allowed:
		if b.holds(op.At, op.Now) {
			return fmt.Errorf("a %v of identity %d, held until %d, was refused at %d", op.Verb, op.At, b.issued[op.At].expiry, op.Now)
		}
	case op.Verb == engine.VerbCancel:
		if _, err := given(); err != nil {
			return err
		}
	case op.Verb == engine.VerbExtend:
		l, err := given()
		if err != nil {
			return err
		}
		if err := b.grant(d.At, l.cost); err != nil {
			return err
		}
	}
	if rec && d.ResetAfter == 0 {
		b.forget()
	}
	cost, n := b.held(op.Now)
	switch {
	case cost > b.limit*(1+boundSlack):
		return fmt.Errorf("the holders hold %v at %d, more than the limit %v", cost, b.clock, b.limit)
	case n > b.maxEntries:
		return fmt.Errorf("the holders hold %d leases at %d, more than MaxEntries %d", n, b.clock, b.maxEntries)
	case d.Used < min(cost, b.limit)-boundSlack*b.limit:
		return fmt.Errorf("Used = %v, but the holders hold %v", d.Used, cost)
	}
	return nil
}

// grant books a lease of cost handed out as identity at.
func (b *leaseBook) grant(at int64, cost float64) error {
	if b.issued[at] != nil {
		return fmt.Errorf("identity %d handed out twice while the key lived", at)
	}
	b.issued[at] = &bookLease{cost: cost, expiry: at}
	return nil
}

// TestLeaseBoundHoldsAgainstAdversaries drives each concurrency limit
// with traffic aimed at its guarantee, through Params.Step judged by the
// reference model and the holders' book (which checks the bound after
// every decision, and so at every instant): acquisitions on the very
// nanosecond each denial names, never released; a release and two
// acquisitions at one instant, over and over; leases extended on their
// last nanosecond (and one on its expiry, too late) while others hammer;
// a clock that swings back and forth across the leases' expiries. The
// costs are units and tenths of the limit, whose float sums round (ten
// float tenths of 1 exceed it by 5.5e-17). Each adversary must fill the
// key, its limit or its entries, and never hold more.
func TestLeaseBoundHoldsAgainstAdversaries(t *testing.T) {
	start := time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC).UnixNano()
	adversaries := []struct {
		name string
		run  func(c *leaseChecker, now int64, cost float64) error
	}{
		{"acquire when each denial says", func(c *leaseChecker, now int64, cost float64) error {
			for end := now + 10*c.p.Interval; now < end; {
				d, err := c.apply(engine.Op{Verb: engine.VerbAllow, Cost: cost, Now: now})
				if err != nil {
					return err
				}
				now += int64(d.RetryAfter)
			}
			return nil
		}},
		{"release and acquire twice at one instant", func(c *leaseChecker, now int64, cost float64) error {
			for range 200 {
				// Fill the key, release its earliest lease, and ask for
				// two at once: the slot freed goes to one.
				if err := fillLeases(c, now, cost); err != nil {
					return err
				}
				held := c.book.live(now)
				if _, err := c.apply(engine.Op{Verb: engine.VerbCancel, Cost: cost, Now: now, At: held[0]}); err != nil {
					return err
				}
				for range 2 {
					if _, err := c.apply(engine.Op{Verb: engine.VerbAllow, Cost: cost, Now: now}); err != nil {
						return err
					}
				}
				now += max(c.p.Interval/50, 1)
			}
			return nil
		}},
		{"extend on the last nanosecond", func(c *leaseChecker, now int64, cost float64) error {
			for range 100 {
				// Fill the key, then extend its earliest lease on its last
				// nanosecond and the next one on its expiry, too late.
				if err := fillLeases(c, now, cost); err != nil {
					return err
				}
				held := c.book.live(now)
				now = held[0] - 1
				if _, err := c.apply(engine.Op{Verb: engine.VerbExtend, Cost: cost, Now: now, At: held[0]}); err != nil {
					return err
				}
				if len(held) > 1 {
					now = held[1]
					if _, err := c.apply(engine.Op{Verb: engine.VerbExtend, Cost: cost, Now: now, At: held[1]}); err != nil {
						return err
					}
				}
			}
			return nil
		}},
		{"a clock that swings across expiries", func(c *leaseChecker, now int64, cost float64) error {
			for i := range int64(150) {
				// Fill the key on the earliest lease's expiry, the
				// nanosecond before, or up to a time to live back.
				if err := fillLeases(c, now, cost); err != nil {
					return err
				}
				held := c.book.live(c.book.clock)
				switch {
				case len(held) == 0:
					now = c.book.clock
				case i%3 == 0:
					now = held[0]
				case i%3 == 1:
					now = held[0] - 1
				default:
					now = max(now-1-i*7919%c.p.Interval, 0)
				}
			}
			return nil
		}},
	}
	for _, alg := range leaseAlgorithms(t) {
		p := alg.params
		t.Run(alg.name, func(t *testing.T) {
			t.Parallel()
			for _, cost := range []float64{min(1, p.Limit), p.Limit / 10} {
				for _, adv := range adversaries {
					c, err := newLeaseChecker(p, fmt.Sprintf("%s, cost %v", adv.name, cost))
					require.NoError(t, err)
					require.NoError(t, adv.run(c, start, cost))
					s := c.stats
					filled := s.mostHeld*p.Limit+cost > p.Limit*(1+boundSlack) || s.mostLeases == p.MaxEntries
					require.True(t, filled, "%s, cost %v: the key was never full: %v", adv.name, cost, s)
				}
			}
		})
	}
}

// fillLeases acquires leases of cost at now until one is denied.
func fillLeases(c *leaseChecker, now int64, cost float64) error {
	for {
		d, err := c.apply(engine.Op{Verb: engine.VerbAllow, Cost: cost, Now: now})
		if err != nil || !d.Allowed {
			return err
		}
	}
}
