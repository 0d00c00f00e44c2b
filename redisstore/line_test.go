package redisstore_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/redisstore"
	"github.com/sluice-go/sluice/storetest"
)

// The tests here hold the concurrency limit's line of waiters (tickets in
// Op.At and Decision.At, a waiter's patience in Op.MaxDelay, VerbLeave)
// to Params.Step and DecideGroup bit for bit, with the state the script
// stores read back from Redis, and require that a waiter leaving the line
// or served wakes the key's watchers.

// lineParams are concurrency limits for the line's tests: one slot, a
// fractional limit, and a time to live of a few nanoseconds.
var lineParams = []engine.Params{
	{Kind: engine.KindConcurrency, Limit: 1, Interval: int64(30 * time.Second), MaxEntries: 3},
	{Kind: engine.KindConcurrency, Limit: 2.5, Interval: int64(7*time.Second) + 1, MaxEntries: 4},
	{Kind: engine.KindConcurrency, Limit: 3, Interval: 7, MaxEntries: 2},
}

// lineOp draws a random op on a concurrency limit p at now for a line
// test: mostly an acquisition with a patience and a ticket of tickets (the
// latest mostly, or none, or one never handed out), and checks, leavings,
// releases and extensions of leases.
func lineOp(rng *rand.Rand, p engine.Params, now int64, leases, tickets []int64) engine.Op {
	op := engine.Op{Verb: engine.VerbAllow, Now: now, Cost: lineCost(rng, p)}
	ticket := func() int64 { return lineTicket(rng, tickets) }
	switch r := rng.IntN(12); {
	case r < 2:
		op.Verb, op.At = engine.VerbCheck, ticket()
	case r < 4 && len(leases) > 0:
		op.Verb = []engine.Verb{engine.VerbCancel, engine.VerbExtend}[rng.IntN(2)]
		op.At = leases[len(leases)-1-rng.IntN(min(len(leases), 4))]
	case r < 5 && len(tickets) > 0:
		op.Verb, op.Cost, op.At = engine.VerbLeave, 0, ticket()
	default:
		op.At = ticket()
		if rng.IntN(6) > 0 {
			op.MaxDelay = 1 + rng.Int64N(2*p.Interval)
		}
	}
	return op
}

// lineCost draws the cost of an op on p.
func lineCost(rng *rand.Rand, p engine.Params) float64 {
	return min([]float64{0, 0.5, 1, p.Limit / 3, p.Limit}[rng.IntN(5)], p.Limit)
}

// lineTicket draws a ticket of tickets: the latest mostly, or none, or one
// never handed out.
func lineTicket(rng *rand.Rand, tickets []int64) int64 {
	switch r := rng.IntN(10); {
	case len(tickets) == 0 || r < 2:
		return 0
	case r < 6:
		return tickets[len(tickets)-1]
	case r < 9:
		return tickets[rng.IntN(len(tickets))]
	default:
		return tickets[len(tickets)-1] + 1
	}
}

// lineNow moves a line test's clock on, or leaves it, or steps it back.
func lineNow(rng *rand.Rand, p engine.Params, now int64) int64 {
	switch r := rng.IntN(10); {
	case r < 5:
		now += rng.Int64N(p.Interval/2 + 1)
	case r < 6:
		now -= rng.Int64N(p.Interval/4 + 1)
	}
	return min(max(now, 0), 1<<62)
}

// TestLineIsStoredAsStepKeepsIt lines up, serves, passes over and takes
// out waiters at random, among leases taken, released and extended, from
// each origin: every decision, and the leases, the line and the latest
// ticket stored in Redis after it, are Step's bit for bit.
func TestLineIsStoredAsStepKeepsIt(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	for pi, p := range lineParams {
		for oi, origin := range origins {
			t.Run(fmt.Sprintf("%d_from_%d", pi, oi), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(pi), uint64(oi)+17))
				k := newTwin(t, c, st, p, fmt.Sprintf("line%d.%d", pi, oi))
				var leases, tickets []int64
				joined, served, left := 0, 0, 0
				now := origin
				for i := range 400 {
					now = lineNow(rng, p, now)
					op := lineOp(rng, p, now, leases, tickets)
					d := k.apply(op, fmt.Sprintf("op %d", i))
					switch {
					case op.Verb == engine.VerbAllow && !d.Allowed && d.At != 0:
						if !slices.Contains(tickets, d.At) {
							tickets = append(tickets, d.At)
							joined++
						}
					case d.At != 0:
						leases = append(leases, d.At)
					}
					switch {
					case op.Verb == engine.VerbAllow && op.At != 0 && d.Allowed:
						served++
					case op.Verb == engine.VerbLeave && d.Allowed:
						left++
					}
				}
				require.Positive(t, joined, "some acquisitions wait in line")
				require.Positive(t, served, "some waiters are served")
				require.Positive(t, left, "some waiters leave the line")
			})
		}
	}
}

