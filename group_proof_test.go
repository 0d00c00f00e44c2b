package sluice_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/guarantees"
)

// The group property tests drive groups of two to engine.MaxGroup
// limiters of mixed algorithms (some under a penalty, some counting
// denials) through sluice.NewGroup on one MemStore with a simulated clock,
// and the same requests through a model of groups written from
// DecideGroup's documentation over each limit's own model, Params.Step on
// a state the model keeps per key (Step itself is held to the exact
// reference models by the property tests). The model decides a group as
// documented:
//
//   - Allow checks every limit; if all admit, it admits the cost in each;
//     otherwise nothing is admitted anywhere: the limits that denied
//     decide the request as Allow (so that their penalty or counted denial
//     applies), the others check a cost of zero;
//   - CanAccept decides as Allow would and records nothing;
//   - Reserve (every limit reserves) books every limit at the latest of
//     their earliest instants, if it comes within the maximum delay, and
//     otherwise books nothing, the limits that could not book within the
//     delay on their own deciding it as a reservation that did not fit;
//   - a group reservation's Cancel gives it back on every limit, each by
//     its own rule, once, before its instant;
//   - the group's decision is the most restrictive limit's: when all
//     admit, one with the least of its limit left; otherwise a denial that
//     lasts longest, with RetryAfter the latest at which every limit would
//     admit (or book), and Blocked if any limit is blocked.
//
// After every call each limit's decision must be the model's, bit for
// bit, and every key of the call must read back (the limiter's
// CanAccept(key, 0)) as the model's state reads. Beside the model: a
// denied call leaves every limit that would have admitted reading exactly
// as before it, and a booked group reservation acts at one instant on
// every limit. Single limiters' own Allows on the same keys come in
// between, and invalid costs, which must change nothing.

func TestGroupsMatchTheirModel(t *testing.T) {
	for _, reservable := range []bool{false, true} {
		name := "mixed algorithms, Allow and CanAccept"
		if reservable {
			name = "reserving algorithms, every verb"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var total groupStats
			traces := traceCount(60)
			for trace := range traces {
				seed := uint64(trace)
				if reservable {
					seed |= 1 << 32
				}
				total.add(groupTrace(t, seed, reservable))
			}
			t.Logf("%d traces: %v", traces, total)
			require.Positive(t, total.admitted, "groups admitted")
			require.Positive(t, total.denied, "groups denied")
			require.Positive(t, total.partial, "groups denied by some limits that others admitted")
			require.Positive(t, total.blocked, "groups with a blocked limit")
			if reservable {
				require.Positive(t, total.waited, "group reservations that wait")
				require.Positive(t, total.refused, "group reservations refused")
				require.Positive(t, total.givenBack, "group reservations given back")
			}
		})
	}
}

// groupStats counts what a trace's group calls decided.
type groupStats struct {
	calls, admitted, denied, partial, blocked, waited, refused, givenBack, single, invalid int
}

func (s *groupStats) add(o groupStats) {
	s.calls += o.calls
	s.admitted += o.admitted
	s.denied += o.denied
	s.partial += o.partial
	s.blocked += o.blocked
	s.waited += o.waited
	s.refused += o.refused
	s.givenBack += o.givenBack
	s.single += o.single
	s.invalid += o.invalid
}

func (s groupStats) String() string {
	return fmt.Sprintf("%d group calls: %d admitted, %d denied (%d by some limits only), %d with a blocked limit; "+
		"%d reservations waited, %d refused, %d given back; %d single Allows between, %d invalid calls",
		s.calls, s.admitted, s.denied, s.partial, s.blocked, s.waited, s.refused, s.givenBack, s.single, s.invalid)
}

// groupLimit is one limiter of a group trace, and the model of its keys.
type groupLimit struct {
	p      engine.Params
	lim    *testLimiter
	states map[string]engine.State
	keys   []string
}

// step runs op on key's model state and keeps what it records, as a
// store does.
func (l *groupLimit) step(key string, op engine.Op) (engine.Decision, error) {
	next, d, err := l.p.Step(cloneState(l.states[key]), op)
	if err == nil && l.p.Records(op.Verb, &d) {
		l.states[key] = next
	}
	return d, err
}

// read returns what the model's state of key reads at now.
func (l *groupLimit) read(key string, now int64) engine.Decision {
	_, d, err := l.p.Step(cloneState(l.states[key]), engine.Op{Verb: engine.VerbCheck, Now: now})
	if err != nil {
		panic(err)
	}
	return d
}

