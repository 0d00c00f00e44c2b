package redisstore_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/redisstore"
	"github.com/sluice-go/sluice/storetest"
)

// TestBatchDecidesAsStepDoes sends batches of requests on a few keys of
// every algorithm, several requests per key in one batch, and requires
// each result to be Params.Step's decision on that key's state, bit for
// bit, in the order the batch gives: admissions, checks, partial grants,
// reservations and the cancels of reservations booked earlier in the
// same batch, and leases and their releases and extensions. On one
// server, and through a Cluster client, which splits the pipeline by
// node.
func TestBatchDecidesAsStepDoes(t *testing.T) {
	t.Run("single", func(t *testing.T) {
		batchesDecideAsStepDoes(t, newClient(t, testserver.StartRedis(t).Addr))
	})
	t.Run("cluster", func(t *testing.T) {
		srv := testserver.StartRedisCluster(t)
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr}, ContextTimeoutEnabled: true})
		t.Cleanup(func() { c.Close() })
		batchesDecideAsStepDoes(t, c)
	})
}

func batchesDecideAsStepDoes(t *testing.T, c redis.UniversalClient) {
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	algorithms := storetest.Algorithms()
	rng := rand.New(rand.NewPCG(7, 11))
	states := map[string]engine.State{}
	booked := map[string][]engine.Op{} // each key's reservations and leases, as the cancels that give them back
	now := base
	waited, givenBack, leased := 0, 0, 0
	for batch := range 30 {
		// The specification decides each request as it is drawn, so that
		// a cancel can name a reservation booked earlier in the batch.
		reqs := make([]redisstore.Request, 1+rng.IntN(60))
		wants := make([]engine.Decision, len(reqs))
		for i := range reqs {
			a := rng.IntN(len(algorithms))
			p := &algorithms[a]
			now += rng.Int64N(p.Interval / 4)
			key := fmt.Sprintf("%d.%d", a, rng.IntN(3))
			op := batchOp(rng, p, now, booked[key])
			next, want, err := p.Step(cloneState(states[key]), op)
			require.NoError(t, err)
			if p.Records(op.Verb, &want) {
				states[key] = next
			}
			if want.At != 0 { // a reservation that waits, or a lease taken or extended
				booked[key] = append(booked[key], engine.Op{Verb: engine.VerbCancel, Cost: op.Cost, At: want.At})
				if op.Verb == engine.VerbReserve {
					waited++
				} else {
					leased++
				}
			}
			if (op.Verb == engine.VerbCancel || op.Verb == engine.VerbExtend) && want.Allowed {
				givenBack++
			}
			reqs[i], wants[i] = redisstore.Request{Key: key, Params: p, Op: op}, want
		}
		results := st.ApplyBatch(t.Context(), reqs)
		require.Len(t, results, len(reqs))
		for i, r := range reqs {
			where := fmt.Sprintf("batch %d request %d: %+v", batch, i, r)
			require.NoError(t, results[i].Err, where)
			storetest.RequireIdenticalDecision(t, wants[i], results[i].Decision, where)
		}
	}
	require.Positive(t, waited, "some reservations wait for their turn")
	require.Positive(t, leased, "some leases are taken or extended")
	require.Positive(t, givenBack, "some cancels give a turn back, some releases and extensions find their lease")
}

// batchOp draws a request of a batch: mostly admissions, with checks,
// partial grants, for the algorithms that book ahead, reservations and
// cancels of the latest booking or of any, and for the concurrency limit,
// which grants no part of a cost, releases and extensions of the latest
// lease or of any.
func batchOp(rng *rand.Rand, p *engine.Params, now int64, booked []engine.Op) engine.Op {
	leases := p.Kind == engine.KindConcurrency
	op := engine.Op{Verb: engine.VerbAllow, Cost: math.Round(rng.Float64()*p.Limit*100) / 100, Now: now}
	switch r := rng.IntN(10); {
	case r < 2:
		op.Verb = engine.VerbCheck
	case r < 3 && !leases:
		op.Verb, op.Cost = engine.VerbAtMost, op.Cost*2
	case r < 5 && p.Reservable():
		op.Verb, op.MaxDelay = engine.VerbReserve, rng.Int64N(2*p.Interval*int64(math.Ceil(p.Limit)))
	case r < 6 && len(booked) > 0:
		op = booked[len(booked)-1]
		if rng.IntN(3) == 0 {
			op = booked[rng.IntN(len(booked))]
		}
		if leases && rng.IntN(3) == 0 {
			op.Verb = engine.VerbExtend
		}
		op.Now = now
	}
	return op
}

