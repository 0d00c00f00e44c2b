package storetest

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
)

// RunLeaseHolders has holders goroutines each wait for a lease of a
// concurrency limit of 3 on one key of st (sluice.Limiter.Acquire), hold
// it while they yield, and release it, and requires that no more than 3
// ever held one at once, as the holders themselves count: each marks its
// own start and end, so that a store that admits a fourth lease fails
// even if it reports its own count right. Every holder gets its lease.
// Waiters poll every few milliseconds, so that a store that does not tell
// of releases ([engine.ReleaseWatcher]) is tested too.
func RunLeaseHolders(t *testing.T, st engine.Store, holders int) {
	const limit = 3
	lim, err := sluice.NewConcurrencyLimit(limit, time.Minute, sluice.WithStore(st), sluice.WithLeasePoll(5*time.Millisecond))
	require.NoError(t, err)
	key := uniquePrefix() + "holders"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var inFlight, most, done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, holders)
	for range holders {
		wg.Go(func() {
			lease, err := lim.Acquire(ctx, key, 1)
			if err != nil {
				errs <- err
				return
			}
			n := inFlight.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			for range 3 {
				runtime.Gosched() // let the others run while held
			}
			inFlight.Add(-1)
			if err := lease.Release(ctx); err != nil {
				errs <- err
				return
			}
			done.Add(1)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int64(holders), done.Load(), "every holder got its lease")
	require.LessOrEqual(t, most.Load(), int64(limit), "never more than the limit at once")
	require.Positive(t, most.Load())
}
