package sluice_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/reference"
	"github.com/sluice-go/sluice/storetest"
)

// The change proofs replay the property tests' random traces (every verb
// the algorithm runs, nanosecond times, a clock that steps back; see
// proof_test.go) on a key whose limit changes at random instants, among
// limits of its algorithm and mode with other numbers
// (storetest.Variants: a limit three times higher and half as high, a
// longer interval that is not a multiple of the old and a shorter one, a
// faster rate, fewer entries), against the exact models changed with
// reference.Change, which carry the key's state over as package engine's
// "Limits that change" defines it. Each decision is compared with
// reference.Compare (reference.CompareStrict under a penalty or counted
// denials), with the property tests' tolerances; the model follows the
// production state where the float code took a side too close to call,
// GCRA's float conversion of a TAT to another interval included.
//
// The checker keeps the key as a store does (package engine's "State and
// time"): the state, written back when the decision records
// (Params.Records) or carries a GCRA state over (Params.Carries, never
// for a check), and beside it its expiry, now + ResetAfter of the
// decision that wrote it. A request at or after the expiry is decided
// from the zero State, whatever the limit then, and one that records
// nothing leaves the state and its expiry as they were, for a clock that
// steps back before it. The models keep the expiry too, from their own
// decisions, with the rule in force (reference.Expiring), and follow the
// production's where its float arithmetic rounded ResetAfter another way.
// Beside the model, each step is held to the Store contract: a decision
// that neither records nor carries a state over leaves it as it was, a
// check included, and one that only carries it over changes nothing but
// its TAT and the interval it records.

func TestStepMatchesReferenceAcrossChangedLimits(t *testing.T) {
	for ai, alg := range testAlgorithms(t) {
		t.Run(alg.name, func(t *testing.T) {
			t.Parallel()
			total := runChangeTraces(t, alg.params, uint64(ai)<<32, traceCount(300))
			for _, verb := range algorithmVerbs(alg.params) {
				require.Greater(t, total.exact[verb], 100, "%v decided exactly", verb)
			}
			require.Greater(t, total.firstExact, 200, "first decisions under a new limit decided exactly")
			if alg.params.Kind == engine.KindGCRA {
				require.Greater(t, total.carried, 50, "TATs carried over to another interval")
				require.Greater(t, total.carriedAlone, 10, "conversions recorded by a decision that recorded nothing else")
				require.Greater(t, total.checkConverted, 10, "checks that decided from a converted TAT")
			}
			require.Greater(t, total.expired, 100, "decisions at or after the key's expiry")
			if forgets(alg.params) {
				require.Greater(t, total.forgotten, 10, "decisions the expiry made from a fresh key, where the state kept would decide otherwise")
			}
			if buckets(alg.params) {
				require.Greater(t, total.beyondExact, 10, "decisions on a bucket holding more than its limit frees in 2^60 ns, compared exactly")
			}
		})
	}
}

// TestStrictStepMatchesReferenceAcrossChangedLimits replays the change
// traces on the strict algorithms of storetest.Strict (a penalty, counted
// denials, or both), whose blocks keep their end across a change.
func TestStrictStepMatchesReferenceAcrossChangedLimits(t *testing.T) {
	for ai, p := range storetest.Strict() {
		t.Run(fmt.Sprintf("%v penalty %v counted %v", p.Kind, p.Penalty, p.CountDenied), func(t *testing.T) {
			t.Parallel()
			total := runChangeTraces(t, p, 1<<62|uint64(ai)<<32, traceCount(150))
			require.Greater(t, total.exact[engine.VerbAllow], 100, "Allow decided exactly")
			require.Greater(t, total.firstExact, 100, "first decisions under a new limit decided exactly")
			require.Greater(t, total.expired, 50, "decisions at or after the key's expiry")
			if forgets(p) {
				require.Positive(t, total.forgotten, "decisions the expiry made from a fresh key, where the state kept would decide otherwise")
			}
			if buckets(p) {
				require.Positive(t, total.beyondExact, "decisions on a bucket holding more than its limit frees in 2^60 ns, compared exactly")
			}
		})
	}
}

