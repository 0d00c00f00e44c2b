package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/leaseproc"
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
// TryAcquire, and with Acquire, which subscribes to the key's releases
// only once denied.
func BenchmarkLease(b *testing.B) {
	leaseproc.TakeAndRelease(b, benchStores(b, testserver.StartRedis(b).Addr, 1)[0])
}

// BenchmarkLeaseHandoff measures the time from a release through one
// store to the lease of a waiter in another, each with a client of its
// own, on a local Redis: woken by the release's notice (Acquire), against
// a waiter that asks every 10 ms. It reports the median and 99th
// percentile of the handoffs.
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
			observe, denials := leaseproc.Denials()
			waiter, err := sluice.NewConcurrencyLimit(1, time.Minute, sluice.WithStore(stores[1]), observe)
			if err != nil {
				b.Fatal(err)
			}
			take := func() (sluice.Lease, error) { return holder.TryAcquire(ctx, "k", 1) }
			if mode == "wake" {
				leaseproc.Handoff(b, take, func() (sluice.Lease, error) { return waiter.Acquire(ctx, "k", 1) }, denials, 2)
			} else {
				leaseproc.Handoff(b, take, func() (sluice.Lease, error) { return leaseproc.Poll(waiter, "k", 10*time.Millisecond) }, denials, 1)
			}
		})
	}
}
