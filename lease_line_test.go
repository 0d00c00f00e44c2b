package sluice_test

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
)

// limitersOnOneStore returns n concurrency limits of limit sharing one
// MemStore, as n processes share a remote store, each with its own line
// of callers as far as it knows.
func limitersOnOneStore(t *testing.T, n int, limit float64, opts ...sluice.Option) (*sluice.MemStore, []*sluice.Limiter) {
	st := sluice.NewMemStore(sluice.MemStoreConfig{})
	t.Cleanup(func() { st.Close() })
	lims := make([]*sluice.Limiter, n)
	for i := range lims {
		var err error
		lims[i], err = sluice.NewConcurrencyLimit(limit, time.Hour, append(opts, sluice.WithStore(st))...)
		require.NoError(t, err)
	}
	return st, lims
}

// TestWaitersOfDifferentLimitersAreServedInArrivalOrder has waiters come
// through three limiters that share a store, in turn, and requires that
// the store's line serves them in the order they came, not by limiter.
func TestWaitersOfDifferentLimitersAreServedInArrivalOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		_, lims := limitersOnOneStore(t, 3, 1)
		held, err := lims[0].TryAcquire(ctx, "k", 1)
		require.NoError(t, err)
		require.True(t, held.Allowed)

		const waiters = 9
		order := make(chan int, waiters)
		leases := make([]sluice.Lease, waiters)
		for i := range waiters {
			go func() {
				lease, err := lims[(i*2)%3].Acquire(ctx, "k", 1) // limiters 0, 2, 1, 0, 2, ...
				require.NoError(t, err)
				leases[i] = lease
				order <- i
			}()
			synctest.Wait() // in line before the next comes
		}
		require.NoError(t, held.Release(ctx))
		requireServedInArrivalOrder(t, order, waiters, func(i int) error { return leases[i].Release(ctx) })
	})
}

// requireServedInArrivalOrder requires, in a synctest bubble, that
// waiters who came in the order of their indexes, each of which tells its
// index on order once served, are served one at a time in that order,
// giving each one's slot back with release.
func requireServedInArrivalOrder(t *testing.T, order <-chan int, waiters int, release func(i int) error) {
	t.Helper()
	for want := range waiters {
		synctest.Wait()
		got := <-order
		require.Equal(t, want, got, "served in arrival order")
		synctest.Wait()
		require.Empty(t, order, "one at a time: the next waits for a slot")
		require.NoError(t, release(got))
	}
}

// TestTryAcquireDoesNotPassWaiters requires that a lease that would fit
// is denied to a caller that does not wait while another waits for a
// larger one, so that the larger one is not passed over for ever.
func TestTryAcquireDoesNotPassWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		_, lims := limitersOnOneStore(t, 2, 2)
		a, _ := lims[0].TryAcquire(ctx, "k", 1)
		b, _ := lims[0].TryAcquire(ctx, "k", 1)
		require.True(t, a.Allowed && b.Allowed)
		got := make(chan sluice.Lease, 1)
		go func() {
			lease, err := lims[1].Acquire(ctx, "k", 2)
			require.NoError(t, err)
			got <- lease
		}()
		synctest.Wait()
		require.NoError(t, a.Release(ctx))
		synctest.Wait()
		require.Empty(t, got, "one slot free: not enough for the waiter")
		small, err := lims[0].TryAcquire(ctx, "k", 1)
		require.NoError(t, err)
		require.False(t, small.Allowed, "a free slot, but a waiter is first")
		require.Positive(t, small.RetryAfter)
		require.NoError(t, b.Release(ctx))
		synctest.Wait()
		require.True(t, (<-got).Allowed, "the waiter is served")
	})
}

