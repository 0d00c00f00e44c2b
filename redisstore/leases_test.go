package redisstore_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/redisstore"
	"github.com/sluice-go/sluice/storetest"
)

// twoStores returns two stores on one server, each with a client of its
// own, that share their keys: two processes of one application.
func twoStores(t *testing.T, addr string, opts ...redisstore.Option) [2]*redisstore.Store {
	t.Helper()
	prefix := fmt.Sprintf("test:%s:%d:", t.Name(), rand.Uint64())
	var stores [2]*redisstore.Store
	for i := range stores {
		st, err := redisstore.New(newClient(t, addr), append([]redisstore.Option{redisstore.WithPrefix(prefix)}, opts...)...)
		require.NoError(t, err)
		stores[i] = st
	}
	return stores
}

// TestLeaseReleasedOnOneClientFreesTheSlotForAnother takes the leases of
// a concurrency limit through one store and releases or extends them
// through another, as two processes sharing the limit do: a lease's
// identity, its Decision.At, is all a process needs to hand it on. Each
// decision is Params.Step's, bit for bit.
func TestLeaseReleasedOnOneClientFreesTheSlotForAnother(t *testing.T) {
	stores := twoStores(t, testserver.StartRedis(t).Addr, redisstore.WithCallerClock(testSkew))
	p := engine.Params{Kind: engine.KindConcurrency, Limit: 2, Interval: int64(time.Minute), MaxEntries: 2}
	const (
		take    = engine.VerbAllow
		release = engine.VerbCancel
		extend  = engine.VerbExtend
	)
	type step struct {
		store   int           // the store that decides: 0 or 1
		verb    engine.Verb   // take a lease, or release or extend one
		lease   int           // for a release or an extension, the step whose decision gave the lease its identity
		at      time.Duration // after the first step
		allowed bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"ReleaseFreesTheSlot", []step{
			{0, take, 0, 0, true},
			{0, take, 0, 0, true},
			{1, take, 0, time.Second, false}, // both slots are held
			{1, release, 0, 2 * time.Second, true},
			{1, take, 0, 3 * time.Second, true},
			{1, take, 0, 3 * time.Second, false},
		}},
		{"SecondReleaseFreesNothingMore", []step{
			{0, take, 0, 0, true},
			{0, take, 0, 0, true},
			{1, release, 0, time.Second, true},
			{0, release, 0, 2 * time.Second, false}, // released already
			{1, take, 0, 3 * time.Second, true},
			{0, take, 0, 3 * time.Second, false},
		}},
		{"ExtensionRenamesTheLease", []step{
			{0, take, 0, 0, true},
			{0, take, 0, 0, true},
			{1, extend, 0, 10 * time.Second, true},   // lease 0, named by step 2 from now on
			{0, release, 0, 11 * time.Second, false}, // its old identity names no lease
			{1, take, 0, 12 * time.Second, false},
			{0, release, 2, 13 * time.Second, true},
			{1, take, 0, 14 * time.Second, true},
		}},
		{"ExtensionOutlivesTheTimeToLive", []step{
			{0, take, 0, 0, true},
			{1, extend, 0, 50 * time.Second, true},
			{0, take, 0, time.Minute, true},
			{1, take, 0, time.Minute, false}, // the extended lease still holds a slot
			{1, extend, 2, 100 * time.Second, true},
		}},
		{"ExpiredLeaseFreesItsSlotByItself", []step{
			{0, take, 0, 0, true},
			{0, take, 0, 30 * time.Second, true},
			{1, take, 0, time.Minute - 1, false},
			{1, take, 0, time.Minute, true},         // the first lease expired
			{0, release, 0, time.Minute + 1, false}, // a release after expiry changes nothing
			{0, extend, 0, time.Minute + 2, false},  // nor does an extension
			{1, take, 0, time.Minute + 3, false},    // full: step 3 took the expired lease's slot
			{1, release, 3, time.Minute + 4, true},  // the one that took it hands it back
			{0, take, 0, time.Minute + 5, true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s engine.State
			decided := make([]engine.Decision, len(tt.steps))
			for i, st := range tt.steps {
				op := engine.Op{Verb: st.verb, Cost: 1, Now: base + int64(st.at)}
				if st.verb != take {
					op.At = decided[st.lease].At
					require.NotZero(t, op.At, "step %d names a lease", i)
				}
				next, want, err := p.Step(s, op)
				require.NoError(t, err)
				got, err := stores[st.store].Apply(t.Context(), tt.name, &p, op)
				require.NoError(t, err)
				where := fmt.Sprintf("step %d: store %d: %+v", i, st.store, op)
				storetest.RequireIdenticalDecision(t, want, got, where)
				require.Equal(t, st.allowed, got.Allowed, where)
				s, decided[i] = next, got
			}
		})
	}
}