// groupReservation is a group reservation of a trace and what the model
// booked for it.
type groupReservation struct {
	r      *sluice.GroupReservation
	limits []int
	keys   []string
	cost   float64
	each   []engine.Decision // the model's
	act    int64
	given  bool
}

// groupTrace replays the random group trace of seed.
func groupTrace(t *testing.T, seed uint64, reservable bool) groupStats {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 0x960f))
	var stats groupStats
	st := sluice.NewMemStore(sluice.MemStoreConfig{})
	defer st.Close()
	clk := &traceClock{}
	now := startTime(rng, engine.Params{Kind: engine.KindFixedWindow, Limit: 1, Interval: int64(time.Second)})
	clk.now.Store(now)

	// As many limiters as a group takes, each with keys of its own;
	// groups of two to all of them in any order.
	pool := testAlgorithms(t)
	if reservable {
		pool = reservingAlgorithms(t)
	}
	limits := make([]*groupLimit, engine.MaxGroup)
	var log []string
	for i := range limits {
		alg := pool[rng.IntN(len(pool))]
		p := alg.params
		if rng.IntN(5) < 2 {
			p = withVariant(p, strictVariants[rng.IntN(len(strictVariants))], rng)
		}
		lim := newLimiter(t, p, append(strictOptions(p), sluice.WithStore(st), sluice.WithClock(clk))...)
		l := &groupLimit{p: p, lim: lim, states: map[string]engine.State{}}
		for j := range 3 {
			l.keys = append(l.keys, fmt.Sprintf("%d:%s:%d", i, alg.name, j))
		}
		limits[i] = l
		log = append(log, fmt.Sprintf("limit %d: %#v", i, p))
	}
	type group struct {
		g     *sluice.Group
		order []int
	}
	var groups []group
	for range 3 {
		order := rng.Perm(len(limits))[:2+rng.IntN(len(limits)-1)]
		lims := make([]*sluice.Limiter, len(order))
		for j, i := range order {
			lims[j] = limits[i].lim.Limiter
		}
		g, err := sluice.NewGroup(lims...)
		require.NoError(t, err)
		groups = append(groups, group{g, order})
		log = append(log, fmt.Sprintf("group %d: limits %v", len(groups)-1, order))
	}
	fail := func() string { return fmt.Sprintf("seed %d:\n\t%s", seed, strings.Join(log, "\n\t")) }

	var reserved []*groupReservation
	for range 40 + rng.IntN(60) {
		now = groupNextTime(rng, limits, now)
		clk.now.Store(now)
		gr := groups[rng.IntN(len(groups))]
		keys := make([]string, len(gr.order))
		for j, i := range gr.order {
			keys[j] = limits[i].keys[rng.IntN(len(limits[i].keys))]
		}
		least := math.Inf(1)
		for _, i := range gr.order {
			least = min(least, limits[i].p.Limit)
		}
		cost := drawGroupCost(rng, least)
		verb := engine.VerbAllow
		switch r := rng.IntN(20); {
		case r < 3:
			verb = engine.VerbCheck
		case r < 6:
			// A single limiter's own Allow on one of its keys.
			l := limits[rng.IntN(len(limits))]
			key := l.keys[rng.IntN(len(l.keys))]
			c := drawGroupCost(rng, l.p.Limit)
			log = append(log, fmt.Sprintf("at %d: limiter of %q Allow %v", now, key, c))
			got, err := l.lim.Allow(ctx, key, c)
			want, werr := l.step(key, engine.Op{Verb: engine.VerbAllow, Cost: c, Now: now})
			require.Equal(t, werr == nil, err == nil, "%v / %v\n%s", err, werr, fail())
			require.Equal(t, want, engine.Decision(got), "a single Allow\n%s", fail())
			stats.single++
			continue
		case r == 6:
			// A cost above one of the limits: refused, recording nothing.
			cost = least * 2
		case r < 14 && reservable:
			verb = engine.VerbReserve
		case r < 17 && reservable && len(reserved) > 0:
			verb = engine.VerbCancel
		}
		before := readGroup(t, limits, gr.order, keys)
		switch verb {
		case engine.VerbCancel:
			res := reserved[rng.IntN(len(reserved))]
			var waiting []*groupReservation
			for _, r := range reserved {
				if r.r.Allowed && r.r.Delay > 0 && !r.given && now < r.act {
					waiting = append(waiting, r)
				}
			}
			if len(waiting) > 0 && rng.IntN(4) > 0 {
				// Mostly one still waiting: the latest, or any.
				res = waiting[len(waiting)-1]
				if rng.IntN(2) == 0 {
					res = waiting[rng.IntN(len(waiting))]
				}
			}
			log = append(log, fmt.Sprintf("at %d: cancel the reservation of %v, cost %v, booked %+v", now, res.keys, res.cost, res.each))
			require.NoError(t, res.r.Cancel(ctx), fail())
			if res.r.Allowed && res.r.Delay > 0 && !res.given && now < res.act {
				for j, i := range res.limits {
					d, err := limits[i].step(res.keys[j], engine.Op{Verb: engine.VerbCancel, Cost: res.cost, Now: now, At: res.each[j].At})
					require.NoError(t, err)
					if d.Allowed {
						stats.givenBack++
					}
				}
			}
			res.given = true
			requireGroupReads(t, limits, res.limits, res.keys, now, fail)
			continue
		case engine.VerbReserve:
			maxDelay := drawGroupDelay(rng, limits, gr.order)
			log = append(log, fmt.Sprintf("at %d: group %v Reserve %q cost %v within %v", now, gr.order, keys, cost, time.Duration(maxDelay)))
			r, err := gr.g.Reserve(ctx, keys, cost, time.Duration(maxDelay))
			op := engine.Op{Verb: engine.VerbReserve, Cost: cost, Now: now, MaxDelay: maxDelay}
			if invalidGroupCost(t, err, cost, least, limits, gr.order, keys, before, fail) {
				stats.invalid++
				continue
			}
			// The limits that could book within the delay on their own.
			alone := make([]bool, len(gr.order))
			for j, i := range gr.order {
				alone[j] = int64(checkKey(limits[i], keys[j], now, cost).RetryAfter) <= maxDelay
			}
			each, retry := modelGroup(limits, gr.order, keys, op)
			requireGroupCall(t, op, r.GroupDecision, each, retry, fail)
			res := &groupReservation{r: r, limits: gr.order, keys: keys, cost: cost, each: each, act: now + int64(r.Delay)}
			reserved = append(reserved, res)
			stats.count(r.GroupDecision)
			if r.Allowed && r.Delay > 0 {
				stats.waited++
				for j := range each {
					require.Equal(t, r.Delay, each[j].Delay, "limit %d acts at the group's instant\n%s", gr.order[j], fail())
				}
			}
			if !r.Allowed {
				stats.refused++
				// Nothing was booked on the limits that could have booked
				// on their own.
				for j, i := range gr.order {
					if alone[j] {
						require.Equal(t, before[j], readKey(t, limits[i], keys[j]), "a refused group reservation booked limit %d\n%s", i, fail())
					}
				}
			}
		default:
			log = append(log, fmt.Sprintf("at %d: group %v %v %q cost %v", now, gr.order, verb, keys, cost))
			var (
				gd  sluice.GroupDecision
				err error
			)
			if verb == engine.VerbCheck {
				gd, err = gr.g.CanAccept(ctx, keys, cost)
			} else {
				gd, err = gr.g.Allow(ctx, keys, cost)
			}
			if invalidGroupCost(t, err, cost, least, limits, gr.order, keys, before, fail) {
				stats.invalid++
				continue
			}
			op := engine.Op{Verb: verb, Cost: cost, Now: now}
			each, retry := modelGroup(limits, gr.order, keys, op)
			requireGroupCall(t, op, gd, each, retry, fail)
			stats.count(gd)
			if !gd.Allowed {
				// No partial record: every limit that would have admitted
				// reads exactly as before.
				for j, i := range gr.order {
					if each[j].Allowed || verb == engine.VerbCheck {
						require.Equal(t, before[j], readKey(t, limits[i], keys[j]), "a denied group changed limit %d, which admitted\n%s", i, fail())
					}
				}
			}
		}
		requireGroupReads(t, limits, gr.order, keys, now, fail)
	}
	return stats
}

