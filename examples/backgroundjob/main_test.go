package main

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// In a synctest bubble the system clock is simulated: time moves only when
// every goroutine waits, so the workers' sleeps take no real time and the
// API sees the exact instants the limiter chose.

// turn is the pace's emission interval: the time between two turns.
const turn = paceWindow / apiLimit

// newTestPool returns workers paced on the in-memory store against a fresh
// simulated API, writing their progress to out. Call it inside a bubble.
func newTestPool(t *testing.T, workers int, out *strings.Builder) (*pool, *thirdPartyAPI) {
	t.Helper()
	pace, err := newPace()
	require.NoError(t, err)
	t.Cleanup(func() { pace.Close() })
	a := newAPI()
	return &pool{pace: pace, api: a, workers: workers, out: out}, a
}

// requireCallsAtTheirTurns requires that calls, in the order they were
// made, were jobs calls made exactly at the turns booked for them, one
// every turn from the first: each booking took the next turn, and workers
// acted in the order they booked.
func requireCallsAtTheirTurns(t *testing.T, calls []call, jobs int) {
	t.Helper()
	require.Len(t, calls, jobs)
	for i, c := range calls {
		require.Equal(t, time.Duration(i)*turn, c.acted, "call %d (job %d, worker %d) at turn %d", i, c.job, c.worker, i)
		require.Equal(t, c.booked, c.acted, "call %d (job %d, worker %d) at its booked turn", i, c.job, c.worker)
	}
}

func TestWorkersCallInBookingOrderOneTurnApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out strings.Builder
		p, api := newTestPool(t, 4, &out)

		start := time.Now()
		require.NoError(t, p.drain(t.Context(), 20))

		requireCallsAtTheirTurns(t, p.calls, 20)
		calls, refused, busiest := api.stats()
		require.Equal(t, 20, calls)
		require.Zero(t, refused)
		require.Equal(t, apiLimit, busiest, "paced just under the limit, never over it")
		// The last call is made at the 19th turn, 3.99 s, and answered
		// 300 ms later.
		require.Equal(t, 19*turn+apiLatency, time.Since(start))
		require.Equal(t, 4290*time.Millisecond, time.Since(start))
		require.Equal(t, 20, strings.Count(out.String(), "books the turn"))
		require.Equal(t, 20, strings.Count(out.String(), "calls for job"))
		require.Contains(t, out.String(), "   210ms  worker ")
	})
}

func TestOneWorkerIsPacedByTheAPIWhenSlowerThanTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, api := newTestPool(t, 1, &strings.Builder{})

		start := time.Now()
		require.NoError(t, p.drain(t.Context(), 5))

		calls, refused, busiest := api.stats()
		require.Equal(t, 5, calls)
		require.Zero(t, refused)
		require.Equal(t, 4, busiest, "one call per 300 ms")
		require.Equal(t, 1500*time.Millisecond, time.Since(start))
		for i, c := range p.calls {
			require.Equal(t, time.Duration(i)*apiLatency, c.acted, "each call as soon as the previous one is answered")
			require.Equal(t, c.booked, c.acted)
		}
	})
}

func TestDrainStopsWhenTheContextEndsAndGivesItsTurnBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, api := newTestPool(t, 2, &strings.Builder{})

		ctx, cancel := context.WithTimeout(t.Context(), 900*time.Millisecond)
		defer cancel()
		err := p.drain(ctx, 100)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		calls, refused, _ := api.stats()
		require.Equal(t, 5, calls, "calls at 0, 210, 420, 630 and 840 ms; the turn at 1050 ms was being waited for")
		require.Zero(t, refused)

		// The worker waiting for the turn at 1050 ms gave it back: the
		// next booking, at 900 ms, takes it.
		require.Equal(t, 900*time.Millisecond, p.elapsed())
		next, err := p.pace.Reserve(t.Context(), paceKey, 1, maxWait)
		require.NoError(t, err)
		require.Equal(t, 5*turn-900*time.Millisecond, next.Delay)
	})
}
