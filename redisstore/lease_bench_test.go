package redisstore_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/engine"
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
	leaseproc.Handoffs(b, 10*time.Millisecond, func(b *testing.B) (engine.Store, engine.Store) {
		stores := benchStores(b, addr, 2)
		return stores[0], stores[1]
	})
}