// forgets reports whether the expiry of a key of p's algorithm, changed
// to another limit, may forget what the new limit still counts: all but
// GCRA, whose state holds nothing after its TAT under any interval, and
// the concurrency limit, whose leases and line expire by their own
// instants.
func forgets(p engine.Params) bool {
	return p.Kind != engine.KindGCRA && p.Kind != engine.KindConcurrency
}

// buckets reports whether p is a bucket (the leaky bucket, the token
// bucket), which a charge may leave holding what its rate frees in 2^60
// ns, and a slower limit then reads as holding more than its own rate
// frees in 2^60 ns: the cap on durations decides such a key (see
// internal/reference's meter and refill).
func buckets(p engine.Params) bool {
	return p.Kind == engine.KindLeakyBucket || p.Kind == engine.KindTokenBucket
}

// runChangeTraces replays traces random traces of a key whose limit
// changes among p's variants, of seeds from seeds on, failing t after
// three failures, and returns what they decided.
func runChangeTraces(t *testing.T, p engine.Params, seeds uint64, traces int) changeStats {
	limits := storetest.Variants(p)
	require.Greater(t, len(limits), 2, "limits to change to")
	var total changeStats
	failures := 0
	for trace := range traces {
		stats, err := changeTrace(limits, seeds|uint64(trace))
		total.add(stats)
		if err != nil {
			t.Error(err)
			if failures++; failures == 3 {
				t.FailNow()
			}
		}
	}
	t.Logf("%d traces: %v", traces, total)
	require.Greater(t, total.changes, traces, "limits changed")
	return total
}

// changeTrace replays the random trace of seed, whose limit changes among
// limits, against Params.Step and the changed models.
func changeTrace(limits []engine.Params, seed uint64) (changeStats, error) {
	rng := rand.New(rand.NewPCG(seed, 0xc4a9e))
	p := limits[rng.IntN(len(limits))]
	c := &changeChecker{limits: limits}
	c.where = fmt.Sprintf("change seed %d", seed)
	if err := c.limit(p); err != nil {
		return changeStats{}, err
	}
	err := runTrace(rng, p, c)
	c.changeStats.traceStats = c.stats
	return c.changeStats, err
}

// changeChecker replays operations against Params.Step and the model of
// the key's current limit, which changes now and then. It draws its
// operations and times as the property tests' checker does.
type changeChecker struct {
	checker
	strict *reference.Strict // the model, under a penalty or counted denials
	limits []engine.Params
	// first reports whether no decision was made since the limit last
	// changed.
	first bool
	// expires is the state's expiry, if timed: now + ResetAfter of the
	// decision that last wrote it.
	expires int64
	timed   bool
	err     error
	changeStats
}

// changeStats counts what a change trace decided, beside traceStats.
type changeStats struct {
	traceStats
	// Limit changes, and the first decisions after one compared exactly
	// and leniently.
	changes, firstExact, firstLenient int
	// GCRA: TATs carried over to another interval and recorded; of them,
	// by a decision that recorded nothing else (a denial); checks that
	// decided from a TAT converted, and recorded nothing.
	carried, carriedAlone, checkConverted int
	// Decisions at or after the key's expiry, on a state it kept; of
	// them, those the state kept, read under the limit then, would have
	// decided otherwise (forgotten); and recorded decisions whose expiry
	// the model followed, its exact ResetAfter and the production's float
	// one a nanosecond or so apart.
	expired, forgotten, expiryFollowed int
	// Decisions on a bucket holding more than its limit frees in 2^60 ns
	// (a debt charged under a faster limit, whose waits the cap on
	// durations shortens), and of them those compared exactly.
	beyond, beyondExact int
}

