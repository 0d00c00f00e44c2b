package main

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
)

// In a synctest bubble the system clock is simulated: time moves only when
// every goroutine waits, so the workers' sleeps take no real time and the
// API sees the exact instants the limiter chose.

// newTestPool returns workers paced on the in-memory store against a fresh
// simulated API, writing their progress to out. Call it inside a bubble.
func newTestPool(t *testing.T, workers int, out *strings.Builder) (*pool, *thirdPartyAPI) {
	t.Helper()
	pace, err := newPace()
	require.NoError(t, err)
	t.Cleanup(func() { pace.Close() })
	clock := sluice.SystemClock()
	a := newAPI(clock)
	return &pool{pace: pace, api: a, clock: clock, workers: workers, out: out}, a
}

func TestWorkersNeverExceedTheAPILimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out strings.Builder
		p, api := newTestPool(t, 4, &out)

		start := time.Now()
		require.NoError(t, p.drain(t.Context(), 20))

		calls, refused, busiest := api.stats()
		require.Equal(t, 20, calls)
		require.Zero(t, refused)
		require.Equal(t, apiLimit, busiest, "paced at the limit, never over it")
		// The calls start every 200 ms from the first: the last at 3.8 s,
		// answered 300 ms later.
		require.Equal(t, 4100*time.Millisecond, time.Since(start))
		require.Equal(t, 20, strings.Count(out.String(), "done by worker"))
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
	})
}

func TestDrainStopsWhenTheContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, api := newTestPool(t, 2, &strings.Builder{})

		ctx, cancel := context.WithTimeout(t.Context(), 900*time.Millisecond)
		defer cancel()
		err := p.drain(ctx, 100)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		calls, refused, _ := api.stats()
		require.Equal(t, 5, calls, "calls at 0, 200, 400, 600 and 800 ms; the next would be past the deadline")
		require.Zero(t, refused)
	})
}
