package sluice_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
)

// TestLeasesNeverHoldMoreThanTheLimit has 64 goroutines on one key each
// wait for a lease, work, and release it, and counts those in flight as
// the holders themselves see them: start and end of each holder's work,
// not the store's own count.
func TestLeasesNeverHoldMoreThanTheLimit(t *testing.T) {
	for _, limit := range []float64{1, 2, 5} {
		t.Run("", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim, err := sluice.NewConcurrencyLimit(limit, time.Minute)
				require.NoError(t, err)
				defer lim.Close()
				var inFlight, most, done atomic.Int64
				var wg sync.WaitGroup
				for range 64 {
					wg.Go(func() {
						ctx := context.Background()
						lease, err := lim.Acquire(ctx, "export", 1)
						require.NoError(t, err)
						require.True(t, lease.Allowed)
						n := inFlight.Add(1)
						for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
						}
						time.Sleep(time.Millisecond) // the work, on the bubble's clock
						inFlight.Add(-1)
						require.NoError(t, lease.Release(ctx))
						done.Add(1)
					})
				}
				wg.Wait()
				require.Equal(t, int64(64), done.Load())
				require.Equal(t, int64(limit), most.Load(), "as many at once as the limit, never more")
			})
		})
	}
}

// TestWaitersAcquireInArrivalOrder lines up waiters one after another
// behind a held slot and requires that they get it in the order they
// came, each as the one before releases it, a large lease among them
// included.
func TestWaitersAcquireInArrivalOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		lim, err := sluice.NewConcurrencyLimit(2, time.Hour)
		require.NoError(t, err)
		defer lim.Close()
		first, err := lim.TryAcquire(ctx, "k", 2)
		require.NoError(t, err)
		require.True(t, first.Allowed)

		costs := []float64{1, 2, 2, 1}
		order := make(chan int, len(costs))
		leases := make([]sluice.Lease, len(costs))
		for i, cost := range costs {
			go func() {
				lease, err := lim.Acquire(ctx, "k", cost)
				require.NoError(t, err)
				leases[i] = lease
				order <- i
			}()
			synctest.Wait() // waiting, in line, before the next comes
		}
		require.NoError(t, first.Release(ctx))
		requireServedInArrivalOrder(t, order, len(costs), func(i int) error { return leases[i].Release(ctx) })
	})
}

// TestWaiterWhoseContextEndsLeavesTheLine requires that a waiter that
// gives up neither takes a slot nor holds up those behind it.
func TestWaiterWhoseContextEndsLeavesTheLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bg := context.Background()
		lim, err := sluice.NewConcurrencyLimit(1, time.Hour)
		require.NoError(t, err)
		defer lim.Close()
		held, err := lim.TryAcquire(bg, "k", 1)
		require.NoError(t, err)

		ctx, cancel := context.WithCancel(bg)
		gaveUp := make(chan error, 1)
		go func() {
			_, err := lim.Acquire(ctx, "k", 1)
			gaveUp <- err
		}()
		synctest.Wait()
		got := make(chan sluice.Lease, 1)
		go func() {
			lease, err := lim.Acquire(bg, "k", 1)
			require.NoError(t, err)
			got <- lease
		}()
		synctest.Wait()
		cancel()
		require.ErrorIs(t, <-gaveUp, context.Canceled)
		require.NoError(t, held.Release(bg))
		synctest.Wait()
		lease := <-got
		require.True(t, lease.Allowed, "the next in line gets the slot")
	})
}

// TestLeaseOfAHolderThatDiedReturnsAtItsExpiry requires that a slot whose
// holder never releases it comes back by itself when its lease expires,
// and no sooner, waking a waiter then without any release.
func TestLeaseOfAHolderThatDiedReturnsAtItsExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const ttl = 30 * time.Second
		lim, err := sluice.NewConcurrencyLimit(1, ttl, sluice.WithLeasePoll(time.Hour))
		require.NoError(t, err)
		defer lim.Close()
		dead, err := lim.TryAcquire(ctx, "k", 1)
		require.NoError(t, err)
		require.True(t, dead.Allowed)
		begin := time.Now()
		lease, err := lim.Acquire(ctx, "k", 1)
		require.NoError(t, err)
		require.True(t, lease.Allowed)
		require.Equal(t, ttl, time.Since(begin), "granted when the dead holder's lease expired, to the nanosecond")
		require.ErrorIs(t, dead.Release(ctx), sluice.ErrNotHeld, "a release after expiry is harmless and says so")
	})
}

// TestLeasesReleaseAndExtendAsDocumented pins the lease's verbs one by
// one on a fake clock.
func TestLeasesReleaseAndExtendAsDocumented(t *testing.T) {
	ctx := context.Background()
	mock := newMock()
	lim, err := sluice.NewConcurrencyLimit(1, time.Minute, sluice.WithClock(mock))
	require.NoError(t, err)
	defer lim.Close()

	lease, err := lim.TryAcquire(ctx, "k", 1)
	require.NoError(t, err)
	require.True(t, lease.Allowed)
	require.Equal(t, 1.0, lease.Used)
	denied, err := lim.TryAcquire(ctx, "k", 1)
	require.NoError(t, err)
	require.False(t, denied.Allowed, "a denial is a decision, not an error")
	require.Equal(t, time.Minute, denied.RetryAfter)
	require.ErrorIs(t, denied.Release(ctx), sluice.ErrNotHeld, "a lease never granted is not held")

	mock.Add(50 * time.Second)
	require.NoError(t, lease.Extend(ctx))
	mock.Add(50 * time.Second)
	d, err := lim.CanAccept(ctx, "k", 1)
	require.NoError(t, err)
	require.False(t, d.Allowed, "held past its first time to live, once extended")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.NoError(t, lease.Release(cancelled), "a release is made even after its context ended")
	require.ErrorIs(t, lease.Release(ctx), sluice.ErrNotHeld, "releasing twice is harmless and says so")
	require.ErrorIs(t, lease.Extend(ctx), sluice.ErrNotHeld)
	d, err = lim.CanAccept(ctx, "k", 1)
	require.NoError(t, err)
	require.True(t, d.Allowed, "the slot is free again")
}