func (s *changeStats) add(o changeStats) {
	s.traceStats.add(o.traceStats)
	s.changes += o.changes
	s.firstExact += o.firstExact
	s.firstLenient += o.firstLenient
	s.carried += o.carried
	s.carriedAlone += o.carriedAlone
	s.checkConverted += o.checkConverted
	s.expired += o.expired
	s.forgotten += o.forgotten
	s.expiryFollowed += o.expiryFollowed
	s.beyond += o.beyond
	s.beyondExact += o.beyondExact
}

func (s changeStats) String() string {
	return fmt.Sprintf("%v; %d limit changes, first decisions after one %d exact and %d lenient; %d TATs carried over (%d by a decision that recorded nothing else), %d checks decided from a converted TAT; %d decisions at or after the key's expiry (%d of them decided otherwise by the state kept), %d expiries followed; %d decisions on a bucket holding more than its limit frees in 2^60 ns (%d exact)",
		s.traceStats, s.changes, s.firstExact, s.firstLenient, s.carried, s.carriedAlone, s.checkConverted, s.expired, s.forgotten, s.expiryFollowed, s.beyond, s.beyondExact)
}

// limit sets the key's limit to p, carrying the model's state over (the
// first limit builds the model).
func (c *changeChecker) limit(p engine.Params) error {
	strict := p.Penalty > 0 || p.CountDenied
	var (
		m   reference.Model
		err error
	)
	switch {
	case c.model == nil && strict:
		m, err = reference.NewStrict(p)
		m = reference.Expiring(m)
	case c.model == nil:
		m, err = reference.New(p)
		m = reference.Expiring(m)
	default:
		c.ops = append(c.ops, fmt.Sprintf("limit %#v", p))
		c.changes++
		c.first = true
		m, err = reference.Change(c.model, p)
	}
	if err != nil {
		return c.fail("the model of %#v: %v", p, err)
	}
	c.p, c.model = p, m
	if strict {
		c.strict = m.(*reference.Strict)
	}
	return nil
}

// nextTime draws the time of the next operation as the checker does; one
// time in six the key's limit changes first, to another of the limits.
func (c *changeChecker) nextTime(rng *rand.Rand, now int64, last engine.Decision) int64 {
	if c.err == nil && rng.IntN(6) == 0 {
		q := c.limits[rng.IntN(len(c.limits)-1)]
		if q == c.p {
			q = c.limits[len(c.limits)-1]
		}
		c.err = c.limit(q)
	}
	return c.checker.nextTime(rng, now, last)
}

func (c *changeChecker) reset() {
	c.checker.reset()
	c.first, c.timed = false, false
}

// drawOp draws the next operation as the checker does, with no cost Step
// would refuse under the key's current limit: a cancel of a reservation
// booked under a higher one names no more than the limit, and a partial
// grant under a limit below one unit, which holds no whole unit, asks for
// no more than the limit.
func (c *changeChecker) drawOp(rng *rand.Rand, costs costMode, now int64) engine.Op {
	op := c.checker.drawOp(rng, costs, now)
	if op.Verb == engine.VerbCancel || op.Verb == engine.VerbAtMost && c.p.Limit < 1 {
		op.Cost = min(op.Cost, c.p.Limit)
	}
	return op
}

// invalid sends an operation Step must reject, as the checker does; one
// that overflows under a penalty is decided, and checked as any other
// decision. Under a penalty, half of them are such overflows: an Allow of
// twice the limit.
func (c *changeChecker) invalid(rng *rand.Rand, now int64) error {
	if c.err != nil {
		return c.err
	}
	op, want := c.drawInvalid(rng, now)
	if c.p.Penalty > 0 && rng.IntN(2) == 0 {
		op, want = engine.Op{Verb: engine.VerbAllow, Cost: 2 * c.p.Limit, Now: now}, sluice.ErrCostExceedsLimit
	}
	if c.p.Overflows(op, want) {
		_, err := c.apply(op)
		return err
	}
	return c.rejects(op, want)
}

