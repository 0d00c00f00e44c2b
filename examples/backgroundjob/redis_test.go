package main

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/redisstore"
)

// Two processes, each with its own limiter, Redis client and workers,
// share one pace through Redis: together they call the API no faster than
// one process alone, one turn apart, in the order they booked. The store
// uses the limiters' clock (simulated by the bubble) rather than Redis
// TIME, so that the instants are exact; a goroutine waiting on Redis is
// not idle, so simulated time stands still during each round trip.
func TestProcessesSharingRedisKeepOnePace(t *testing.T) {
	srv := testserver.StartRedis(t)
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		var wg sync.WaitGroup
		errs := make([]error, 2)
		pools := make([]*pool, 2)
		for proc := range pools {
			client := redis.NewClient(&redis.Options{Addr: srv.Addr})
			defer client.Close()
			st, err := sharedStore(client, redisstore.WithCallerClock(time.Minute))
			require.NoError(t, err)
			pace, err := newPace(sluice.WithStore(st))
			require.NoError(t, err)
			defer pace.Close()
			pools[proc] = &pool{pace: pace, api: api, workers: 2, out: &strings.Builder{}}
			wg.Go(func() { errs[proc] = pools[proc].drain(t.Context(), 10) })
		}
		wg.Wait()
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])

		// Both pools began at the same simulated instant, so their
		// calls, merged, are one sequence of turns.
		require.Equal(t, pools[0].start, pools[1].start)
		merged := slices.Concat(pools[0].calls, pools[1].calls)
		slices.SortFunc(merged, func(a, b call) int { return int(a.acted - b.acted) })
		requireCallsAtTheirTurns(t, merged, 20)
		calls, refused, busiest := api.stats()
		require.Equal(t, 20, calls)
		require.Zero(t, refused)
		require.Equal(t, apiLimit, busiest)
	})
}
