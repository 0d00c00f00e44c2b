package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/redisstore"
)

// benchStores returns n stores on the local Redis at addr, each with a
// client of its own, sharing their keys: processes of one application.
func benchStores(b *testing.B, addr string, n int) []*redisstore.Store {
	b.Helper()
	prefix := fmt.Sprintf("bench:%s:%d:", b.Name(), rand.Uint64())
	stores := make([]*redisstore.Store, n)
	for i := range stores {
		c := redis.NewClient(&redis.Options{Addr: addr})
		b.Cleanup(func() { c.Close() })
		st, err := redisstore.New(c, redisstore.WithPrefix(prefix))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		stores[i] = st
	}
	return stores
}

// BenchmarkLease takes and releases a lease on one key of a local Redis,
// one round trip each: the cost of a lease that never waits, taken with
// TryAcquire, and with Acquire, which first subscribes to the key's
// releases (a round trip more) and unsubscribes after.
func BenchmarkLease(b *testing.B) {
	st := benchStores(b, testserver.StartRedis(b).Addr, 1)[0]
	lim, err := sluice.NewConcurrencyLimit(4, time.Minute, sluice.WithStore(st))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, verb := range []string{"TryAcquire", "Acquire"} {
		b.Run("verb="+verb, func(b *testing.B) {
			take := lim.TryAcquire
			if verb == "Acquire" {
				take = lim.Acquire
			}
			b.ReportAllocs()
			for b.Loop() {
				lease, err := take(ctx, "k", 1)
				if err != nil || !lease.Allowed {
					b.Fatal(err, lease.Allowed)
				}
				if err := lease.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLeaseHandoff measures the time from a release through one
// store to the lease of a waiter in another, each with a client of its
// own, on a local Redis: woken by the release's notice (Acquire), against
// a waiter that asks every 10 ms. The holder releases once the waiter has
// been denied. It reports the median and 99th percentile of the
// handoffs.
func BenchmarkLeaseHandoff(b *testing.B) {
	addr := testserver.StartRedis(b).Addr
	for _, mode := range []string{"wake", "poll=10ms"} {
		b.Run("mode="+mode, func(b *testing.B) {
			ctx := context.Background()
			stores := benchStores(b, addr, 2)
			holder, err := sluice.NewConcurrencyLimit(1, time.Minute, sluice.WithStore(stores[0]))
			if err != nil {
				b.Fatal(err)
			}
			observe, denied := denials()
			waiter, err := sluice.NewConcurrencyLimit(1, time.Minute, sluice.WithStore(stores[1]), observe)
			if err != nil {
				b.Fatal(err)
			}
			wait := func() (sluice.Lease, error) {
				if mode == "wake" {
					return waiter.Acquire(ctx, "k", 1)
				}
				for {
					lease, err := waiter.TryAcquire(ctx, "k", 1)
					if err != nil || lease.Allowed {
						return lease, err
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			handoffs := make([]time.Duration, 0, b.N)
			for b.Loop() {
				held, err := holder.TryAcquire(ctx, "k", 1)
				if err != nil || !held.Allowed {
					b.Fatal(err, held.Allowed)
				}
				for len(denied) > 0 { // the previous waiter's
					<-denied
				}
				type handoff struct {
					at    time.Time
					lease sluice.Lease
					err   error
				}
				got := make(chan handoff, 1)
				go func() {
					lease, err := wait()
					got <- handoff{time.Now(), lease, err}
				}()
				<-denied // the waiter is waiting
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
			if len(handoffs) > 0 {
				b.ReportMetric(float64(handoffs[len(handoffs)/2].Microseconds()), "median-µs")
				b.ReportMetric(float64(handoffs[len(handoffs)*99/100].Microseconds()), "p99-µs")
			}
		})
	}
}
