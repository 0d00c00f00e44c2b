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
// identities unique while the key lives; a line of waiters, each in line
// until its deadline, served in the order of their tickets), and compare
// every decision with reference.Compare: Allowed identical unless the
// exact sum lies within reference.Band (1e-12 of the limit) above it (an
// exact fit is compared too: the float code's slack exists so that
// rounding never denies one), identities and tickets (Decision.At),
// RetryAfter and ResetAfter identical to the nanosecond, Used within
// 1e-12 of the limit. The traces mix acquisitions of random costs (zero,
// the whole limit, units, integers, eighths, cents, and a hair of 1e-11 to
// 1e-6 of the limit above or below the room left), most of them with a
// patience (Op.MaxDelay) and the ticket of a waiter, none, or a stale or
// made-up one; checks with or without a ticket; leavings of the line
// (VerbLeave) of waiting, stale and made-up tickets; releases and
// extensions of live, released, extended, expired, reset and made-up
// identities, with any cost; at clock gaps from none to several times the
// time to live, on the very nanosecond a lease expires or a waiter's
// deadline passes and the one before, at the instant a denial said to
// retry, and with a clock that steps back.
//
// Beside the model, each trace keeps the book of its holders and waiters
// (leaseBook) and checks the guarantee as they see it. A lease's identity
// and a waiter's ticket are both a Decision.At: the book and the trace keep
// them apart (identities of admitted acquisitions and extensions, tickets
// of denied acquisitions that wait), so that releases and extensions name
// identities, waits and leavings name tickets, and a ticket is never
// counted as a lease held.

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
		algs = append(algs, testAlgorithm{name: c.name, params: fixedParams(t, lim)})
		require.NoError(t, lim.Close())
	}
	return algs
}

// maxLeaseAt is the latest identity a release or an extension may name,
// 2^62 + 2^61 ns: far beyond the latest time plus the longest time to
// live, which each lease taken at one instant pushes a nanosecond on.
const maxLeaseAt = maxTime + 1<<61

// leaseVerbs are the verbs the concurrency limit runs.
var leaseVerbs = []engine.Verb{engine.VerbAllow, engine.VerbCheck, engine.VerbCancel, engine.VerbExtend, engine.VerbLeave}

// maxTicket is the latest ticket a concurrency limit's line hands out,
// and the largest an op may name: 2^53, the integers a float64 holds.
const maxTicket = 1 << 53

// maxPatience is the longest patience (Op.MaxDelay) an acquisition may
// carry: 2^60 ns.
const maxPatience = 1 << 60

// TestLeaseStepMatchesReference replays long random traces of each
// concurrency limit against Params.Step and the reference model, and
// checks the holders' bound at every instant of each, and the line's
// order as its waiters see it.
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
			require.Positive(t, total.ticketsSpent, "places denied, the tickets spent")
		})
	}
}