// putState writes s as the state of the concurrency limit p on key, as the
// script stores it (see storedState), fresh again at exp, for a test to
// start from a state no short trace reaches.
func putState(t *testing.T, c redis.UniversalClient, st *redisstore.Store, key string, s engine.State, exp int64) {
	t.Helper()
	b := []byte{byte(engine.KindConcurrency)}
	put := func(x float64) { b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x)) }
	putTime := func(ns int64) { put(float64(ns / 1e9)); put(float64(ns % 1e9)) }
	putTime(exp)
	putTime(s.Time)
	put(s.A)
	put(s.B)
	for _, e := range s.Log {
		putTime(e.Time)
		put(e.Cost)
	}
	require.NoError(t, c.Set(t.Context(), st.Key(key), b, testSkew).Err())
}

// TestLineHandsOutTicketsUpTo2To53 starts from a key whose latest ticket
// is 2^53 - 1: the next waiter gets 2^53, held exactly and served by it,
// and the one after it no place, as Step decides.
func TestLineHandsOutTicketsUpTo2To53(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	p := engine.Params{Kind: engine.KindConcurrency, Limit: 1, Interval: int64(time.Minute), MaxEntries: 4}
	for oi, origin := range origins {
		t.Run(fmt.Sprint(oi), func(t *testing.T) {
			key := fmt.Sprintf("tickets%d", oi)
			k := newTwin(t, c, st, p, key)
			held := k.apply(engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: origin}, "a lease")
			require.True(t, held.Allowed)
			k.s.A = 1<<53 - 1
			putState(t, c, st, key, k.s, held.At)
			wait := func(ticket int64) engine.Op {
				return engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: origin + 1, At: ticket, MaxDelay: int64(time.Second)}
			}
			last := k.apply(wait(0), "the last ticket")
			require.Equal(t, int64(1<<53), last.At)
			require.Zero(t, k.apply(wait(0), "no ticket left").At)
			require.Equal(t, int64(1<<53), k.apply(wait(1<<53), "its place kept").At)
			require.True(t, k.apply(engine.Op{Verb: engine.VerbCancel, Cost: 1, Now: origin + 2, At: held.At}, "the release").Allowed)
			require.False(t, k.apply(wait(0), "the line first").Allowed)
			require.True(t, k.apply(wait(1<<53), "the last ticket served").Allowed)
		})
	}
}