// TestADeadWaiterHoldsTheLineForItsPatienceAtMost puts in line a waiter
// that never asks again (a process killed while waiting) and requires
// that the waiter behind it is served once the dead one's patience has
// passed, not later, and not before.
func TestADeadWaiterHoldsTheLineForItsPatienceAtMost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st, lims := limitersOnOneStore(t, 1, 1)
		lim := lims[0]
		held, _ := lim.TryAcquire(ctx, "k", 1)
		p, _ := lim.Params()
		const patience = 3 * time.Second
		dead, err := st.Apply(ctx, "k", &p, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: time.Now().UnixNano(), MaxDelay: int64(patience)})
		require.NoError(t, err)
		require.False(t, dead.Allowed)
		require.Equal(t, int64(1), dead.At, "in line, first")

		began := time.Now()
		got := make(chan time.Duration, 1)
		go func() {
			lease, err := lim.Acquire(ctx, "k", 1)
			require.NoError(t, err)
			require.True(t, lease.Allowed)
			got <- time.Since(began)
		}()
		synctest.Wait()
		require.NoError(t, held.Release(ctx))
		require.Equal(t, patience, <-got, "served when the dead waiter's place lapsed")
	})
}

// TestGroupWaitersAreServedInArrivalOrder has group Acquires, "1 per
// millisecond and 1 at once", wait behind a lease held, and requires that
// they take the concurrency limit's line in the order they came.
func TestGroupWaitersAreServedInArrivalOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st, lims := limitersOnOneStore(t, 1, 1)
		rate, err := sluice.NewGCRA(sluice.PerSecond(1000), 1, sluice.WithStore(st))
		require.NoError(t, err)
		g, err := sluice.NewGroup(rate, lims[0])
		require.NoError(t, err)
		held, err := lims[0].TryAcquire(ctx, "c", 1)
		require.NoError(t, err)

		const waiters = 5
		order := make(chan int, waiters)
		leases := make([]sluice.GroupLease, waiters)
		for i := range waiters {
			go func() {
				lease, err := g.Acquire(ctx, []string{"r", "c"}, 1)
				require.NoError(t, err)
				leases[i] = lease
				order <- i
			}()
			synctest.Wait()
		}
		require.NoError(t, held.Release(ctx))
		requireServedInArrivalOrder(t, order, waiters, func(i int) error { return leases[i].Release(ctx) })
	})
}

// TestWaitersOfAnyPollAndTimeoutWaitInLine requires that a lease poll
// and a timeout as long as a Duration holds still give a waiter a
// patience the store takes: a day at most.
func TestWaitersOfAnyPollAndTimeoutWaitInLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		_, lims := limitersOnOneStore(t, 1, 1, sluice.WithLeasePoll(math.MaxInt64), sluice.WithTimeout(math.MaxInt64))
		held, err := lims[0].TryAcquire(ctx, "k", 1)
		require.NoError(t, err)
		got := make(chan error, 1)
		go func() {
			_, err := lims[0].Acquire(ctx, "k", 1)
			got <- err
		}()
		synctest.Wait()
		require.NoError(t, held.Release(ctx))
		require.NoError(t, <-got, "in line, and served")
	})
}

// TestAWaiterServedWithRoomLeftWakesTheNext frees room for two waiters in
// one release and requires both served at once, alone and in a group:
// whichever asks first, the second is woken by the first one's service
// if not by the release, rather than by its poll.
func TestAWaiterServedWithRoomLeftWakesTheNext(t *testing.T) {
	for _, grouped := range []bool{false, true} {
		t.Run(map[bool]string{false: "alone", true: "in a group"}[grouped], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				st, lims := limitersOnOneStore(t, 1, 2)
				rate, err := sluice.NewGCRA(sluice.PerSecond(1000), 10, sluice.WithStore(st))
				require.NoError(t, err)
				g, err := sluice.NewGroup(rate, lims[0])
				require.NoError(t, err)
				acquire := func() error {
					if grouped {
						_, err := g.Acquire(ctx, []string{"r", "k"}, 1)
						return err
					}
					_, err := lims[0].Acquire(ctx, "k", 1)
					return err
				}
				held, err := lims[0].TryAcquire(ctx, "k", 2)
				require.NoError(t, err)
				began := time.Now()
				served := make(chan time.Duration, 2)
				for range 2 {
					go func() {
						require.NoError(t, acquire())
						served <- time.Since(began)
					}()
					synctest.Wait()
				}
				require.NoError(t, held.Release(ctx))
				require.Zero(t, <-served)
				require.Zero(t, <-served, "the second at once, not at its poll")
			})
		})
	}
}