// leaseStepTrace replays the random trace of seed against p.Step and the
// reference model: 200 to 800 operations, with now and then a reset or an
// operation Step must reject. One trace in four starts at the last
// tickets, with a waiter holding 2^53 - 1 or 2^53 (the latest handed out).
func leaseStepTrace(p engine.Params, seed uint64) (leaseStats, error) {
	rng := rand.New(rand.NewPCG(seed, 0x1ea5e))
	c, err := newLeaseChecker(p, fmt.Sprintf("lease seed %d", seed))
	if err != nil {
		return leaseStats{}, err
	}
	costs := costMode(rng.IntN(int(numCostModes)))
	now := startTime(rng, p)
	if rng.IntN(4) == 0 {
		c.startAtLastTickets(rng, now)
	}
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
// to the store with Store.Apply, as are the line's ops: acquisitions and
// checks with a ticket or a patience, and leavings, the tries an Acquire
// makes), at a simulated clock that also steps back, and requires each
// decision to be Step's on a shadow state, which the reference model and
// the holders' book judge as in TestLeaseStepMatchesReference. A Lease
// that holds nothing (denied, released or refused already, or of a cost
// of zero) refuses a release or an extension with ErrNotHeld without
// asking the store.
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
				require.Equal(t, p, fixedParams(t, lim), "the constructor rebuilds the same Params")
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
					case inLine(op):
						// A wait, a check with a ticket or a leaving,
						// straight to the store, as an Acquire sends them.
						got, err := store.Apply(ctx, "k", &p, op)
						require.NoError(t, err)
						last = c.mirror(t, op, got)
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
// and keeps the holders' book of the leases and the waiters.
type leaseChecker struct {
	p     engine.Params
	model reference.Model
	state engine.State
	where string
	ops   []string
	book  leaseBook
	// seen holds the latest identities of leases the trace handed out
	// (admitted acquisitions and extensions), resets and all, from which
	// releases and extensions draw.
	seen []int64
	// tickets holds the latest tickets the trace handed out (denied
	// acquisitions that wait: joining the line, or keeping their place),
	// each once, resets and all, from which stale tickets are drawn.
	tickets []int64
	stats   leaseStats
}

func newLeaseChecker(p engine.Params, where string) (*leaseChecker, error) {
	m, err := reference.New(p)
	if err != nil {
		return nil, err
	}
	return &leaseChecker{p: p, model: m, where: where, book: newLeaseBook(p)}, nil
}

// startAtLastTickets gives the key, fresh, a line of one waiter at now,
// holding ticket 2^53 (mostly) or 2^53 - 1, the latest handed out, until
// up to eight times to live later: the line hands out at most one more
// ticket before the key is fresh again.
func (c *leaseChecker) startAtLastTickets(rng *rand.Rand, now int64) {
	ticket := int64(maxTicket - rng.IntN(2)*rng.IntN(2))
	deadline := now + 1 + rng.Int64N(8*c.p.Interval)
	c.state = engine.State{A: float64(ticket), Log: []engine.Entry{{Time: deadline, Cost: -float64(ticket)}}}
	c.model.Load(c.state)
	c.book.tickets[ticket] = &bookWaiter{deadline: deadline}
	c.tickets = append(c.tickets, ticket)
	c.ops = append(c.ops, fmt.Sprintf("from %+v", c.state))
}

// reset forgets the key, as a store's Reset does: its leases and its line
// with it.
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
	rec := leaseRecorded(op.Verb, got)
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
	switch {
	case takesLease(op, got):
		c.seen = appendRecent(c.seen, got.At)
	case waitsInLine(op, got) && !slices.Contains(c.tickets, got.At):
		c.tickets = appendRecent(c.tickets, got.At)
	}
	held, n := c.book.held(op.Now)
	c.stats.most(c.p, held, n)
	return got, nil
}

// appendRecent appends x to the latest values xs keeps, 64 at most.
func appendRecent(xs []int64, x int64) []int64 {
	xs = append(xs, x)
	if len(xs) > 64 {
		xs = slices.Delete(xs, 0, 16)
	}
	return xs
}

// leaseRecorded reports whether the Store contract says decision d on an
// op of verb of a concurrency limit changed the key's state: as recorded
// does, and also for a denied acquisition that waits in the line, whose
// Decision.At is its ticket.
func leaseRecorded(verb engine.Verb, d engine.Decision) bool {
	return reference.Records(verb, reference.Decision{Allowed: d.Allowed, At: d.At})
}

// takesLease reports whether decision d on op handed out a lease's
// identity in d.At: an admitted acquisition or an extension.
func takesLease(op engine.Op, d engine.Decision) bool {
	return d.Allowed && d.At != 0 && (op.Verb == engine.VerbAllow || op.Verb == engine.VerbExtend)
}

// waitsInLine reports whether decision d on op handed out a ticket in
// d.At, a new one or the one op named: a denied acquisition with a
// patience that joined the line or kept its place in it.
func waitsInLine(op engine.Op, d engine.Decision) bool {
	return op.Verb == engine.VerbAllow && !d.Allowed && d.At != 0
}

// inLine reports whether op is one of the line's: an acquisition with a
// ticket or a patience, a check with a ticket, or a leaving.
func inLine(op engine.Op) bool {
	switch op.Verb {
	case engine.VerbAllow, engine.VerbCheck:
		return op.At != 0 || op.MaxDelay != 0
	}
	return op.Verb == engine.VerbLeave
}