// count counts a group decision.
func (s *groupStats) count(gd sluice.GroupDecision) {
	s.calls++
	if gd.Allowed {
		s.admitted++
	} else {
		s.denied++
		for _, d := range gd.Limits() {
			if d.Allowed {
				s.partial++
				break
			}
		}
	}
	if gd.Blocked {
		s.blocked++
	}
}

// checkKey returns the decision of a check of cost on key's model state.
func checkKey(l *groupLimit, key string, now int64, cost float64) engine.Decision {
	_, d, err := l.p.Step(cloneState(l.states[key]), engine.Op{Verb: engine.VerbCheck, Cost: cost, Now: now})
	if err != nil {
		panic(err)
	}
	return d
}

// modelGroup decides op on the limits order, each on its key, as
// DecideGroup's documentation says, and returns each limit's decision and
// the group's RetryAfter: the latest at which every limit would admit the
// request, or for a reservation book it.
func modelGroup(limits []*groupLimit, order []int, keys []string, op engine.Op) ([]engine.Decision, time.Duration) {
	each := make([]engine.Decision, len(order))
	checks := make([]engine.Decision, len(order))
	all := true
	var latest int64 // until every limit would admit
	for j, i := range order {
		checks[j] = checkKey(limits[i], keys[j], op.Now, op.Cost)
		all = all && checks[j].Allowed
		latest = max(latest, int64(checks[j].RetryAfter))
	}
	decide := func(j int, o engine.Op) engine.Decision {
		d, err := limits[order[j]].step(keys[j], o)
		if err != nil {
			panic(err)
		}
		return d
	}
	var retry time.Duration
	if op.Verb == engine.VerbReserve && latest > op.MaxDelay {
		retry = time.Duration(latest - op.MaxDelay) // until the latest instant comes within it
	}
	for j := range order {
		switch {
		case op.Verb == engine.VerbReserve && latest <= op.MaxDelay:
			// Every limit booked at the latest of their instants.
			each[j] = decide(j, engine.Op{Verb: engine.VerbReserve, Cost: op.Cost, Now: op.Now, MaxDelay: latest, At: op.Now + latest})
		case op.Verb == engine.VerbReserve && int64(checks[j].RetryAfter) > op.MaxDelay:
			// Could not book within the delay on its own.
			each[j] = decide(j, op)
			retry = max(retry, each[j].RetryAfter)
		case op.Verb == engine.VerbReserve:
			each[j] = checks[j] // would have booked on its own: nothing recorded
		case all && op.Verb == engine.VerbAllow:
			each[j] = decide(j, op)
		case all:
			each[j] = checks[j]
		case checks[j].Allowed:
			// Admitted by this limit, not by the group: its key untouched.
			each[j] = decide(j, engine.Op{Verb: engine.VerbCheck, Now: op.Now})
		case op.Verb == engine.VerbAllow:
			each[j] = decide(j, op) // its penalty or counted denial applies
		default:
			each[j] = checks[j]
		}
		if op.Verb != engine.VerbReserve {
			retry = max(retry, each[j].RetryAfter)
		}
	}
	return each, retry
}