// apply runs op on both sides, compares them, and checks the state Step
// leaves against the Store contract. The state a decision reads is the
// one kept, or the zero State from its expiry on.
func (c *changeChecker) apply(op engine.Op) (engine.Decision, error) {
	if c.err != nil {
		return engine.Decision{}, c.err
	}
	c.ops = append(c.ops, formatOp(op))
	kept := c.state
	expired := c.timed && op.Now >= c.expires
	if expired {
		// Fresh, whatever the limit now; the checks of a reservation and
		// a partial grant read c.state so.
		c.state = engine.State{}
	}
	before := cloneState(c.state)
	carries := c.p.Carries(&before, &op)
	next, got, err := c.p.Step(cloneState(before), op)
	if err != nil && !c.p.Overflows(op, err) {
		return got, c.fail("Step: %v", err)
	}
	if err := exhaustRules(c.p, op, next, got); err != nil {
		return got, c.fail("%v\nstate before %+v", err, before)
	}
	if settles(op.Verb) {
		// A settlement reads a TAT of another interval converted at now,
		// as a grant of nothing converts it (and records nothing else):
		// its rules compare the key it leaves with the key as it read it,
		// the same at every later instant, where the TAT kept would be
		// converted at each instant, a nanosecond apart.
		settled := before
		if carries {
			if settled, _, err = c.p.Step(cloneState(before), engine.Op{Verb: engine.VerbAtMost, Now: op.Now}); err != nil {
				return got, c.fail("%v", err)
			}
		}
		if err := settleRules(c.p, op, settled, next, got); err != nil {
			return got, c.fail("%v\nstate before %+v", err, before)
		}
	}
	var (
		want    reference.Decision
		lenient bool
	)
	if c.strict != nil {
		d := c.strict.Decide(op)
		want = d.Decision
		lenient, err = reference.CompareStrict(c.p, op, got, d)
	} else {
		if err := c.sameAsAllowCarried(op, next, got, carries); err != nil {
			return got, c.fail("%v", err)
		}
		want = c.model.Apply(op)
		lenient, err = reference.Compare(c.p, op, got, want)
	}
	if err != nil {
		return got, c.fail("%v\ngot  %+v\nwant %+v (Used %v)\nstate before %+v, after %+v", err, got, want, ratString(want.Used), before, next)
	}
	follow := c.tally(op, got, lenient, want.At)
	if heldBeyondSpan(c.p, before, op.Now) {
		c.beyond++
		if !lenient {
			c.beyondExact++
		}
	}
	if c.first {
		c.first = false
		if lenient {
			c.firstLenient++
		} else {
			c.firstExact++
		}
	}
	if expired && !isZero(kept) {
		c.expired++
		if _, read, _ := c.p.Step(cloneState(kept), op); read != got {
			c.forgotten++
		}
	}
	if op.Verb == engine.VerbCheck && c.p.Kind == engine.KindGCRA && before.A != 0 && before.A != float64(c.p.Interval) && before.Time > op.Now {
		c.checkConverted++
	}
	rec := recorded(op.Verb, got)
	if c.strict != nil {
		rec = c.p.Records(op.Verb, &got)
	}
	switch {
	case rec || carries:
		if err := c.transition(before, next, op, got, rec, carries); err != nil {
			return got, c.fail("%v\ndecision %+v\nstate before %+v, after %+v", err, got, before, next)
		}
		c.state, c.expires, c.timed = next, op.Now+int64(got.ResetAfter), true
	case !reflect.DeepEqual(next, before):
		return got, c.fail("a %v that records nothing (%+v) and carries nothing over changed the state from %+v to %+v", op.Verb, got, before, next)
	default:
		c.state = kept // with its expiry
	}
	if follow {
		c.model.Load(c.state)
		if c.timed {
			reference.LoadExpiry(c.model, c.expires)
		}
	} else if at, ok := reference.Expiry(c.model); ok != c.timed || ok && at != c.expires {
		if !c.timed {
			return got, c.fail("the model keeps an expiry at %d, the store none", at)
		}
		if !ok {
			return got, c.fail("the store keeps an expiry at %d, the model none", c.expires)
		}
		c.expiryFollowed++
		reference.LoadExpiry(c.model, c.expires)
	}
	return got, nil
}