// checkLeaseState checks the state a recorded decision d on op left: the
// zero State iff the key is fresh (ResetAfter zero); otherwise the leases
// first, in strictly increasing order of expiry, no more than MaxEntries
// of them, each of a cost above zero, holding no more than the limit (plus
// the float slack) together, none later than the latest identity handed
// out (State.Time), which never goes back; then the line, each waiter an
// entry of its deadline and minus its ticket, in strictly increasing order
// of ticket, no more than MaxEntries of them, each ticket a whole number
// from 1 to the latest ticket handed out (State.A, a whole number no
// larger than 2^53, which goes back only when the key was fresh at now:
// tickets start over); nothing in B and Until; ResetAfter reaching the
// latest identity or the latest deadline, whichever is later; and, after
// a decision that took, released or extended a lease, or that joined,
// kept its place in or left the line, only leases and waiters live at
// now.
func (c *leaseChecker) checkLeaseState(before, next engine.State, op engine.Op, d engine.Decision) error {
	if isZero(next) != (d.ResetAfter == 0) {
		return fmt.Errorf("ResetAfter is %v with state %+v: the zero State iff fresh", d.ResetAfter, next)
	}
	if isZero(next) {
		return nil
	}
	leases, line := splitLeaseLog(next.Log)
	changed := d.At != 0 || op.Verb == engine.VerbCancel || op.Verb == engine.VerbLeave
	sum := 0.0
	for i, e := range leases {
		switch {
		case i > 0 && e.Time <= leases[i-1].Time:
			return fmt.Errorf("leases out of order of expiry: %+v", next.Log)
		case !(e.Cost > 0):
			return fmt.Errorf("a lease of cost %v: %+v", e.Cost, next.Log)
		case e.Time > next.Time:
			return fmt.Errorf("a lease expires at %d, after the latest identity %d", e.Time, next.Time)
		case e.Time <= op.Now && changed:
			return fmt.Errorf("a lease expired at %d kept by a %v at %d: %+v", e.Time, op.Verb, op.Now, next.Log)
		}
		sum += e.Cost
	}
	end := next.Time // when the key is fresh
	for i, w := range line {
		ticket := -w.Cost
		switch {
		case i > 0 && ticket <= -line[i-1].Cost:
			return fmt.Errorf("waiters out of order of ticket: %+v", next.Log)
		case ticket < 1 || ticket > next.A || ticket != math.Trunc(ticket):
			return fmt.Errorf("a waiter of ticket %v, the latest handed out being %v: %+v", ticket, next.A, next.Log)
		case w.Time <= op.Now && changed:
			return fmt.Errorf("a waiter gone at %d kept by a %v at %d: %+v", w.Time, op.Verb, op.Now, next.Log)
		}
		end = max(end, w.Time)
	}
	switch {
	case next.B != 0 || next.Until != 0:
		return fmt.Errorf("a concurrency limit keeps only leases, a line, a time and a ticket: %+v", next)
	case next.A < 0 || next.A > maxTicket || next.A != math.Trunc(next.A):
		return fmt.Errorf("the latest ticket handed out is %v: %+v", next.A, next)
	case next.A < before.A && !freshAt(before, op.Now):
		return fmt.Errorf("the latest ticket went back from %v to %v, the key not fresh at %d: %+v", before.A, next.A, op.Now, before)
	case len(leases) > c.p.MaxEntries:
		return fmt.Errorf("%d leases kept, more than MaxEntries %d", len(leases), c.p.MaxEntries)
	case len(line) > c.p.MaxEntries:
		return fmt.Errorf("%d waiters kept, more than MaxEntries %d", len(line), c.p.MaxEntries)
	case sum > c.p.Limit*(1+boundSlack):
		return fmt.Errorf("leases of %v kept, more than the limit %v", sum, c.p.Limit)
	case next.Time < before.Time:
		return fmt.Errorf("the latest identity went back from %d to %d", before.Time, next.Time)
	case int64(d.ResetAfter) != end-op.Now:
		return fmt.Errorf("ResetAfter = %v, but the latest identity %d or deadline %d is %v from now", d.ResetAfter, next.Time, end, time.Duration(end-op.Now))
	}
	return nil
}

// splitLeaseLog splits a concurrency limit's log into its leases and its
// line: the entries after the last of a cost of zero or more.
func splitLeaseLog(log []engine.Entry) (leases, line []engine.Entry) {
	i := len(log)
	for i > 0 && log[i-1].Cost < 0 {
		i--
	}
	return log[:i], log[i:]
}

// freshAt reports whether a concurrency limit's key in state s is fresh
// at now: its latest identity past and no waiter in line.
func freshAt(s engine.State, now int64) bool {
	_, line := splitLeaseLog(s.Log)
	return s.Time <= now && !slices.ContainsFunc(line, func(w engine.Entry) bool { return w.Time > now })
}

// rejects requires Step to reject op with want, leaving the state as it
// was.
func (c *leaseChecker) rejects(op engine.Op, want error) error {
	c.ops = append(c.ops, "invalid "+formatLeaseOp(op))
	return stepRejects(c.p, c.state, op, want, c.fail)
}

