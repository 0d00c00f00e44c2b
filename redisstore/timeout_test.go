package redisstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/redisstore"
)

// stallTimeout is the limiters' timeout in the tests of a stalled server:
// long enough for a loaded machine to make a decision in, short enough
// that waiting for several is quick.
const stallTimeout = 200 * time.Millisecond

// stallSlack is how much later than its timeout a call may return on a
// loaded machine. Without a deadline, go-redis's own defaults (a read
// timeout of 5s, 3 retries) would keep a call waiting for over 20s.
const stallSlack = 2 * time.Second

func TestStalledServerGivesTimeoutsAndStoreRecovers(t *testing.T) {
	srv := testserver.StartRedis(t)
	// The settings docs/operations.md recommends: deadlines from the
	// context, a small pool, and no retry of a decision.
	c := redis.NewClient(&redis.Options{
		Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1, PoolSize: 4, PoolTimeout: time.Second,
	})
	t.Cleanup(func() { c.Close() })
	var (
		mu       sync.Mutex
		outcomes = map[sluice.Outcome]int{}
	)
	lim, err := sluice.NewGCRA(sluice.PerSecond(1000), 1000,
		sluice.WithStore(newStore(t, c, redisstore.WithCallerClock(testSkew))), sluice.WithTimeout(stallTimeout),
		sluice.WithObserver(sluice.ObserverFunc(func(_ context.Context, e sluice.Event) {
			mu.Lock()
			defer mu.Unlock()
			outcomes[e.Outcome]++
		})))
	require.NoError(t, err)
	ctx := context.Background()
	_, err = lim.Allow(ctx, "k", 1) // the script is loaded, a connection open
	require.NoError(t, err)

	srv.Pause(t)
	defer srv.Resume(t) // a failed assertion must not leave the server frozen
	// Many more callers than connections: those waiting for a connection
	// give up at the timeout too, rather than piling up.
	const callers = 16
	var wg sync.WaitGroup
	errs := make([]error, callers)
	took := make([]time.Duration, callers)
	for i := range callers {
		wg.Go(func() {
			begin := time.Now()
			_, errs[i] = lim.Allow(ctx, "k", 1)
			took[i] = time.Since(begin)
		})
	}
	wg.Wait()
	for i := range callers {
		require.ErrorIs(t, errs[i], sluice.ErrTimeout, "caller %d", i)
		require.ErrorIs(t, errs[i], context.DeadlineExceeded, "caller %d", i)
		require.GreaterOrEqual(t, took[i], stallTimeout, "caller %d returned before its deadline", i)
		require.Less(t, took[i], stallTimeout+stallSlack, "caller %d", i)
		t.Logf("caller %2d: error after %v", i, took[i].Round(time.Millisecond))
	}
	// An earlier deadline of the caller's wins over the limiter's timeout.
	short, cancel := context.WithTimeout(ctx, stallTimeout/4)
	defer cancel()
	begin := time.Now()
	_, err = lim.Allow(short, "k", 1)
	require.ErrorIs(t, err, sluice.ErrTimeout)
	require.Less(t, time.Since(begin), stallTimeout)

	srv.Resume(t)
	d, err := lim.Allow(ctx, "k", 1)
	require.NoError(t, err, "the store recovers by itself")
	require.True(t, d.Allowed)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[sluice.Outcome]int{sluice.OutcomeAllowed: 2, sluice.OutcomeTimeout: callers + 1}, outcomes)
}

func TestStalledServerHoldsACallWithoutTheTimeout(t *testing.T) {
	// Why ContextTimeoutEnabled matters: unset, go-redis waits on the
	// socket for its own ReadTimeout whatever the context says, and only
	// its retry, which sleeps on the context, stops at the deadline.
	srv := testserver.StartRedis(t)
	const readTimeout = 100 * time.Millisecond
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: readTimeout, MaxRetries: 2, MinRetryBackoff: -1})
	t.Cleanup(func() { c.Close() })
	lim, err := sluice.NewGCRA(sluice.PerSecond(1000), 1000,
		sluice.WithStore(newStore(t, c, redisstore.WithCallerClock(testSkew))), sluice.WithTimeout(readTimeout/4))
	require.NoError(t, err)
	ctx := context.Background()
	_, err = lim.Allow(ctx, "k", 1)
	require.NoError(t, err)

	srv.Pause(t)
	defer srv.Resume(t)
	begin := time.Now()
	_, err = lim.Allow(ctx, "k", 1)
	took := time.Since(begin)
	require.Error(t, err)
	require.GreaterOrEqual(t, took, readTimeout, "the context's deadline was ignored")
	t.Logf("without ContextTimeoutEnabled, a %v timeout returned after %v: %v", readTimeout/4, took.Round(time.Millisecond), err)
}