// TestGroupLineIsBitIdenticalToDecideGroup decides random groups of two
// concurrency limits and a rate limit, whose concurrency limits' waiters
// wait in line with a ticket of their own: every decision, each limit's
// and the group's, and every key's stored state are DecideGroup's over
// Step.
func TestGroupLineIsBitIdenticalToDecideGroup(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	ctx := t.Context()
	limits := []engine.Params{
		lineParams[0],
		lineParams[1],
		{Kind: engine.KindGCRA, Limit: 4, Interval: int64(10 * time.Second)},
	}
	for trace := range 6 {
		rng := rand.New(rand.NewPCG(uint64(trace), 0x11e))
		keys := make([]string, len(limits))
		for i := range keys {
			keys[i] = fmt.Sprintf("{gl%d}:%d", trace, i)
		}
		spec := make([]engine.State, len(limits))
		leases := make([][]int64, len(limits))
		tickets := make([][]int64, len(limits))
		joined, served := 0, 0
		now := origins[trace%len(origins)]
		for step := range 200 {
			now = lineNow(rng, limits[0], now)
			order := rng.Perm(len(limits))[:1+rng.IntN(len(limits))]
			op := engine.Op{Verb: engine.VerbAllow, Now: now}
			switch r := rng.IntN(10); {
			case r < 2:
				op.Verb = engine.VerbCheck
			case r < 4:
				op.Verb = []engine.Verb{engine.VerbCancel, engine.VerbExtend}[rng.IntN(2)]
			case r < 9:
				op.MaxDelay = 1 + rng.Int64N(2*limits[0].Interval)
			}
			leasing := op.Verb == engine.VerbCancel || op.Verb == engine.VerbExtend
			var ops []engine.GroupOp
			for _, i := range order {
				o := op
				o.Cost = lineCost(rng, limits[i])
				switch {
				case limits[i].Kind != engine.KindConcurrency:
					if leasing {
						continue // holds no lease
					}
				case leasing:
					if len(leases[i]) == 0 {
						continue
					}
					o.At = leases[i][len(leases[i])-1-rng.IntN(min(len(leases[i]), 3))]
				default:
					o.At = lineTicket(rng, tickets[i])
				}
				ops = append(ops, engine.GroupOp{Key: keys[i], Params: &limits[i], Op: o})
			}
			if len(ops) == 0 {
				continue
			}
			where := fmt.Sprintf("trace %d step %d ops %+v", trace, step, ops)
			index := make([]int, len(ops))
			for j, g := range ops {
				index[j] = slices.Index(keys, g.Key)
			}
			next := slices.Clone(spec)
			want := make([]engine.Decision, len(ops))
			wantD, wantErr := engine.DecideGroup(ops, func(j int, op engine.Op) (engine.Decision, error) {
				i := index[j]
				s, d, err := limits[i].Step(cloneState(next[i]), op)
				if limits[i].Records(op.Verb, &d) {
					next[i] = s
				}
				return d, err
			}, want)
			require.NoError(t, wantErr, where)
			got := make([]engine.Decision, len(ops))
			gotD, err := st.ApplyGroup(ctx, ops, got)
			require.NoError(t, err, where)
			storetest.RequireIdenticalDecision(t, wantD, gotD, where+" (the group's)")
			for j := range ops {
				storetest.RequireIdenticalDecision(t, want[j], got[j], fmt.Sprintf("%s (limit %d)", where, j))
			}
			spec = next
			for i, key := range keys {
				requireSameState(t, spec[i], storedState(t, c, st, key), fmt.Sprintf("%s (key %d)", where, i))
			}
			for j, g := range ops {
				i, d := index[j], want[j]
				switch {
				case limits[i].Kind != engine.KindConcurrency || d.At == 0:
				case g.Op.Verb == engine.VerbAllow && !d.Allowed:
					if !slices.Contains(tickets[i], d.At) {
						tickets[i] = append(tickets[i], d.At)
						joined++
					}
				default:
					leases[i] = append(leases[i], d.At)
				}
				if g.Op.Verb == engine.VerbAllow && g.Op.At != 0 && wantD.Allowed && limits[i].Kind == engine.KindConcurrency {
					served++
				}
			}
		}
		require.Positive(t, joined, "trace %d: some members wait in line", trace)
		require.Positive(t, served, "trace %d: some waiters are served", trace)
	}
}

// TestLineMovesWakeTheWaiters requires that a waiter leaving the line and
// a waiter served with room left, alone or in a group, wake the key's
// watchers in another process, as a release does: the next waiter may
// now be first, and fit.
func TestLineMovesWakeTheWaiters(t *testing.T) {
	for _, dep := range deployments {
		t.Run(dep.name, func(t *testing.T) {
			client, _ := dep.start(t)
			stores := sharedStores(t, client(), client())
			ctx := t.Context()
			p := engine.Params{Kind: engine.KindConcurrency, Limit: 1, Interval: int64(time.Hour), MaxEntries: 4}
			watch := func(key string) <-chan struct{} {
				c := make(chan struct{}, 1)
				stop, err := stores[1].WatchReleases(ctx, key, c)
				require.NoError(t, err)
				t.Cleanup(stop)
				return c
			}
			apply := func(key string, op engine.Op) engine.Decision {
				t.Helper()
				d, err := stores[0].Apply(ctx, key, &p, op)
				require.NoError(t, err)
				return d
			}
			const patience = int64(time.Hour)
			held := apply("k", engine.Op{Verb: engine.VerbAllow, Cost: 1})
			require.True(t, held.Allowed)
			first := apply("k", engine.Op{Verb: engine.VerbAllow, Cost: 1, MaxDelay: patience})
			second := apply("k", engine.Op{Verb: engine.VerbAllow, Cost: 1, MaxDelay: patience})
			require.Equal(t, []int64{1, 2}, []int64{first.At, second.At}, "tickets")

			woken := watch("k")
			require.True(t, apply("k", engine.Op{Verb: engine.VerbLeave, At: second.At}).Allowed)
			receive(t, woken, "wake-up by a waiter leaving")
			require.True(t, apply("k", engine.Op{Verb: engine.VerbCancel, Cost: 1, At: held.At}).Allowed)
			receive(t, woken, "wake-up by a release")
			require.True(t, apply("k", engine.Op{Verb: engine.VerbAllow, At: first.At, MaxDelay: patience}).Allowed)
			receive(t, woken, "wake-up by a waiter served with room left (a cost of zero)")

			// In a group: a rate limit and the concurrency limit.
			rate := engine.Params{Kind: engine.KindGCRA, Limit: 1000, Interval: int64(time.Second)}
			keys := []string{"{g}:rate", "{g}:running"}
			group := func(verb engine.Verb, cost float64, at int64) (engine.Decision, []engine.Decision) {
				t.Helper()
				ops := []engine.GroupOp{
					{Key: keys[0], Params: &rate, Op: engine.Op{Verb: verb, Cost: cost, MaxDelay: patience}},
					{Key: keys[1], Params: &p, Op: engine.Op{Verb: verb, Cost: cost, MaxDelay: patience, At: at}},
				}
				if verb == engine.VerbCancel {
					ops = ops[1:]
				}
				each := make([]engine.Decision, len(ops))
				d, err := stores[0].ApplyGroup(ctx, ops, each)
				require.NoError(t, err)
				return d, each
			}
			d, each := group(engine.VerbAllow, 1, 0)
			require.True(t, d.Allowed)
			lease := each[1].At
			d, each = group(engine.VerbAllow, 0.5, 0)
			require.False(t, d.Allowed)
			require.Zero(t, d.At, "the group's decision holds no ticket")
			ticket := each[1].At
			require.Equal(t, int64(1), ticket, "the concurrency limit's ticket")
			woken = watch(keys[1])
			d, _ = group(engine.VerbCancel, 1, lease)
			require.True(t, d.Allowed)
			receive(t, woken, "wake-up by a group's release")
			d, _ = group(engine.VerbAllow, 0.5, ticket)
			require.True(t, d.Allowed, "the head of the line is served")
			receive(t, woken, "wake-up by a group's waiter served with room left")
		})
	}
}