// drawInvalid draws an operation Step must reject for a concurrency
// limit, and the error it gives: the verbs it does not run (a lease is
// taken whole and now), costs out of range (a release's, an extension's
// and a leaving's too, though they play no part), identities, tickets,
// patiences and times out of range.
func (c *leaseChecker) drawInvalid(rng *rand.Rand, now int64) (engine.Op, error) {
	limit := c.p.Limit
	ops := []struct {
		op   engine.Op
		want error
	}{
		{engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: now, MaxDelay: 1}, sluice.ErrUnsupported},
		{engine.Op{Verb: engine.VerbFill, Cost: 1, Now: now}, sluice.ErrUnsupported},
		{engine.Op{Verb: engine.VerbAtMost, Cost: limit, Now: now}, sluice.ErrUnsupported},
		{engine.Op{Verb: engine.VerbExhaust, Cost: 1, Now: now}, sluice.ErrUnsupported},
		{engine.Op{Verb: engine.VerbRefund + 1, Cost: 1, Now: now}, sluice.ErrUnsupported},
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
		{engine.Op{Verb: engine.VerbAllow, Cost: 0, Now: now, At: maxTicket + 1, MaxDelay: 1}, sluice.ErrInvalidConfig},
		{engine.Op{Verb: engine.VerbCheck, Cost: 0, Now: now, At: -1}, sluice.ErrInvalidConfig},
		{engine.Op{Verb: engine.VerbLeave, Now: now, At: maxTicket + 1 + rng.Int64N(1<<60)}, sluice.ErrInvalidConfig},
		{engine.Op{Verb: engine.VerbLeave, Now: now, At: -1 - rng.Int64N(maxTicket)}, sluice.ErrInvalidConfig},
		{engine.Op{Verb: engine.VerbAllow, Cost: 0, Now: now, MaxDelay: -1}, sluice.ErrInvalidDelay},
		{engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now, At: 1, MaxDelay: maxPatience + 1}, sluice.ErrInvalidDelay},
		{engine.Op{Verb: engine.VerbAllow, Cost: limit, Now: now, At: -1, MaxDelay: -1}, sluice.ErrInvalidDelay},
		{engine.Op{Verb: engine.VerbAllow, Cost: limit * 2, Now: now, At: maxTicket + 1}, sluice.ErrInvalidConfig},
		{engine.Op{Verb: engine.VerbLeave, Cost: -1, Now: now, At: 1}, sluice.ErrInvalidCost},
		{engine.Op{Verb: engine.VerbLeave, Cost: limit * 2, Now: now, At: 1}, sluice.ErrCostExceedsLimit},
		{engine.Op{Verb: engine.VerbLeave, Cost: 0, Now: -1, At: 1}, sluice.ErrTimeOutOfRange},
	}
	o := ops[rng.IntN(len(ops))]
	return o.op, o.want
}

