package pgstore_test

import (
	"testing"
	"time"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/leaseproc"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/pgstore"
)

// BenchmarkLease takes and releases a lease on one key, one statement
// each, on a server the benchmark starts: the cost of a lease that never
// waits, taken with TryAcquire, and with Acquire, which listens for the
// key's releases only once denied.
func BenchmarkLease(b *testing.B) {
	st, _ := newStore(b, newPool(b, testserver.StartPostgres(b).URL, 2))
	leaseproc.TakeAndRelease(b, st)
}

// BenchmarkLeaseHandoff measures the time from a release through one
// store to the lease of a waiter in Acquire through another (another
// pool, as another process would have), on a server the benchmark starts:
// the waiter woken by the release's notification ("wake"), against a
// waiter that asks again every 10 ms. It reports the median and 99th
// percentile of the handoffs.
func BenchmarkLeaseHandoff(b *testing.B) {
	url := testserver.StartPostgres(b).URL
	leaseproc.Handoffs(b, 10*time.Millisecond, func(b *testing.B) (engine.Store, engine.Store) {
		holder, table := newStore(b, newPool(b, url, 2))
		waiter, err := pgstore.New(newPool(b, url, 2), pgstore.WithTable(table))
		if err != nil {
			b.Fatal(err)
		}
		closeAfter(b, waiter)
		return holder, waiter
	})
}