// TestPlaceInLineIsNotJudgedOnReplicaAcks requires, with WithReplicaAcks
// and the one replica paused, that a denial that takes or keeps a place
// in line comes without ErrNotReplicated, alone or in a group, while the
// lease of a waiter served comes with it, and so does the leaving.
func TestPlaceInLineIsNotJudgedOnReplicaAcks(t *testing.T) {
	nodes := testserver.StartRedisWithReplicas(t, 1)
	c := newClient(t, nodes[0].Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew), redisstore.WithReplicaAcks(1, 5*time.Millisecond))
	ctx := t.Context()
	p := engine.Params{Kind: engine.KindConcurrency, Limit: 1, Interval: int64(time.Hour), MaxEntries: 4}
	rate := engine.Params{Kind: engine.KindGCRA, Limit: 1000, Interval: int64(time.Second)}
	wait := func(ticket int64) engine.Op {
		return engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: base, At: ticket, MaxDelay: int64(time.Hour)}
	}
	held, err := st.Apply(ctx, "k", &p, wait(0))
	require.NoError(t, err)
	require.True(t, held.Allowed)
	keys := []string{"{g}:rate", "{g}:running"}
	group := func(op engine.Op) ([]engine.Decision, error) {
		ops := []engine.GroupOp{
			{Key: keys[0], Params: &rate, Op: engine.Op{Verb: op.Verb, Cost: 1, Now: op.Now, MaxDelay: op.MaxDelay}},
			{Key: keys[1], Params: &p, Op: op},
		}
		each := make([]engine.Decision, 2)
		_, err := st.ApplyGroup(ctx, ops, each)
		return each, err
	}
	each, err := group(wait(0))
	require.NoError(t, err)
	require.True(t, each[1].Allowed)

	nodes[1].Pause(t)
	d, err := st.Apply(ctx, "k", &p, wait(0))
	require.NoError(t, err, "a place in line taken")
	require.Equal(t, int64(1), d.At)
	d, err = st.Apply(ctx, "k", &p, wait(d.At))
	require.NoError(t, err, "a place in line kept")
	require.Equal(t, int64(1), d.At)
	each, err = group(wait(0))
	require.NoError(t, err, "a place in a group member's line taken")
	require.Equal(t, int64(1), each[1].At)

	d, err = st.Apply(ctx, "k", &p, engine.Op{Verb: engine.VerbCancel, Cost: 1, Now: base, At: held.At})
	require.ErrorIs(t, err, redisstore.ErrNotReplicated, "a release")
	require.True(t, d.Allowed)
	d, err = st.Apply(ctx, "k", &p, wait(1))
	require.ErrorIs(t, err, redisstore.ErrNotReplicated, "a waiter served")
	require.True(t, d.Allowed)
	d, err = st.Apply(ctx, "k", &p, wait(0))
	require.NoError(t, err)
	require.Equal(t, int64(2), d.At)
	d, err = st.Apply(ctx, "k", &p, engine.Op{Verb: engine.VerbLeave, Now: base, At: 2})
	require.ErrorIs(t, err, redisstore.ErrNotReplicated, "a leaving")
	require.True(t, d.Allowed)
}