// requireGroupCall requires the group decision gd on op to be the model's:
// each limit's decision bit for bit, and the group's the most restrictive
// limit's as documented.
func requireGroupCall(t *testing.T, op engine.Op, gd sluice.GroupDecision, each []engine.Decision, retry time.Duration, fail func() string) {
	t.Helper()
	got := make([]engine.Decision, len(gd.Limits()))
	for i, d := range gd.Limits() {
		got[i] = engine.Decision(d)
	}
	require.Equal(t, each, got, "each limit's decision\n%s", fail())
	allowed, blocked := true, false
	var delay time.Duration
	for _, d := range each {
		allowed = allowed && d.Allowed
		blocked = blocked || d.Blocked
		delay = max(delay, d.Delay)
	}
	require.Equal(t, allowed, gd.Allowed, "the group admits iff every limit does\n%s", fail())
	require.Equal(t, blocked, gd.Blocked, "Blocked iff a limit is\n%s", fail())
	// The limit whose decision the group's is: among all when every limit
	// admits, the least of its limit left; otherwise among the denials,
	// the longest.
	var from []engine.Decision
	for _, d := range each {
		if allowed || !d.Allowed {
			from = append(from, d)
		}
	}
	best := from[0]
	for _, d := range from[1:] {
		if allowed && d.Remaining*best.Limit < best.Remaining*d.Limit || !allowed && d.RetryAfter > best.RetryAfter {
			best = d
		}
	}
	require.True(t, slices.ContainsFunc(from, func(d engine.Decision) bool {
		return d.Limit == gd.Limit && d.Used == gd.Used && d.Remaining == gd.Remaining && d.ResetAfter == gd.ResetAfter &&
			(allowed && d.Remaining*best.Limit == best.Remaining*d.Limit || !allowed && d.RetryAfter == best.RetryAfter)
	}), "the group's decision %+v is none of the most restrictive limits' %+v\n%s", gd.Decision, each, fail())
	switch {
	case allowed:
		require.Zero(t, gd.RetryAfter, fail())
		require.Equal(t, delay, gd.Delay, "the group acts at the latest limit's instant\n%s", fail())
		if delay > 0 {
			require.Equal(t, op.Now+int64(delay), gd.At, fail())
		} else {
			require.Zero(t, gd.At, fail())
		}
	default:
		require.Zero(t, gd.Delay, fail())
		require.Equal(t, retry, gd.RetryAfter, "when every limit would admit (or book)\n%s", fail())
	}
}

