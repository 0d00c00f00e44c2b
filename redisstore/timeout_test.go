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
// loaded machine, where a goroutine can wait 100 ms and more for a core.
// A call that missed its deadline would return far later: with the
// settings of these tests, at go-redis's read timeout (5 s); without a
// deadline, go-redis's own defaults (that read timeout, 3 retries) would
// keep it waiting for over 20 s.
const stallSlack = 2 * time.Second

// patientTimeout is the timeout of a limiter that shares the stalled
// server's store and client, for the calls that must not time out on a
// loaded machine (loading the script, the first decision after the server
// resumes), and to show a caller's earlier deadline winning over it.
const patientTimeout = 10 * time.Second

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
		outcomes = map[string]int{}
	)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	observer := sluice.WithObserver(func(_ context.Context, e sluice.Event) {
		mu.Lock()
		defer mu.Unlock()
		outcomes[e.Outcome()]++
	})
	lim, err := sluice.NewGCRA(sluice.PerSecond(1000), 1000, sluice.WithStore(st), sluice.WithTimeout(stallTimeout), observer)
	require.NoError(t, err)
	patient, err := sluice.NewGCRA(sluice.PerSecond(1000), 1000, sluice.WithStore(st), sluice.WithTimeout(patientTimeout), observer)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = patient.Allow(ctx, "k", 1) // the script is loaded, a connection open
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
	// An earlier deadline of the caller's wins over the limiter's timeout:
	// the call returns at the caller's deadline, give or take what a loaded
	// machine adds, and far from the limiter's timeout.
	begin := time.Now()
	short, cancel := context.WithTimeout(ctx, stallTimeout)
	defer cancel()
	_, err = patient.Allow(short, "k", 1)
	elapsed := time.Since(begin)
	require.ErrorIs(t, err, sluice.ErrTimeout)
	require.GreaterOrEqual(t, elapsed, stallTimeout, "returned before the caller's deadline")
	require.Less(t, elapsed, stallTimeout+stallSlack, "the caller's deadline was ignored")

	srv.Resume(t)
	d, err := patient.Allow(ctx, "k", 1)
	require.NoError(t, err, "the store recovers by itself")
	require.True(t, d.Allowed)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]int{"allowed": 2, "timeout": callers + 1}, outcomes)
}

func TestStalledServerHoldsACallWithoutTheTimeout(t *testing.T) {
	// Why ContextTimeoutEnabled matters: unset, go-redis waits on the
	// socket for its own ReadTimeout whatever the context says, and only
	// its retry, which sleeps on the context, stops at the deadline.
	srv := testserver.StartRedis(t)
	const readTimeout = 100 * time.Millisecond
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: readTimeout, MaxRetries: 2, MinRetryBackoff: -1})
	t.Cleanup(func() { c.Close() })
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	lim, err := sluice.NewGCRA(sluice.PerSecond(1000), 1000, sluice.WithStore(st), sluice.WithTimeout(readTimeout/4))
	require.NoError(t, err)
	ctx := context.Background()
	// The script is loaded and a connection open by a limiter without a
	// timeout: dialing and loading the script within 25 ms would be a race
	// on a loaded machine.
	untimed, err := sluice.NewGCRA(sluice.PerSecond(1000), 1000, sluice.WithStore(st))
	require.NoError(t, err)
	_, err = untimed.Allow(ctx, "k", 1)
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