// TestServerClockLeaseIsNamedOnTheServersClock takes a lease with the
// server's clock: its identity is an instant on that clock, a time to
// live after the decision, which the other store releases as it is.
func TestServerClockLeaseIsNamedOnTheServersClock(t *testing.T) {
	srv := testserver.StartRedis(t)
	c := newClient(t, srv.Addr)
	stores := twoStores(t, srv.Addr)
	ctx := t.Context()
	p := engine.Params{Kind: engine.KindConcurrency, Limit: 1, Interval: int64(time.Hour), MaxEntries: 1}
	before, err := c.Time(ctx).Result()
	require.NoError(t, err)
	lease, err := stores[0].Apply(ctx, "k", &p, engine.Op{Verb: engine.VerbAllow, Cost: 1})
	require.NoError(t, err)
	after, err := c.Time(ctx).Result()
	require.NoError(t, err)
	require.True(t, lease.Allowed)
	require.Zero(t, lease.Delay)
	require.GreaterOrEqual(t, lease.At, before.Add(time.Hour).UnixNano())
	require.LessOrEqual(t, lease.At, after.Add(time.Hour).UnixNano())

	d, err := stores[1].Apply(ctx, "k", &p, engine.Op{Verb: engine.VerbAllow, Cost: 1})
	require.NoError(t, err)
	require.False(t, d.Allowed, "the one slot is held")
	d, err = stores[1].Apply(ctx, "k", &p, engine.Op{Verb: engine.VerbCancel, Cost: 1, At: lease.At})
	require.NoError(t, err)
	require.True(t, d.Allowed, "released")
	d, err = stores[1].Apply(ctx, "k", &p, engine.Op{Verb: engine.VerbAllow, Cost: 1})
	require.NoError(t, err)
	require.True(t, d.Allowed, "the slot is free again")
	require.Greater(t, d.At, lease.At, "a new lease never takes a released one's identity")
}

// TestLeasesAreStoredAsStepKeepsThem takes, checks, releases and extends
// leases at random, live ones and others (released, expired, extended,
// never taken), from each origin and with a clock that moves on, stands
// still (leases of one instant, a nanosecond apart) and steps back, by
// up to more than 2^53 ns: every decision, and the leases and high-water
// mark stored in Redis after it, are Step's bit for bit.
func TestLeasesAreStoredAsStepKeepsThem(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	for pi, p := range []engine.Params{
		{Kind: engine.KindConcurrency, Limit: 3, Interval: int64(30 * time.Second), MaxEntries: 3},
		{Kind: engine.KindConcurrency, Limit: 2.5, Interval: int64(7*time.Second) + 1, MaxEntries: 4},
		{Kind: engine.KindConcurrency, Limit: 1e6, Interval: 7, MaxEntries: 5},
		{Kind: engine.KindConcurrency, Limit: 0.75, Interval: 1<<53 - 1, MaxEntries: 2},
	} {
		for oi, origin := range origins {
			t.Run(fmt.Sprintf("%d_from_%d", pi, oi), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(pi), uint64(oi)))
				k := newTwin(t, c, st, p, fmt.Sprintf("leases%d.%d", pi, oi))
				var named []int64 // every lease's identity handed out
				released, extended := 0, 0
				now := origin
				for i := range 200 {
					switch r := rng.IntN(10); {
					case r < 4:
						now += rng.Int64N(p.Interval/2 + 1)
					case r < 5:
						now -= []int64{1, rng.Int64N(p.Interval + 1), 1<<53 + 12345}[rng.IntN(3)]
					}
					now = min(max(now, 0), 1<<62)
					op := engine.Op{Verb: engine.VerbAllow, Now: now}
					op.Cost = min([]float64{0, 0.5, 1, p.Limit / 3, p.Limit, math.Nextafter(p.Limit, 0)}[rng.IntN(6)], p.Limit)
					switch r := rng.IntN(10); {
					case r < 2:
						op.Verb = engine.VerbCheck
					case r < 6 && len(named) > 0:
						op.Verb = []engine.Verb{engine.VerbCancel, engine.VerbExtend}[rng.IntN(2)]
						op.At = named[len(named)-1-rng.IntN(min(len(named), 4))] // mostly a recent one
						if rng.IntN(10) == 0 {
							op.At++ // names no lease, unless the next
						}
					}
					d := k.apply(op, fmt.Sprintf("op %d", i))
					if d.At != 0 {
						named = append(named, d.At)
					}
					switch {
					case op.Verb == engine.VerbCancel && d.Allowed:
						released++
					case op.Verb == engine.VerbExtend && d.Allowed:
						extended++
					}
				}
				require.Positive(t, released, "some releases find their lease")
				require.Positive(t, extended, "some extensions find their lease")
			})
		}
	}
}