// sameAsAllowCarried checks a reservation or a partial grant against
// Allow and Check from the same state, as sameAsAllow does, from the state
// as the decision reads it: a GCRA state carried over (carries) is
// converted by the decision, and a refused reservation leaves it so.
func (c *changeChecker) sameAsAllowCarried(op engine.Op, next engine.State, got engine.Decision, carries bool) error {
	if !carries {
		return c.sameAsAllow(op, next, got)
	}
	kept := c.state
	defer func() { c.state = kept }()
	// A grant of nothing converts the TAT as the decision does, records
	// nothing else, and Step returns it so (a check would convert it for
	// its decision alone).
	converted, _, err := c.p.Step(cloneState(kept), engine.Op{Verb: engine.VerbAtMost, Now: op.Now})
	if err != nil {
		return err
	}
	c.state = converted
	return c.sameAsAllow(op, next, got)
}

// transition checks the state next that a decision d on op, which
// records (rec) or carries a GCRA state over (carries), left in place of
// before. One that only carries it over changes nothing but the TAT, to
// now or later, and the interval it records, to the key's. A recorded
// one is checked as the property tests check it, except that a state
// read under another limit may move back in time: a GCRA TAT carried
// over to a shorter interval, or a window's start, counted under another
// length, counted in the longer window that holds it.
func (c *changeChecker) transition(before, next engine.State, op engine.Op, d engine.Decision, rec, carries bool) error {
	if carries {
		c.carried++
	}
	if !rec {
		c.carriedAlone++
		converted := before
		converted.Time, converted.A = next.Time, float64(c.p.Interval)
		if !reflect.DeepEqual(next, converted) || next.Time < op.Now {
			return fmt.Errorf("a %v that records nothing but carries the TAT over left %+v", op.Verb, next)
		}
		return nil
	}
	from := before
	realigned := (c.p.Kind == engine.KindFixedWindow && !c.p.Anchored || c.p.Kind == engine.KindSlidingCounter) && before.Time%c.p.Interval != 0
	if carries || realigned {
		from = engine.State{} // no time to compare with
	}
	if c.strict != nil {
		return checkStrictTransition(from, next, op, d)
	}
	return checkTransition(from, next, op, d)
}

// TestLeaseStepMatchesReferenceAcrossChangedLimits replays the lease
// proofs' random traces (lease_proof_test.go) of each concurrency limit
// whose limit, time to live and number of entries change at random
// instants among its variants, against the changed model: the leases held
// and the line read as they stand, and the key fresh from its expiry on,
// as the change proofs' checker keeps it (which forgets nothing of a
// concurrency limit: its leases and line are gone by then under any
// limit, and its tickets start over). Beside the model, each trace keeps
// the holders' book of leases and waiters, as the lease proofs do, and
// checks the bound across a change: an acquisition is admitted only if
// the leases live then, carried over from another limit or not, hold no
// more than the current limit with it, in no more than its MaxEntries
// leases.
func TestLeaseStepMatchesReferenceAcrossChangedLimits(t *testing.T) {
	for ai, alg := range leaseAlgorithms(t) {
		t.Run(alg.name, func(t *testing.T) {
			t.Parallel()
			limits := storetest.Variants(alg.params)
			require.Greater(t, len(limits), 2, "limits to change to")
			traces := traceCount(60)
			var total leaseChangeStats
			failures := 0
			for trace := range traces {
				stats, err := leaseChangeTrace(limits, uint64(ai)<<32|uint64(trace))
				total.add(stats)
				if err != nil {
					t.Error(err)
					if failures++; failures == 3 {
						t.FailNow()
					}
				}
			}
			t.Logf("%d traces: %v", traces, total)
			require.Greater(t, total.changes, traces, "limits changed")
			require.Greater(t, total.firstExact, 100, "first decisions under a new limit decided exactly")
			require.Greater(t, total.overLimit, 10, "decisions with more held than the limit, carried over")
			require.Greater(t, total.expired, 100, "decisions at or after the key's expiry")
			for _, v := range leaseVerbs {
				require.Greater(t, total.exact[v], 100, "%v decided exactly", v)
			}
		})
	}
}