// TestBatchSurvivesFunctionFlush empties the server's functions between
// batches that use every algorithm: the requests that found the library
// missing are sent again once it is loaded, and each runs exactly once.
func TestBatchSurvivesFunctionFlush(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	algorithms := storetest.Algorithms()
	states := make([]engine.State, len(algorithms)) // as Step leaves each key
	for round := range 3 {
		require.NoError(t, c.FunctionFlush(t.Context()).Err())
		reqs := make([]redisstore.Request, 0, 2*len(algorithms))
		var wants []engine.Decision
		for a, p := range algorithms {
			for range 2 {
				reqs = append(reqs, redisstore.Request{Key: fmt.Sprint(a), Params: &algorithms[a], Op: allow(0.25, base)})
				var want engine.Decision
				states[a], want, _ = p.Step(states[a], allow(0.25, base))
				wants = append(wants, want)
			}
		}
		for i, r := range st.ApplyBatch(t.Context(), reqs) {
			require.NoError(t, r.Err, "round %d request %d", round, i)
			// Each admitted but the concurrency limit's beyond MaxEntries
			// leases.
			storetest.RequireIdenticalDecision(t, wants[i], r.Decision, fmt.Sprintf("round %d request %d", round, i))
		}
	}
	for a, p := range algorithms {
		var s engine.State
		for range 6 {
			s, _, _ = p.Step(s, allow(0.25, base))
		}
		check := engine.Op{Verb: engine.VerbCheck, Now: base}
		_, want, _ := p.Step(s, check)
		got, err := st.Apply(t.Context(), fmt.Sprint(a), &p, check)
		require.NoError(t, err)
		require.Equal(t, want, got, "%v: six requests of 0.25, each recorded once", p)
	}
}

// TestBatchRefusesInvalidRequestsAlone mixes invalid requests into a
// batch: each gets the error Apply gives it, and the valid ones are
// decided.
func TestBatchRefusesInvalidRequestsAlone(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	gcra := engine.Params{Kind: engine.KindGCRA, Limit: 2, Interval: int64(time.Second)}
	tests := []struct {
		req  redisstore.Request
		want error
	}{
		{redisstore.Request{Key: "a", Params: &gcra, Op: allow(1, base)}, nil},
		{redisstore.Request{Key: "a", Params: nil, Op: allow(1, base)}, sluice.ErrInvalidConfig},
		{redisstore.Request{Key: "a", Params: &engine.Params{Kind: engine.KindGCRA}, Op: allow(1, base)}, sluice.ErrInvalidConfig},
		{redisstore.Request{Key: "a", Params: &gcra, Op: allow(math.NaN(), base)}, sluice.ErrInvalidCost},
		{redisstore.Request{Key: "a", Params: &gcra, Op: allow(3, base)}, sluice.ErrCostExceedsLimit},
		{redisstore.Request{Key: "a", Params: &gcra, Op: allow(1, -1)}, sluice.ErrTimeOutOfRange},
		{redisstore.Request{Key: "a", Params: &gcra, Op: allow(1, base)}, nil},
	}
	reqs := make([]redisstore.Request, len(tests))
	for i, tt := range tests {
		reqs[i] = tt.req
	}
	results := st.ApplyBatch(t.Context(), reqs)
	for i, tt := range tests {
		if tt.want == nil {
			require.NoError(t, results[i].Err, "request %d", i)
			require.True(t, results[i].Decision.Allowed, "request %d", i)
			continue
		}
		require.ErrorIs(t, results[i].Err, tt.want, "request %d", i)
		_, applyErr := st.Apply(t.Context(), tt.req.Key, tt.req.Params, tt.req.Op)
		require.Equal(t, applyErr.Error(), results[i].Err.Error(), "request %d: Apply's error", i)
	}
	require.Empty(t, st.ApplyBatch(t.Context(), nil))
}

// TestBatchFailsEveryRequestWhenRedisIsDown stops the server: every valid
// request of a batch gets the round trip's error, within the context's
// deadline, and the same store works again once the server is back.
func TestBatchFailsEveryRequestWhenRedisIsDown(t *testing.T) {
	srv := testserver.StartRedis(t)
	c := newClient(t, srv.Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	gcra := engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: int64(time.Minute)}
	reqs := []redisstore.Request{
		{Key: "a", Params: &gcra, Op: allow(1, base)},
		{Key: "b", Params: &gcra, Op: allow(9, base)},
		{Key: "c", Params: &gcra, Op: allow(1, base)},
	}
	srv.Stop(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	results := st.ApplyBatch(ctx, reqs)
	require.Error(t, results[0].Err)
	require.ErrorIs(t, results[1].Err, sluice.ErrCostExceedsLimit)
	require.Error(t, results[2].Err)
	require.ErrorContains(t, results[2].Err, `key "c"`)

	srv.Start(t)
	for i, r := range st.ApplyBatch(t.Context(), []redisstore.Request{reqs[0], reqs[2]}) {
		require.NoError(t, r.Err, "request %d", i)
		require.True(t, r.Decision.Allowed)
	}
}
