// Package storetest is the conformance suite for sluice stores. Every store
// (the in-memory one, Redis, PostgreSQL, or one of your own) runs it from
// its tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) engine.Store { return newStoreForTest(t) })
//	}
//
// The store under test must use the caller's time (Op.Now), so that the
// suite can drive it with simulated time. The suite first replays named
// edge-case vectors ([RunVectors]), so that a store that misses a rule
// fails on a case named for it, then seeded random traces of every
// algorithm, against the store and against [engine.Params.Step], the
// specification, and requires the same decisions: within the tolerances
// below by default, or bit for bit for a store that promises it ([Exact]),
// as sluice's own stores do:
//
//	storetest.Run(t, newStore, storetest.Exact())
package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/storetest/internal/vectors"
)

// Tolerances of the comparison with the specification. Allowed must match
// exactly. Amounts may differ by AmountTolerance times the limit, for a
// store whose arithmetic (SQL, Lua) rounds in another order. Durations must
// be equal to the nanosecond for the integer algorithms (GCRA, fixed window,
// sliding log) and may differ by DurationTolerance for the float ones.
const (
	AmountTolerance   = 1e-9
	DurationTolerance = time.Nanosecond
)

// Algorithms returns one Params of each algorithm and variant, as the suite
// runs them.
func Algorithms() []engine.Params { return vectors.Params() }

// Traces is how many random traces Run replays per algorithm: 50, or the
// value of the environment variable SLUICE_TRACES.
func Traces() int {
	if n, err := strconv.Atoi(os.Getenv("SLUICE_TRACES")); err == nil && n > 0 {
		return n
	}
	return 50
}

// An Option changes what the suite requires of a store or what it runs.
type Option func(*config)

type config struct {
	exact     bool
	traces    int
	extra     []engine.Params
	noStrict  bool
	groupTags bool
}