// TestLeasesAreRefusedWhereTheyDoNotApply pins the errors of leases on a
// rate limiter and of the options and verbs a concurrency limit refuses.
func TestLeasesAreRefusedWhereTheyDoNotApply(t *testing.T) {
	ctx := context.Background()
	gcra, err := sluice.NewGCRA(sluice.PerSecond(1), 1)
	require.NoError(t, err)
	_, err = gcra.TryAcquire(ctx, "k", 1)
	require.ErrorIs(t, err, sluice.ErrUnsupported)
	_, err = gcra.Acquire(ctx, "k", 1)
	require.ErrorIs(t, err, sluice.ErrUnsupported)

	for _, opt := range []sluice.Option{sluice.WithPenalty(time.Second), sluice.WithCountDenied(), sluice.WithLeasePoll(0)} {
		_, err := sluice.NewConcurrencyLimit(2, time.Minute, opt)
		require.ErrorIs(t, err, sluice.ErrInvalidConfig)
	}
	_, err = sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithLeasePoll(time.Second))
	require.ErrorIs(t, err, sluice.ErrInvalidConfig)
	_, err = sluice.NewConcurrencyLimit(0, time.Minute)
	require.ErrorIs(t, err, sluice.ErrInvalidConfig)
	_, err = sluice.NewConcurrencyLimit(2, 0)
	require.ErrorIs(t, err, sluice.ErrInvalidConfig)

	lim, err := sluice.NewConcurrencyLimit(2, time.Minute)
	require.NoError(t, err)
	_, err = lim.Reserve(ctx, "k", 1, time.Second)
	require.ErrorIs(t, err, sluice.ErrUnsupported)
	_, err = lim.AllowAtMost(ctx, "k", 1)
	require.ErrorIs(t, err, sluice.ErrUnsupported)
	_, err = lim.TryAcquire(ctx, "k", 3)
	require.ErrorIs(t, err, sluice.ErrCostExceedsLimit)
}

// TestGroupHoldsARateAndAConcurrencyLimitAllOrNothing pins a group of "1
// per second and at most 2 at once": a lease is taken only where the rate
// admits, the rate is spent only where a lease is taken, and a release
// frees the slot but keeps the rate spent.
func TestGroupHoldsARateAndAConcurrencyLimitAllOrNothing(t *testing.T) {
	ctx := context.Background()
	mock := newMock()
	store := sluice.NewMemStore(sluice.MemStoreConfig{})
	defer store.Close()
	rate, err := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithStore(store), sluice.WithClock(mock))
	require.NoError(t, err)
	slots, err := sluice.NewConcurrencyLimit(2, time.Minute, sluice.WithStore(store), sluice.WithClock(mock))
	require.NoError(t, err)
	g, err := sluice.NewGroup(rate, slots)
	require.NoError(t, err)
	keys := []string{"rate:acct", "slots:acct"}

	first, err := g.TryAcquire(ctx, keys, 1)
	require.NoError(t, err)
	require.True(t, first.Allowed)
	tooSoon, err := g.TryAcquire(ctx, keys, 1)
	require.NoError(t, err)
	require.False(t, tooSoon.Allowed, "the rate denies")
	d, err := slots.CanAccept(ctx, keys[1], 0)
	require.NoError(t, err)
	require.Equal(t, 1.0, d.Used, "no lease taken for a request the rate denied")

	mock.Add(time.Second)
	second, err := g.TryAcquire(ctx, keys, 1)
	require.NoError(t, err)
	require.True(t, second.Allowed)
	mock.Add(time.Second)
	full, err := g.TryAcquire(ctx, keys, 1)
	require.NoError(t, err)
	require.False(t, full.Allowed, "two at once already")
	r, err := rate.CanAccept(ctx, keys[0], 1)
	require.NoError(t, err)
	require.True(t, r.Allowed, "nothing spent on the rate for a request the slots denied")

	require.NoError(t, first.Release(ctx))
	require.ErrorIs(t, first.Release(ctx), sluice.ErrNotHeld)
	third, err := g.TryAcquire(ctx, keys, 1)
	require.NoError(t, err)
	require.True(t, third.Allowed, "a slot released, the rate due")
	require.NoError(t, third.Extend(ctx))
	require.NoError(t, second.Release(ctx))
	require.NoError(t, third.Release(ctx))
	d, err = slots.CanAccept(ctx, keys[1], 0)
	require.NoError(t, err)
	require.Zero(t, d.Used)

	_, err = sluice.NewGroup(rate)
	require.NoError(t, err)
	onlyRate, _ := sluice.NewGroup(rate)
	_, err = onlyRate.TryAcquire(ctx, keys[:1], 1)
	require.ErrorIs(t, err, sluice.ErrUnsupported)
}