// leaseChangeStats counts what a lease change trace decided.
type leaseChangeStats struct {
	leaseStats
	// Limit changes; the first decisions after one compared exactly;
	// decisions made while the leases held more than the limit, carried
	// over from a higher one; and decisions at or after the key's expiry,
	// on a state it kept.
	changes, firstExact, overLimit, expired int
}

func (s *leaseChangeStats) add(o leaseChangeStats) {
	s.leaseStats.add(o.leaseStats)
	s.changes += o.changes
	s.firstExact += o.firstExact
	s.overLimit += o.overLimit
	s.expired += o.expired
}

func (s leaseChangeStats) String() string {
	return fmt.Sprintf("%v; %d limit changes, %d first decisions after one exact, %d decisions with more than the limit held, %d at or after the key's expiry",
		s.leaseStats, s.changes, s.firstExact, s.overLimit, s.expired)
}

// leaseChangeTrace replays the lease trace of seed, whose limit changes
// among limits, against Params.Step and the changed model.
func leaseChangeTrace(limits []engine.Params, seed uint64) (leaseChangeStats, error) {
	rng := rand.New(rand.NewPCG(seed, 0xc4a9e1ea5e))
	p := limits[rng.IntN(len(limits))]
	lc, err := newLeaseChecker(p, fmt.Sprintf("lease change seed %d", seed))
	if err != nil {
		return leaseChangeStats{}, err
	}
	lc.model = reference.Expiring(lc.model)
	c := &leaseChangeChecker{leaseChecker: lc, limits: limits}
	for _, q := range limits {
		c.book.maxEntries = max(c.book.maxEntries, q.MaxEntries)
	}
	// The book's bound on what is held is the changing limit's, checked
	// here: a lower limit leaves the leases of a higher one held.
	c.book.limit = math.Inf(1)
	costs := costMode(rng.IntN(int(numCostModes)))
	now := startTime(rng, p)
	var last engine.Decision
	for range 200 + rng.IntN(600) {
		if rng.IntN(8) == 0 {
			if err := c.change(rng); err != nil {
				return c.results(), err
			}
		}
		now = c.nextTime(rng, now, last)
		switch r := rng.IntN(100); {
		case r < 2:
			c.reset()
			c.timed = false
			continue
		case r < 4:
			op, want := c.drawInvalid(rng, now)
			if err := c.rejects(op, want); err != nil {
				return c.results(), err
			}
			continue
		}
		op := c.drawOp(rng, costs, now)
		op.Cost = min(op.Cost, c.p.Limit) // a release's or an extension's, drawn under a higher limit
		if last, err = c.apply(op); err != nil {
			return c.results(), err
		}
	}
	return c.results(), nil
}

// leaseChangeChecker replays a lease trace whose limit changes, keeping
// the key's expiry as the change proofs' checker does.
type leaseChangeChecker struct {
	*leaseChecker
	limits  []engine.Params
	first   bool
	expires int64
	timed   bool
	leaseChangeStats
}

func (c *leaseChangeChecker) results() leaseChangeStats {
	s := c.leaseChangeStats
	s.leaseStats = c.stats
	return s
}

// change changes the key's limit to another of the limits.
func (c *leaseChangeChecker) change(rng *rand.Rand) error {
	q := c.limits[rng.IntN(len(c.limits)-1)]
	if q == c.p {
		q = c.limits[len(c.limits)-1]
	}
	m, err := reference.Change(c.model, q)
	if err != nil {
		return c.fail("the model of %#v: %v", q, err)
	}
	c.ops = append(c.ops, fmt.Sprintf("limit %#v", q))
	c.p, c.model, c.first = q, m, true
	c.changes++
	return nil
}