// drawOp draws the trace's next operation at now, in about the
// proportions of the line model's own traces: acquisitions (a quarter of
// them plain, no ticket and no patience; the rest with a patience and a
// waiter's ticket, none, or a stale or made-up one), checks (with a
// waiter's ticket, another or none, sometimes with a patience, which a
// check ignores), leavings of a waiter's ticket or another, releases and
// extensions of any identity, with any cost; one acquisition or check in
// eight of a hair more or less than the room the key has left.
func (c *leaseChecker) drawOp(rng *rand.Rand, costs costMode, now int64) engine.Op {
	op := engine.Op{Verb: engine.VerbAllow, Now: now}
	switch r := rng.IntN(100); {
	case r < 42:
		switch q := rng.IntN(56); {
		case q < 14: // plain: it does not wait
		case q < 40: // a waiter asks again, with its ticket (if any)
			op.At, op.MaxDelay = c.waiterTicket(rng, now), c.drawPatience(rng)
		case q < 50: // without one
			op.MaxDelay = c.drawPatience(rng)
		default: // with a stale or made-up one
			op.At, op.MaxDelay = c.drawTicket(rng), c.drawPatience(rng)
		}
	case r < 52:
		op.Verb = engine.VerbCheck
		switch q := rng.IntN(3); {
		case q == 0:
		case q == 1:
			op.At = c.waiterTicket(rng, now)
		default:
			op.At = c.drawTicket(rng)
		}
		if rng.IntN(4) == 0 {
			op.MaxDelay = c.drawPatience(rng) // no patience for a check
		}
	case r < 60:
		op.Verb = engine.VerbLeave
		if rng.IntN(3) > 0 {
			op.At = c.waiterTicket(rng, now)
		} else {
			op.At = c.drawTicket(rng)
		}
	case r < 82:
		op.Verb, op.At = engine.VerbCancel, c.drawIdentity(rng, now)
	default:
		op.Verb, op.At = engine.VerbExtend, c.drawIdentity(rng, now)
	}
	op.Cost = drawCost(rng, c.p, costs, op.Verb)
	if (op.Verb == engine.VerbAllow || op.Verb == engine.VerbCheck) && rng.IntN(8) == 0 {
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
	leases, _ := splitLeaseLog(c.state.Log)
	for _, e := range leases {
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

// waiterTicket draws the ticket of a waiter that asks again, checks or
// leaves: mostly one the book has waiting at now, else one it has
// waiting or gone by its deadline (neither served nor left, as its
// caller knows), or none (zero) if there is none such, or once in three.
func (c *leaseChecker) waiterTicket(rng *rand.Rand, now int64) int64 {
	if rng.IntN(3) == 0 {
		return 0
	}
	ts := c.book.waiting(now)
	if len(ts) == 0 || rng.IntN(4) == 0 {
		ts = c.book.unserved()
	}
	if len(ts) == 0 {
		return 0
	}
	return ts[rng.IntN(len(ts))]
}

// drawTicket draws a ticket no waiter need hold: one the trace handed out
// (its waiter served, left, gone or still in line), one off by one, the
// next to be handed out or beyond, zero, or any up to 2^53.
func (c *leaseChecker) drawTicket(rng *rand.Rand) int64 {
	switch r := rng.IntN(10); {
	case r < 5 && len(c.tickets) > 0:
		return c.tickets[rng.IntN(len(c.tickets))]
	case r < 6 && len(c.tickets) > 0:
		return min(max(c.tickets[rng.IntN(len(c.tickets))]+1-2*rng.Int64N(2), 0), maxTicket)
	case r < 8:
		return min(int64(c.state.A)+1+rng.Int64N(3), maxTicket)
	case r < 9:
		return 0
	}
	return 1 + rng.Int64N(maxTicket)
}

// drawPatience draws an acquisition's patience: none, a nanosecond, up to
// a microsecond, up to a time to live, or up to four; once in a while the
// longest there is, 2^60 ns.
func (c *leaseChecker) drawPatience(rng *rand.Rand) int64 {
	ttl := c.p.Interval
	switch r := rng.IntN(100); {
	case r < 10:
		return 0
	case r < 20:
		return 1
	case r < 32:
		return 1 + rng.Int64N(1000)
	case r < 65:
		return 1 + rng.Int64N(ttl)
	case r < 99:
		return 1 + rng.Int64N(4*ttl)
	}
	return maxPatience
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
// expiry or a waiter's deadline or the nanosecond before, at the instant
// the last denial said to retry or the one before, at the latest
// identity or deadline (when the key turns fresh) or around it, several
// times to live later, a long idle, or a clock that steps back by up to
// a time to live.
func (c *leaseChecker) nextTime(rng *rand.Rand, now int64, last engine.Decision) int64 {
	ttl := c.p.Interval
	_, line := splitLeaseLog(c.state.Log)
	next := now
	switch r := rng.IntN(100); {
	case r < 15:
	case r < 25:
		next = now + 1 + rng.Int64N(1000)
	case r < 40:
		next = now + rng.Int64N(ttl)
	case r < 50:
		if held := c.book.live(now); len(held) > 0 {
			next = held[rng.IntN(len(held))] - rng.Int64N(2)
		}
	case r < 57:
		if len(line) > 0 {
			next = line[rng.IntN(len(line))].Time - rng.Int64N(2)
		}
	case r < 65:
		if last.RetryAfter > 0 {
			next = now + int64(last.RetryAfter) - rng.Int64N(2)
		}
	case r < 69:
		end := c.state.Time
		for _, w := range line {
			end = max(end, w.Time)
		}
		if end > 0 {
			next = end + rng.Int64N(3) - 1
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
	if op.At != 0 || op.MaxDelay != 0 {
		return fmt.Sprintf("{Verb: %v, Cost: %v, Now: %d, At: %d, MaxDelay: %d}", op.Verb, op.Cost, op.Now, op.At, op.MaxDelay)
	}
	return fmt.Sprintf("{Verb: %v, Cost: %v, Now: %d}", op.Verb, op.Cost, op.Now)
}

// leaseStats counts what lease traces decided: the decisions compared
// exactly and those too close to the limit to compare (lenient), per
// verb; leases taken, and those whose identity had to move past the
// latest one (taken at an instant that already handed one out); denials
// for want of room in the limit, for want of an entry, and for waiters
// ahead while the cost fitted; releases and extensions made and refused;
// the most the holders held at once; and the line: waiters joining it,
// keeping their place, finding it full, served from it, leaving it and
// leavings of no waiter, acquisitions and checks naming a ticket that
// holds no place (stale or made up), checks as a waiter, and the most
// waiters at once.
type leaseStats struct {
	exact, lenient            [engine.VerbLeave + 1]int
	taken, bumped             int
	deniedCost, deniedEntries int
	deniedAhead               int
	released, unreleased      int
	extended, unextended      int
	mostHeld                  float64 // of the limit
	mostLeases                int
	heldFull, heldAllEntries  int
	joined, kept, lineFull    int
	ticketsSpent              int
	served, left, notInLine   int
	staleTicket, checksInLine int
	mostWaiters               int
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
	s.deniedAhead += o.deniedAhead
	s.released += o.released
	s.unreleased += o.unreleased
	s.extended += o.extended
	s.unextended += o.unextended
	s.mostHeld = max(s.mostHeld, o.mostHeld)
	s.mostLeases = max(s.mostLeases, o.mostLeases)
	s.heldFull += o.heldFull
	s.heldAllEntries += o.heldAllEntries
	s.joined += o.joined
	s.kept += o.kept
	s.lineFull += o.lineFull
	s.ticketsSpent += o.ticketsSpent
	s.served += o.served
	s.left += o.left
	s.notInLine += o.notInLine
	s.staleTicket += o.staleTicket
	s.checksInLine += o.checksInLine
	s.mostWaiters = max(s.mostWaiters, o.mostWaiters)
}

// count counts decision d on op, made from state before.
func (s *leaseStats) count(p engine.Params, op engine.Op, before engine.State, d engine.Decision) {
	leases, line := splitLeaseLog(before.Log)
	held := 0.0
	for _, e := range leases {
		if e.Time > op.Now {
			held += e.Cost
		}
	}
	var waiting []int64 // the tickets in line at op.Now
	mine := false       // whether op.At is one of them
	for _, w := range line {
		if w.Time > op.Now {
			waiting = append(waiting, int64(-w.Cost))
			mine = mine || op.At != 0 && int64(-w.Cost) == op.At
		}
	}
	s.mostWaiters = max(s.mostWaiters, len(waiting))
	switch op.Verb {
	case engine.VerbAllow, engine.VerbCheck:
		ahead := 0
		for _, t := range waiting {
			if !mine || t < op.At {
				ahead++
			}
		}
		switch {
		case d.Allowed && d.At != 0:
			s.taken++
			if d.At > op.Now+p.Interval {
				s.bumped++
			}
		case d.Allowed:
		case op.Cost > 0 && liveLeases(before, op.Now) >= p.MaxEntries:
			s.deniedEntries++
		case ahead == 0 || held+op.Cost > p.Limit:
			s.deniedCost++
		default:
			s.deniedAhead++
		}
		if op.At != 0 && !mine {
			s.staleTicket++
		}
		if op.Verb == engine.VerbCheck && mine {
			s.checksInLine++
		}
		switch {
		case op.Verb == engine.VerbAllow && d.Allowed && mine:
			s.served++
		case waitsInLine(op, d) && mine:
			s.kept++
		case waitsInLine(op, d):
			s.joined++
		case op.Verb == engine.VerbAllow && !d.Allowed && op.MaxDelay > 0 && !mine && len(waiting) >= p.MaxEntries:
			s.lineFull++
		case op.Verb == engine.VerbAllow && !d.Allowed && op.MaxDelay > 0 && !mine:
			s.ticketsSpent++
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
	case engine.VerbLeave:
		if d.Allowed {
			s.left++
		} else {
			s.notInLine++
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

// liveLeases is how many leases of s are live at now (its waiters are
// none).
func liveLeases(s engine.State, now int64) int {
	n := 0
	leases, _ := splitLeaseLog(s.Log)
	for _, e := range leases {
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
	fmt.Fprintf(&b, "%d leases taken (%d past the latest identity), %d denied for the limit, %d for an entry, %d for waiters ahead; "+
		"%d released, %d not held; %d extended, %d not held; held at most %.4g of the limit, %d leases; "+
		"%d times the whole limit held, %d times every entry; "+
		"%d waiters joined the line, %d kept their place, %d found it full, %d found the tickets spent, %d served from it, "+
		"%d left it, %d leavings of no waiter; %d tickets holding no place, %d checks as a waiter; at most %d waiters",
		s.taken, s.bumped, s.deniedCost, s.deniedEntries, s.deniedAhead, s.released, s.unreleased, s.extended, s.unextended,
		s.mostHeld, s.mostLeases, s.heldFull, s.heldAllEntries,
		s.joined, s.kept, s.lineFull, s.ticketsSpent, s.served, s.left, s.notInLine, s.staleTicket, s.checksInLine, s.mostWaiters)
	return b.String()
}

// requireCoverage requires the traces of p to have decided at least n of
// each verb exactly, and to have pushed the key where its rules matter:
// leases taken past the latest identity, releases and extensions made
// and refused, the whole limit held, denials for want of room in the
// limit (unless one lease is all a key holds), and, where MaxEntries
// binds before the limit does, every entry held and a denial for want of
// one; and the line: waiters joining it, keeping their place, served from
// it and leaving it, leavings of no waiter, denials for waiters ahead
// while the cost fitted, tickets holding no place, checks as a waiter,
// and, where MaxEntries is a few, a line full.
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
		"waiters joining the line":              s.joined,
		"waiters keeping their place":           s.kept,
		"waiters served":                        s.served,
		"leavings":                              s.left,
		"leavings of no waiter":                 s.notInLine,
		"denials for waiters ahead":             s.deniedAhead,
		"tickets holding no place":              s.staleTicket,
		"checks as a waiter":                    s.checksInLine,
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
	if p.MaxEntries <= 3 {
		require.Positive(t, s.lineFull, "places denied, the line full")
	}
}

// leaseBook is what the holders of a key's leases, and its waiters, know,
// kept from the decisions alone: every identity handed out while the key
// lived, with its cost and expiry, and whether its holder gave it up
// (released it, or extended it to a new identity); and, apart, every
// ticket handed out in the key's line, with the deadline of its waiter's
// latest wait, and whether the waiter is gone (served with it, or left
// the line). A lease is held from its grant until it is given up or
// expires, whichever comes first, by the holders' time, the latest clock
// reading seen: it never steps back, so a lease that expired stays
// expired for its holder even if the store's clock steps back. A waiter
// waits, by the same time, from its ticket until it is gone or its
// deadline passes. A ticket is never a lease: it is not held, and no
// release or extension names it. A reset forgets the key, its leases and
// its line.
//
// After every decision, the book checks the guarantee: the leases held
// hold no more than the limit (plus the float slack of boundSlack) and
// number no more than MaxEntries; the store counts every one of them
// (Decision.Used); it releases and extends exactly the identities handed
// out and not given up, never a lease it refuses (each one held is live
// on the store); it never hands out an identity twice while the key
// lives. Between two decisions the leases held only expire, so the most
// held at any instant is the most held right after some decision: the
// check covers every instant of the trace. And of the line (see
// leaseBook.line): no more than MaxEntries waiters wait; no acquisition
// or check is admitted past a waiter that waits ahead of it; a waiter
// that waits and asks again with a patience keeps its ticket; no ticket
// is handed out again while its waiter waits; the store takes out of the
// line exactly the tickets handed out and not gone, never refusing a
// waiter that waits; and the key is not fresh before the deadline of
// every waiter that waits.
type leaseBook struct {
	limit      float64
	maxEntries int
	clock      int64
	issued     map[int64]*bookLease
	tickets    map[int64]*bookWaiter
}

type bookLease struct {
	cost   float64
	expiry int64
	given  bool // released, or extended to another identity
}

type bookWaiter struct {
	deadline int64
	gone     bool // served, or left the line
}

func newLeaseBook(p engine.Params) leaseBook {
	return leaseBook{limit: p.Limit, maxEntries: p.MaxEntries, issued: map[int64]*bookLease{}, tickets: map[int64]*bookWaiter{}}
}

// forget drops the book: the key is forgotten, or fresh, and identities
// and tickets start over.
func (b *leaseBook) forget() {
	clear(b.issued)
	clear(b.tickets)
}

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

// waits reports whether the waiter of ticket waits at now.
func (b *leaseBook) waits(ticket, now int64) bool {
	w := b.tickets[ticket]
	return w != nil && !w.gone && w.deadline > max(b.clock, now)
}

// waiting returns the tickets of the waiters that wait at now, in order.
func (b *leaseBook) waiting(now int64) []int64 {
	var ts []int64
	for t := range b.tickets {
		if b.waits(t, now) {
			ts = append(ts, t)
		}
	}
	slices.Sort(ts)
	return ts
}

// unserved returns the tickets whose waiters are not gone, waiting or
// past their deadline, in order: those their callers still hold.
func (b *leaseBook) unserved() []int64 {
	var ts []int64
	for t, w := range b.tickets {
		if !w.gone {
			ts = append(ts, t)
		}
	}
	slices.Sort(ts)
	return ts
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
	if err := b.line(op, d); err != nil {
		return err
	}
	switch {
	case op.Verb == engine.VerbAllow && d.Allowed && d.At != 0:
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
	if w := b.waiting(op.Now); len(w) > b.maxEntries {
		return fmt.Errorf("%d waiters wait at %d, more than MaxEntries %d: tickets %v", len(w), b.clock, b.maxEntries, w)
	}
	return nil
}

// line books decision d on op for the waiters, and checks the line's
// guarantee as they see it. A waiter that waits by the book (its deadline
// after the holders' time, and now) is in the store's line: only a
// decision at a time the book has seen, and so before its deadline, can
// have written the store's line since its latest wait.
func (b *leaseBook) line(op engine.Op, d engine.Decision) error {
	waiting := b.waiting(op.Now) // as the op found them
	mine := b.waits(op.At, op.Now)
	lineVerb := op.Verb == engine.VerbAllow || op.Verb == engine.VerbCheck || op.Verb == engine.VerbLeave
	for _, t := range waiting {
		deadline := b.tickets[t].deadline
		switch {
		case !lineVerb || t != op.At:
		case d.Allowed:
			continue // served (as a check, would be), or left: out of the line
		case waitsInLine(op, d):
			deadline = op.Now + op.MaxDelay
		}
		if int64(d.ResetAfter) < deadline-op.Now {
			return fmt.Errorf("ResetAfter = %v at %d, but the waiter of ticket %d waits until %d", d.ResetAfter, op.Now, t, deadline)
		}
		if (op.Verb == engine.VerbAllow || op.Verb == engine.VerbCheck) && d.Allowed && t != op.At && (op.At == 0 || t < op.At) {
			return fmt.Errorf("a %v of ticket %d admitted at %d past the waiter of ticket %d, which waits until %d", op.Verb, op.At, op.Now, t, deadline)
		}
	}
	switch {
	case op.Verb == engine.VerbAllow && d.Allowed:
		if mine {
			// Served. A ticket past its deadline by the book may still
			// be in the store's line, if its clock stepped back: then
			// served too, or not at all (a cost of zero that serves no
			// waiter changes nothing), and its waiter stays in the
			// book, as one that no longer waits.
			b.tickets[op.At].gone = true
		}
	case op.Verb == engine.VerbAllow && !d.Allowed && op.MaxDelay > 0 && mine && d.At != op.At:
		return fmt.Errorf("the waiter of ticket %d, which waits until %d, asked again at %d with a patience of %d and was given ticket %d",
			op.At, b.tickets[op.At].deadline, op.Now, op.MaxDelay, d.At)
	case waitsInLine(op, d):
		if w := b.tickets[d.At]; d.At != op.At && w != nil && b.waits(d.At, op.Now) {
			return fmt.Errorf("ticket %d handed out at %d while its waiter waits until %d", d.At, op.Now, w.deadline)
		}
		b.tickets[d.At] = &bookWaiter{deadline: op.Now + op.MaxDelay}
	case op.Verb == engine.VerbLeave && d.Allowed:
		w := b.tickets[op.At]
		if w == nil || w.gone {
			return fmt.Errorf("a leaving of ticket %d, which no waiter holds, was allowed at %d", op.At, op.Now)
		}
		w.gone = true
	case op.Verb == engine.VerbLeave && mine:
		return fmt.Errorf("a leaving of ticket %d, which waits until %d, was refused at %d", op.At, b.tickets[op.At].deadline, op.Now)
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
// a clock that swings back and forth across the leases' expiries;
// waiters in line while callers without a ticket barge in. The
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
		{"waiters in line while others barge in", func(c *leaseChecker, now int64, cost float64) error {
			for range 100 {
				// Fill the key, line three waiters up, release its
				// earliest lease and have a caller without a ticket try
				// at that instant, then the waiters ask again, the last
				// first: the room freed goes to the first, and nobody
				// passes a waiter (the book checks it). The rest leave.
				if err := fillLeases(c, now, cost); err != nil {
					return err
				}
				var line []int64
				for range 3 {
					d, err := c.apply(engine.Op{Verb: engine.VerbAllow, Cost: cost, Now: now, MaxDelay: c.p.Interval})
					if err != nil {
						return err
					}
					if !d.Allowed && d.At != 0 { // a ticket
						line = append(line, d.At)
					}
				}
				if held := c.book.live(now); len(held) > 0 {
					if _, err := c.apply(engine.Op{Verb: engine.VerbCancel, Cost: cost, Now: now, At: held[0]}); err != nil {
						return err
					}
				}
				if _, err := c.apply(engine.Op{Verb: engine.VerbAllow, Cost: cost, Now: now}); err != nil {
					return err
				}
				for _, ticket := range slices.Backward(line) {
					if _, err := c.apply(engine.Op{Verb: engine.VerbAllow, Cost: cost, Now: now, At: ticket, MaxDelay: c.p.Interval}); err != nil {
						return err
					}
				}
				for _, ticket := range line {
					if _, err := c.apply(engine.Op{Verb: engine.VerbLeave, Now: now, At: ticket}); err != nil {
						return err
					}
				}
				now += max(c.p.Interval/50, 1)
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