func configure(opts []Option) config {
	c := config{traces: Traces()}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// Exact requires every decision to equal Step's bit for bit: Allowed, the
// float64 bits of every amount, every duration to the nanosecond, and
// Blocked. A
// store that runs the Go step itself, or translates it operation for
// operation (sluice's Redis and PostgreSQL stores), promises this.
func Exact() Option { return func(c *config) { c.exact = true } }

// WithTraces sets how many random traces RunTraces replays per algorithm
// from a realistic time; it replays a tenth as many (at least two) from
// each end of the time range. The default is [Traces].
func WithTraces(n int) Option { return func(c *config) { c.traces = max(n, 1) } }

// WithAlgorithms adds Params to [Algorithms] for the traces: say, those at
// the edges of a store's own arithmetic.
func WithAlgorithms(ps ...engine.Params) Option {
	return func(c *config) { c.extra = append(c.extra, ps...) }
}

// WithoutStrict leaves [Strict] out of the traces RunTraces replays, for
// a store's slower replays (say, one per mode of a database driver) that
// WithAlgorithms gives a strict limit of their own instead.
func WithoutStrict() Option { return func(c *config) { c.noStrict = true } }

// Run runs the whole suite against stores made by newStore. A store may be
// shared by the subtests: each uses keys of its own.
func Run(t *testing.T, newStore func(t *testing.T) engine.Store, opts ...Option) {
	t.Run("VectorsMatchSpecification", func(t *testing.T) { RunVectors(t, newStore(t), opts...) })
	t.Run("TracesMatchSpecification", func(t *testing.T) { RunTraces(t, newStore(t), opts...) })
	t.Run("ChangedLimitsMatchSpecification", func(t *testing.T) { RunChanges(t, newStore(t), opts...) })
	t.Run("CalendarWindowsMatchSpecification", func(t *testing.T) { RunCalendars(t, newStore(t), opts...) })
	t.Run("ConcurrentCallersAdmitExactlyTheBurst", func(t *testing.T) { RunConcurrent(t, newStore(t), 64) })
	t.Run("ConcurrentCallersUnderTwoLimitsAdmitTheLargerBurst", func(t *testing.T) { RunConcurrentChanges(t, newStore(t), 64) })
	t.Run("ResetForgetsKey", func(t *testing.T) { RunReset(t, newStore(t)) })
	t.Run("CheckRecordsNothing", func(t *testing.T) { RunCheck(t, newStore(t)) })
	t.Run("ImpossibleCostStartsPenalty", func(t *testing.T) { RunOverflows(t, newStore(t)) })
	t.Run("AtMostOfNothingIsNotAllowed", func(t *testing.T) { RunAtMostNothing(t, newStore(t)) })
	t.Run("NilParamsAreRefused", func(t *testing.T) { RunNilParams(t, newStore(t)) })
	t.Run("ReservationsBookAndCancelAsSpecified", func(t *testing.T) { RunReservations(t, newStore(t)) })
	t.Run("SettledCostsStayWithinTheGuarantee", func(t *testing.T) { RunSettleBounds(t, newStore(t)) })
	t.Run("WaitersActInBookingOrderOneIntervalApart", func(t *testing.T) { RunWaiters(t, newStore(t), 64) })
	t.Run("LeaseHoldersNeverExceedTheLimit", func(t *testing.T) { RunLeaseHolders(t, newStore(t), 64) })
	if _, ok := newStore(t).(engine.GroupStore); ok {
		t.Run("GroupsMatchSpecification", func(t *testing.T) { RunGroups(t, newStore(t), opts...) })
		t.Run("ConcurrentGroupsRecordAllOrNothing", func(t *testing.T) { RunGroupsConcurrent(t, newStore(t), 64, opts...) })
	}
}

// base is the simulated time traces start from, the vectors' realistic
// time.
var base = vectors.Today

// origins are where traces start: a realistic time, the epoch (where a
// fresh state's zero time is now), and ten thousand days before the latest
// time sluice accepts (2^62 ns, in 2116), where sums of times overflow
// first.
var origins = []struct {
	name string
	at   int64
}{
	{"today", base},
	{"epoch", 0},
	{"end", 1<<62 - int64(10000*24*time.Hour)},
}

// RunTraces replays random traces of every algorithm against st and
// against the specification: mixed verbs and costs (fractional, zero, too
// large), resets, simultaneous requests, gaps from nanoseconds to months,
// and a clock that steps back, from each of three origins.
func RunTraces(t *testing.T, st engine.Store, opts ...Option) {
	c := configure(opts)
	prefix := uniquePrefix()
	ps := Algorithms()
	if !c.noStrict {
		ps = append(ps, Strict()...)
	}
	for ai, p := range append(ps, c.extra...) {
		for oi, origin := range origins {
			traces := c.traces
			if oi > 0 {
				traces = max(traces/10, 2)
			}
			t.Run(fmt.Sprintf("%d_%v_from_%s", ai, p.Kind, origin.name), func(t *testing.T) {
				keyPrefix := fmt.Sprintf("%s%d.%s.", prefix, ai, origin.name)
				replay(t, st, []engine.Params{p}, c.exact, keyPrefix, uint64(ai)<<40|uint64(oi)<<32, origin.at, traces)
			})
		}
	}
}

// replay runs traces random traces of p on st from now on. They share one
// timeline, as a store sees one clock: each starts an hour or two after
// the previous one ended, when all is expired.
func replay(t *testing.T, st engine.Store, limits []engine.Params, exact bool, keyPrefix string, seeds uint64, now int64, traces int) {
	ctx := context.Background()
	for trace := range traces {
		seed := seeds | uint64(trace)
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		keys := []string{fmt.Sprintf("%sa%d", keyPrefix, trace), fmt.Sprintf("%sb%d", keyPrefix, trace)}
		spec := specStore{states: map[string]engine.State{}, expires: map[string]int64{}, exact: exact}
		booked := map[string][]engine.Op{} // each key's booked reservations, as cancels
		tickets := map[string][]int64{}    // each key's waiters' tickets, in line or not
		if trace > 0 {
			now += int64(time.Hour) + rng.Int64N(int64(time.Hour))
		}
		p := limits[0]
		for step := range 60 {
			if len(limits) > 1 && rng.IntN(6) == 0 {
				p = limits[rng.IntN(len(limits))] // the key's limit changes
			}
			key := keys[rng.IntN(len(keys))]
			if b := booked[key]; len(b) > 0 && b[len(b)-1].At > now && rng.IntN(2) == 0 {
				now += rng.Int64N(b[len(b)-1].At - now) // before the booked instant
			} else {
				now = max(now+nextGap(rng, p), 0)
			}
			if rng.IntN(25) == 0 {
				require.NoError(t, st.Reset(ctx, key))
				spec.reset(key)
				continue
			}
			op := randomOp(rng, p, now, booked[key])
			if p.Kind == engine.KindConcurrency {
				waitInLine(rng, p, &op, tickets[key])
			}
			got, err := st.Apply(ctx, key, &p, op)
			where := fmt.Sprintf("seed %d step %d key %s op %+v", seed, step, key, op)
			switch want := spec.apply(t, p, key, op, got, err, where); {
			case want.At == 0:
			case op.Verb == engine.VerbAllow && !want.Allowed:
				tickets[key] = append(tickets[key], want.At) // a place in line
			default:
				// A booking, or a lease taken or extended: what a cancel (a
				// release) names.
				booked[key] = append(booked[key], engine.Op{Verb: engine.VerbCancel, Cost: op.Cost, At: want.At})
			}
		}
	}
}

// randomOp draws a request: mostly admissions, with checks, fill-ups of
// the leaky bucket, partial grants, and for the algorithms that book
// ahead, exhausts, charges and refunds (a settled cost's excess, into
// debt at times, and what it did not use), reservations of any maximum
// delay and cancels of earlier ones,
// in any order, again, or after their instant; for the concurrency
// limit, releases and extensions of its leases, live or not.
func randomOp(rng *rand.Rand, p engine.Params, now int64, booked []engine.Op) engine.Op {
	leases := p.Kind == engine.KindConcurrency
	op := engine.Op{Verb: engine.VerbAllow, Cost: randomCost(rng, p), Now: now}
	switch r := rng.IntN(20); {
	case r < 3:
		op.Verb = engine.VerbCheck
	case r < 6 && p.Kind == engine.KindLeakyBucket:
		op.Verb = engine.VerbFill
	case r < 8:
		op.Verb = engine.VerbAtMost
		if rng.IntN(3) == 0 {
			op.Cost = math.Round(rng.Float64()*3*p.Limit*100) / 100 // often more than fits
		}
	case r == 11 && p.Reservable():
		op.Verb, op.MaxDelay = engine.VerbExhaust, randomDelay(rng, p)
	case r == 10 && p.Reservable():
		op.Verb = engine.VerbCharge + engine.Verb(rng.IntN(2)) // or refund
		switch rng.IntN(8) {
		case 0:
			op.Cost = math.Round(rng.Float64()*3*p.Limit*100) / 100 // into debt
		case 1:
			op.Cost = math.Ldexp(1, 1000) // beyond what any key may hold
		}
	case r < 12 && p.Reservable(), r == 12:
		// The window algorithms refuse reservations: an error to match.
		op.Verb, op.MaxDelay = engine.VerbReserve, randomDelay(rng, p)
	case r < 17 && (p.Reservable() || leases) && len(booked) > 0:
		// Mostly a booking whose instant is still to come, the latest
		// above all, which a cancel gives back; sometimes any, which may
		// be past or followed by others.
		var pending []engine.Op
		for _, b := range booked {
			if b.At > now {
				pending = append(pending, b)
			}
		}
		switch {
		case len(pending) > 0 && rng.IntN(3) > 0:
			op = pending[len(pending)-1]
		case len(pending) > 0:
			op = pending[rng.IntN(len(pending))]
		case rng.IntN(4) == 0:
			op = booked[rng.IntN(len(booked))]
		default:
			return op
		}
		op.Now = now
		if rng.IntN(10) == 0 {
			op.At++ // no booking ends there
		}
		if leases && rng.IntN(3) == 0 {
			op.Verb = engine.VerbExtend
		}
	}
	return op
}

// waitInLine makes some of a concurrency limit's admissions and checks
// those of a waiter in the key's line: with a patience, and a ticket from
// tickets, the latest mostly, or none, or one never handed out; it makes
// some of its ops a waiter's leaving. An invalid patience or ticket
// sometimes, for an error to match.
func waitInLine(rng *rand.Rand, p engine.Params, op *engine.Op, tickets []int64) {
	if op.Verb != engine.VerbAllow && op.Verb != engine.VerbCheck || rng.IntN(3) == 0 {
		return
	}
	switch r := rng.IntN(10); {
	case len(tickets) == 0 || r < 2:
	case r < 6:
		op.At = tickets[len(tickets)-1]
	case r < 9:
		op.At = tickets[rng.IntN(len(tickets))]
	default:
		op.At = tickets[len(tickets)-1] + 1
	}
	if op.Verb == engine.VerbAllow {
		op.MaxDelay = 1 + rng.Int64N(2*p.Interval)
		if rng.IntN(8) == 0 {
			op.Verb, op.Cost, op.MaxDelay = engine.VerbLeave, 0, 0
		}
	}
	if rng.IntN(50) == 0 {
		op.At = -1 - rng.Int64N(3)
	}
	if rng.IntN(50) == 0 && op.Verb == engine.VerbAllow {
		op.MaxDelay = -1
	}
}

// randomDelay draws a reservation's maximum delay: none, around the
// algorithm's time scale, longer than any booking, or invalid.
func randomDelay(rng *rand.Rand, p engine.Params) int64 {
	scale := p.Interval * int64(math.Ceil(p.Limit))
	switch r := rng.IntN(20); {
	case r < 4:
		return 0
	case r < 14:
		return rng.Int64N(scale)
	case r < 18:
		return scale + rng.Int64N(4*scale)
	case r < 19:
		return 1 << 60
	default:
		return -1 - rng.Int64N(1000) // an error
	}
}

// specStore keeps the specification's state of each key of a trace.
type specStore struct {
	states  map[string]engine.State
	expires map[string]int64 // when each state is fresh again
	latest  int64            // the latest time the store has seen
	exact   bool             // decisions must be Step's bit for bit
}

func (s *specStore) reset(key string) {
	delete(s.states, key)
	delete(s.expires, key)
}

// apply checks the store's answer to op against the specification's, and
// records the specification's new state.
//
// A store may forget a key once it has seen a time at or after the key's
// expiry. When the clock then steps back before that expiry, the store may
// answer from the state or from a fresh key, and both are accepted.
func (s *specStore) apply(t *testing.T, p engine.Params, key string, op engine.Op, got engine.Decision, gotErr error, where string) engine.Decision {
	t.Helper()
	state := s.states[key]
	exp, found := s.expires[key]
	if found && op.Now >= exp {
		state = engine.State{} // fresh again, whatever the Params now
	}
	carried := p.Carries(&state, &op)
	kept, want, wantErr := p.Step(cloneState(state), op)
	same := SameDecision
	if s.exact {
		same = func(_ engine.Params, want, got engine.Decision) bool { return IdenticalDecision(want, got) }
	}
	if found && exp <= s.latest && op.Now < exp && wantErr == nil && gotErr == nil && !same(p, want, got) {
		carried = false
		kept, want, wantErr = p.Step(engine.State{}, op)
		where += " (key forgotten after its expiry, before the clock stepped back)"
	}
	s.latest = max(s.latest, op.Now)
	switch {
	case wantErr == nil:
		require.NoError(t, gotErr, where)
	case p.Overflows(op, wantErr):
		// Refused, and decided all the same: the decision is compared too.
		require.ErrorIs(t, gotErr, unwrapSentinel(wantErr), where)
	default:
		require.ErrorIs(t, gotErr, unwrapSentinel(wantErr), where)
		return engine.Decision{}
	}
	if s.exact {
		RequireIdenticalDecision(t, want, got, where)
	} else {
		RequireSameDecision(t, p, want, got, where)
	}
	if p.Records(op.Verb, &want) || carried {
		s.states[key] = kept
		s.expires[key] = op.Now + int64(want.ResetAfter)
	}
	return want
}

func cloneState(s engine.State) engine.State {
	s.Log = append([]engine.Entry(nil), s.Log...)
	return s
}

// unwrapSentinel returns the sluice sentinel err wraps.
func unwrapSentinel(err error) error {
	for _, s := range []error{sluice.ErrCostExceedsLimit, sluice.ErrInvalidCost, sluice.ErrInvalidDelay, sluice.ErrTimeOutOfRange, sluice.ErrUnsupported, sluice.ErrInvalidConfig} {
		if errors.Is(err, s) {
			return s
		}
	}
	return err
}

// nextGap draws the time to the next request: mostly bursts and steady
// traffic around the algorithm's own time scale, sometimes exactly nothing,
// a long idle, or a clock stepping backwards.
func nextGap(rng *rand.Rand, p engine.Params) int64 {
	scale := p.Interval
	if p.Kind == engine.KindGCRA {
		scale *= int64(math.Ceil(p.Limit))
	}
	switch r := rng.IntN(100); {
	case r < 20:
		return 0
	case r < 30:
		return rng.Int64N(1000) // nanoseconds apart
	case r < 85:
		return rng.Int64N(scale)
	case r < 95:
		return scale + rng.Int64N(4*scale)
	case r < 97:
		return rng.Int64N(int64(6 * time.Hour))
	case r < 98:
		return rng.Int64N(int64(200 * 24 * time.Hour)) // well beyond 2^53 ns
	default:
		return -rng.Int64N(scale) // the clock steps back
	}
}

func randomCost(rng *rand.Rand, p engine.Params) float64 {
	switch r := rng.IntN(20); {
	case r < 10:
		return 1
	case r < 12:
		return 0
	case r < 15:
		return float64(1 + rng.IntN(int(math.Ceil(p.Limit))))
	case r < 19:
		return math.Round(rng.Float64()*p.Limit*100) / 100 // like 30.50 of money
	default:
		return p.Limit + 1 // never fits: an error for Allow and Check
	}
}

// SameDecision reports whether got equals want within the suite's
// tolerances: Allowed and Blocked exactly, amounts within AmountTolerance
// times the limit, durations exactly or, for the float algorithms, within
// DurationTolerance.
func SameDecision(p engine.Params, want, got engine.Decision) bool {
	return difference(p, want, got) == ""
}

// RequireSameDecision fails t unless SameDecision(p, want, got).
func RequireSameDecision(t testing.TB, p engine.Params, want, got engine.Decision, where string) {
	t.Helper()
	if diff := difference(p, want, got); diff != "" {
		t.Fatalf("%s differs: %s\nwant %+v\ngot  %+v", diff, where, want, got)
	}
}

// IdenticalDecision reports whether got is want bit for bit: Allowed, the
// float64 bits of every amount (so 0 and -0 differ), every duration, and
// Blocked.
func IdenticalDecision(want, got engine.Decision) bool {
	return want.Allowed == got.Allowed &&
		math.Float64bits(want.Limit) == math.Float64bits(got.Limit) &&
		math.Float64bits(want.Used) == math.Float64bits(got.Used) &&
		math.Float64bits(want.Remaining) == math.Float64bits(got.Remaining) &&
		want.RetryAfter == got.RetryAfter && want.ResetAfter == got.ResetAfter &&
		want.Delay == got.Delay && want.At == got.At &&
		math.Float64bits(want.Granted) == math.Float64bits(got.Granted) &&
		want.Blocked == got.Blocked
}

// RequireIdenticalDecision fails t unless IdenticalDecision(want, got).
func RequireIdenticalDecision(t testing.TB, want, got engine.Decision, where string) {
	t.Helper()
	if !IdenticalDecision(want, got) {
		t.Fatalf("decision is not Step's bit for bit: %s\nwant %+v (used %#x, remaining %#x)\ngot  %+v (used %#x, remaining %#x)",
			where, want, math.Float64bits(want.Used), math.Float64bits(want.Remaining),
			got, math.Float64bits(got.Used), math.Float64bits(got.Remaining))
	}
}

func difference(p engine.Params, want, got engine.Decision) string {
	tol := AmountTolerance * p.Limit
	dt := time.Duration(0)
	switch p.Kind {
	case engine.KindLeakyBucket, engine.KindTokenBucket, engine.KindSlidingCounter:
		dt = DurationTolerance
	}
	switch {
	case want.Allowed != got.Allowed:
		return "Allowed"
	case math.Abs(want.Limit-got.Limit) > tol:
		return "Limit"
	case math.Abs(want.Used-got.Used) > tol:
		return "Used"
	case math.Abs(want.Remaining-got.Remaining) > tol:
		return "Remaining"
	case (want.RetryAfter - got.RetryAfter).Abs() > dt:
		return "RetryAfter"
	case (want.ResetAfter - got.ResetAfter).Abs() > dt:
		return "ResetAfter"
	case (want.Delay - got.Delay).Abs() > dt:
		return "Delay"
	case time.Duration(want.At-got.At).Abs() > dt:
		return "At"
	case math.Abs(want.Granted-got.Granted) > tol:
		return "Granted"
	case want.Blocked != got.Blocked:
		return "Blocked"
	}
	return ""
}

// RunConcurrent has callers goroutines take one unit each from one key at
// one instant, and requires that exactly the burst is admitted, for every
// algorithm.
func RunConcurrent(t *testing.T, st engine.Store, callers int) {
	prefix := uniquePrefix()
	for ai, p := range Algorithms() {
		t.Run(fmt.Sprintf("%d_%v", ai, p.Kind), func(t *testing.T) {
			key := fmt.Sprintf("%sc%d", prefix, ai)
			admitted := admitConcurrently(t, st, key, []engine.Params{p}, callers, 1)
			require.Equal(t, burstFromRest(t, p), admitted)
		})
	}
}

// admitConcurrently has callers goroutines each make calls Allows of one
// unit on key at one instant, caller i under limits[i%len(limits)], and
// returns how many were admitted; every call must succeed.
func admitConcurrently(t *testing.T, st engine.Store, key string, limits []engine.Params, callers, calls int) int {
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted, errs := 0, []error(nil)
	for i := range callers {
		wg.Go(func() {
			for range calls {
				d, err := st.Apply(ctx, key, &limits[i%len(limits)], engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: base})
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else if d.Allowed {
					admitted++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Empty(t, errs)
	return admitted
}

// burstFromRest is how many unit requests the specification admits at one
// instant from a fresh key.
func burstFromRest(t *testing.T, p engine.Params) int {
	var s engine.State
	for n := 0; ; n++ {
		var d engine.Decision
		var err error
		s, d, err = p.Step(s, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: base})
		require.NoError(t, err)
		if !d.Allowed {
			return n
		}
	}
}

// RunReset requires that a reset key is fresh again.
func RunReset(t *testing.T, st engine.Store) {
	ctx := context.Background()
	prefix := uniquePrefix()
	for ai, p := range Algorithms() {
		t.Run(fmt.Sprintf("%d_%v", ai, p.Kind), func(t *testing.T) {
			key := fmt.Sprintf("%sr%d", prefix, ai)
			fill := engine.Op{Verb: engine.VerbAllow, Cost: p.Limit, Now: base}
			d, err := st.Apply(ctx, key, &p, fill)
			require.NoError(t, err)
			require.True(t, d.Allowed)
			d, err = st.Apply(ctx, key, &p, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: base})
			require.NoError(t, err)
			require.False(t, d.Allowed, "a full key admits nothing more")
			require.NoError(t, st.Reset(ctx, key))
			d, err = st.Apply(ctx, key, &p, fill)
			require.NoError(t, err)
			require.True(t, d.Allowed, "after Reset the whole limit is admitted again")
			require.NoError(t, st.Reset(ctx, key+"-never-used"), "resetting an absent key is not an error")
		})
	}
}

// RunCheck requires that VerbCheck never changes a key's state.
func RunCheck(t *testing.T, st engine.Store) {
	ctx := context.Background()
	prefix := uniquePrefix()
	for ai, p := range Algorithms() {
		t.Run(fmt.Sprintf("%d_%v", ai, p.Kind), func(t *testing.T) {
			key := fmt.Sprintf("%sk%d", prefix, ai)
			for range 3 * int(math.Ceil(p.Limit)) {
				d, err := st.Apply(ctx, key, &p, engine.Op{Verb: engine.VerbCheck, Cost: 1, Now: base})
				require.NoError(t, err)
				require.True(t, d.Allowed, "checks alone never use up a key")
			}
		})
	}
}

// uniquePrefix returns a key prefix no earlier run used, so that a shared
// store's leftovers never meet a new test.
func uniquePrefix() string {
	return fmt.Sprintf("storetest:%d:%d:", time.Now().UnixNano(), rand.Uint32())
}