// readGroup reads the keys of a group call through each limiter.
func readGroup(t *testing.T, limits []*groupLimit, order []int, keys []string) []engine.Decision {
	t.Helper()
	reads := make([]engine.Decision, len(order))
	for j, i := range order {
		reads[j] = readKey(t, limits[i], keys[j])
	}
	return reads
}

// readKey reads key through its limiter: a check of nothing.
func readKey(t *testing.T, l *groupLimit, key string) engine.Decision {
	t.Helper()
	d, err := l.lim.CanAccept(context.Background(), key, 0)
	require.NoError(t, err)
	return engine.Decision(d)
}

// requireGroupReads requires every key of a call to read as the model's
// state of it reads.
func requireGroupReads(t *testing.T, limits []*groupLimit, order []int, keys []string, now int64, fail func() string) {
	t.Helper()
	for j, i := range order {
		require.Equal(t, limits[i].read(keys[j], now), readKey(t, limits[i], keys[j]), "limit %d's key %q reads otherwise than the model's state %+v\n%s", i, keys[j], limits[i].states[keys[j]], fail())
	}
}

// invalidGroupCost requires a call with a cost above one of its limits to
// be refused and to change nothing, and reports whether it was one.
func invalidGroupCost(t *testing.T, err error, cost, least float64, limits []*groupLimit, order []int, keys []string, before []engine.Decision, fail func() string) bool {
	t.Helper()
	if cost <= least {
		require.NoError(t, err, fail())
		return false
	}
	require.ErrorIs(t, err, sluice.ErrCostExceedsLimit, fail())
	require.Equal(t, before, readGroup(t, limits, order, keys), "a refused call changed a limit\n%s", fail())
	return true
}

// strictOptions returns the options that build p's penalty and counted
// denials.
func strictOptions(p engine.Params) []sluice.Option {
	var opts []sluice.Option
	if p.Penalty > 0 {
		opts = append(opts, sluice.WithPenalty(time.Duration(p.Penalty)))
	}
	if p.CountDenied {
		opts = append(opts, sluice.WithCountDenied())
	}
	return opts
}

// drawGroupCost draws a group call's cost, at most least, the smallest
// limit of the call: a unit (or least, if smaller), nothing, the whole of
// least, or a fraction of it.
func drawGroupCost(rng *rand.Rand, least float64) float64 {
	switch rng.IntN(8) {
	case 0:
		return 0
	case 1:
		return least
	case 2, 3:
		return math.Round(rng.Float64()*least*8) / 8
	}
	return min(1, least)
}

// drawGroupDelay draws a group reservation's maximum delay around the time
// scale of its limits.
func drawGroupDelay(rng *rand.Rand, limits []*groupLimit, order []int) int64 {
	scale := guarantees.Period(limits[order[rng.IntN(len(order))]].p)
	switch rng.IntN(6) {
	case 0:
		return 0
	case 1:
		return 1 << 60
	}
	return rng.Int64N(2 * scale)
}

// groupNextTime draws the time of a trace's next call, never earlier:
// bursts at one instant, nanoseconds apart, the time scale of one of the
// limits, one of their block ends, and long idles.
func groupNextTime(rng *rand.Rand, limits []*groupLimit, now int64) int64 {
	return min(groupStep(rng, limits, now), maxTime)
}

func groupStep(rng *rand.Rand, limits []*groupLimit, now int64) int64 {
	l := limits[rng.IntN(len(limits))]
	scale := guarantees.Period(l.p)
	switch r := rng.IntN(20); {
	case r < 4:
		return now
	case r < 7:
		return now + 1 + rng.Int64N(1000)
	case r < 15:
		return now + rng.Int64N(max(scale/int64(math.Ceil(l.p.Limit)), 1))
	case r < 18:
		for _, s := range l.states {
			if s.Until > now {
				return s.Until - rng.Int64N(2)
			}
		}
		return now + rng.Int64N(scale)
	}
	return now + scale + rng.Int64N(4*scale)
}
