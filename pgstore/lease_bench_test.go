package pgstore_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/pgstore"
)

// BenchmarkLeaseHandoff measures the time from a release through one
// store to the lease of a waiter in Acquire through another (another
// pool, as another process would have), on a server the benchmark starts:
// the waiter woken by the release's notification ("wake"), against a
// waiter on a store that tells of no releases, which asks again every
// 10 ms (its lease poll). It reports the median and 99th percentile of
// the handoffs.
func BenchmarkLeaseHandoff(b *testing.B) {
	url := testserver.StartPostgres(b).URL
	for _, mode := range []string{"wake", "poll=10ms"} {
		b.Run("mode="+mode, func(b *testing.B) {
			holderStore, table := newStore(b, newPool(b, url, 2))
			waiterStore, err := pgstore.New(newPool(b, url, 2), pgstore.WithTable(table))
			if err != nil {
				b.Fatal(err)
			}
			closeAfter(b, waiterStore)
			var store sluice.Store = waiterStore
			poll := sluice.DefaultLeasePoll
			if mode != "wake" {
				store, poll = struct{ sluice.Store }{waiterStore}, 10*time.Millisecond // no ReleaseWatcher
			}
			// denied tells of the current waiter's first denial: it is
			// waiting.
			var denied atomic.Pointer[chan struct{}]
			observe := sluice.WithObserver(sluice.ObserverFunc(func(_ context.Context, e sluice.Event) {
				if e.Lease && e.Verb == engine.VerbAllow && !e.Decision.Allowed {
					select {
					case *denied.Load() <- struct{}{}:
					default:
					}
				}
			}))
			holder, err := sluice.NewConcurrencyLimit(1, time.Minute, sluice.WithStore(holderStore))
			if err != nil {
				b.Fatal(err)
			}
			waiter, err := sluice.NewConcurrencyLimit(1, time.Minute, sluice.WithStore(store), sluice.WithLeasePoll(poll), observe)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			handoffs := make([]time.Duration, 0, b.N)
			for b.Loop() {
				held, err := holder.TryAcquire(ctx, "k", 1)
				if err != nil || !held.Allowed {
					b.Fatal(err, held.Allowed)
				}
				waiting := make(chan struct{}, 1)
				denied.Store(&waiting)
				type handoff struct {
					at    time.Time
					lease sluice.Lease
					err   error
				}
				got := make(chan handoff, 1)
				go func() {
					lease, err := waiter.Acquire(ctx, "k", 1)
					got <- handoff{time.Now(), lease, err}
				}()
				<-waiting
				released := time.Now()
				if err := held.Release(ctx); err != nil {
					b.Fatal(err)
				}
				h := <-got
				if h.err != nil || !h.lease.Allowed {
					b.Fatal(h.err, h.lease.Allowed)
				}
				handoffs = append(handoffs, h.at.Sub(released))
				if err := h.lease.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
			slices.Sort(handoffs)
			b.ReportMetric(float64(handoffs[len(handoffs)/2].Microseconds()), "median-µs")
			b.ReportMetric(float64(handoffs[len(handoffs)*99/100].Microseconds()), "p99-µs")
		})
	}
}
