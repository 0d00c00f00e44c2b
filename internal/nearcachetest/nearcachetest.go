// Package nearcachetest checks the near-cache's guarantee on any store:
// random traces decided by the store alone and by the near-cache over
// another instance of it give the same decisions.
package nearcachetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/nearcache"
)

// params are the algorithms the traces run, small enough that a trace
// hits their limits often.
var params = []engine.Params{
	{Kind: engine.KindLeakyBucket, Limit: 4, Interval: int64(time.Second), Amount: 2},
	{Kind: engine.KindGCRA, Limit: 3, Interval: int64(250 * time.Millisecond)},
	{Kind: engine.KindTokenBucket, Limit: 5, Interval: int64(time.Second), Amount: 3},
	{Kind: engine.KindTokenBucket, Limit: 3, Interval: int64(time.Second), Amount: 2, IntervalRefill: true},
	{Kind: engine.KindFixedWindow, Limit: 4, Interval: int64(time.Second)},
	{Kind: engine.KindFixedWindow, Limit: 3, Interval: int64(time.Second), Anchored: true},
	{Kind: engine.KindSlidingLog, Limit: 4, Interval: int64(time.Second), MaxEntries: 8},
	{Kind: engine.KindSlidingCounter, Limit: 5, Interval: int64(time.Second)},
}

// Start is the traces' first instant: a realistic time since the epoch.
var Start = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC).UnixNano()

// Compare replays a random trace of steps per algorithm, from seed, on
// the store alone and on a near-cache over remote, at the same caller's
// times, and fails t unless both decide every request alike. alone and remote
// must be two empty instances of one store, deciding on the caller's clock
// (Op.Now). It returns the cache's counts.
//
// Requests come several times faster than the limits allow, so that most
// of them are denied, on a few keys, with costs of several sizes; some are
// CanAccept, partial grants, reservations and cancels of them, and a few
// Resets go through the cache (and to alone).
func Compare(t *testing.T, alone, remote engine.Store, seed uint64, steps int) nearcache.Stats {
	t.Helper()
	nc, err := nearcache.New(remote, nearcache.Config{})
	require.NoError(t, err)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for pi, p := range params {
		booked := map[string][]engine.Op{} // cancels of each key's reservations
		now := Start
		step := p.Interval / int64(p.Limit) / 4 // requests come several times faster than allowed
		for i := range steps {
			now += rng.Int64N(step + 1)
			key := fmt.Sprintf("%d:%d", pi, rng.IntN(3))
			costs := []float64{1, 1, 1, 0.5, 2, p.Limit}
			op := engine.Op{Verb: engine.VerbAllow, Cost: costs[rng.IntN(len(costs))], Now: now}
			switch r := rng.IntN(100); {
			case r < 3:
				require.NoError(t, alone.Reset(ctx, key))
				require.NoError(t, nc.Reset(ctx, key))
				continue
			case r < 15:
				op.Verb = engine.VerbCheck
			case r < 20:
				op.Verb, op.Cost = engine.VerbAtMost, 2*p.Limit*rng.Float64()
			case r < 28 && p.Reservable():
				op.Verb, op.MaxDelay = engine.VerbReserve, rng.Int64N(2*p.Interval)
			case r < 34 && len(booked[key]) > 0:
				op = booked[key][rng.IntN(len(booked[key]))]
				op.Now = now
			case r < 40 && p.Reservable():
				op.Verb = engine.VerbCharge + engine.Verb(rng.IntN(2)) // or a refund
			}
			before := nc.Stats().Local
			want, err := alone.Apply(ctx, key, &p, op)
			require.NoError(t, err)
			got, err := nc.Apply(ctx, key, &p, op)
			require.NoError(t, err)
			at := fmt.Sprintf("%v, step %d, %v of %v at +%v on %q", p, i, op.Verb, op.Cost, time.Duration(now-Start), key)
			require.Equal(t, want.Allowed, got.Allowed, at)
			if op.Verb == engine.VerbReserve && want.At != 0 {
				booked[key] = append(booked[key], engine.Op{Verb: engine.VerbCancel, Cost: op.Cost, At: want.At})
			}
			if nc.Stats().Local == before {
				require.Equal(t, want, got, "%s: passed to the remote store", at)
				continue
			}
			// A cached denial: due no later than the store's, and with a
			// Remaining the store's has only grown from.
			require.Positive(t, got.RetryAfter, at)
			require.LessOrEqual(t, got.RetryAfter, want.RetryAfter, at)
			require.LessOrEqual(t, got.Remaining, want.Remaining+p.Limit*1e-12, at)
			require.Equal(t, want.Limit, got.Limit, at)
		}
	}
	st := nc.Stats()
	require.Positive(t, st.Local, "the traces exercised the cache")
	return st
}