// apply runs op on Step and the model and compares them, as the lease
// proofs do; checks the state Step leaves against the largest of the
// limits (a lower one keeps what a higher one let the key hold) and, after
// an acquisition, against the current one; and keeps the book.
func (c *leaseChangeChecker) apply(op engine.Op) (engine.Decision, error) {
	c.ops = append(c.ops, formatLeaseOp(op))
	before := cloneState(c.state)
	if c.timed && op.Now >= c.expires {
		// Fresh, whatever the limit now: a concurrency limit's state
		// holds nothing then anyway, tickets included.
		before = engine.State{}
		if !isZero(c.state) {
			c.expired++
		}
	}
	next, got, err := c.p.Step(cloneState(before), op)
	if err != nil {
		return got, c.fail("Step: %v", err)
	}
	want := c.model.Apply(op)
	lenient, err := reference.Compare(c.p, op, got, want)
	if err != nil {
		return got, c.fail("%v\ngot  %+v\nwant %+v\nstate %+v", err, got, want, before)
	}
	if lenient {
		c.stats.lenient[op.Verb]++
	} else {
		c.stats.exact[op.Verb]++
		if c.first {
			c.firstExact++
		}
	}
	c.first = false
	if held, _ := c.book.held(op.Now); held > c.p.Limit {
		c.overLimit++
	}
	rec := leaseRecorded(op.Verb, got)
	if rec != c.p.Records(op.Verb, &got) {
		return got, c.fail("the reference records %v of %+v, Params.Records %v", rec, got, !rec)
	}
	if !rec {
		if !reflect.DeepEqual(next, before) {
			return got, c.fail("a %v that records nothing (%+v) changed the state from %+v to %+v", op.Verb, got, before, next)
		}
	} else {
		if err := c.checkChangedState(before, next, op, got); err != nil {
			return got, c.fail("%v", err)
		}
		c.state, c.expires, c.timed = next, op.Now+int64(got.ResetAfter), true
	}
	if lenient { // the model follows the state kept, and its expiry
		c.model.Load(c.state)
		if c.timed {
			reference.LoadExpiry(c.model, c.expires)
		}
	} else if at, ok := reference.Expiry(c.model); ok != c.timed || ok && at != c.expires {
		return got, c.fail("the model keeps the expiry %d (%v), the store %d (%v)", at, ok, c.expires, c.timed)
	}
	c.stats.count(c.p, op, before, got)
	if err := c.book.keep(op, got, rec); err != nil {
		return got, c.fail("%v", err)
	}
	held, n := c.book.held(op.Now)
	if got.Used < min(held, c.p.Limit)-boundSlack*c.p.Limit {
		return got, c.fail("Used = %v, but the holders hold %v of a limit of %v", got.Used, held, c.p.Limit)
	}
	switch {
	case !takesLease(op, got) || op.Verb != engine.VerbAllow:
	case held > c.p.Limit*(1+boundSlack):
		return got, c.fail("an acquisition admitted with %v held, more than the limit %v", held, c.p.Limit)
	case n > c.p.MaxEntries:
		return got, c.fail("an acquisition admitted with %d leases held, more than MaxEntries %d", n, c.p.MaxEntries)
	}
	switch {
	case takesLease(op, got):
		c.seen = appendRecent(c.seen, got.At)
	case waitsInLine(op, got) && !slices.Contains(c.tickets, got.At):
		c.tickets = appendRecent(c.tickets, got.At)
	}
	c.stats.most(c.p, min(held, c.p.Limit), n)
	return got, nil
}

// checkChangedState checks a recorded decision's state as the lease
// proofs do, against the largest of the limits: what the key holds may
// be what a higher limit let it take.
func (c *leaseChangeChecker) checkChangedState(before, next engine.State, op engine.Op, d engine.Decision) error {
	p := c.p
	defer func() { c.p = p }()
	for _, q := range c.limits {
		c.p.Limit, c.p.MaxEntries = max(c.p.Limit, q.Limit), max(c.p.MaxEntries, q.MaxEntries)
	}
	return c.checkLeaseState(before, next, op, d)
}
