package sluice_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/leaseproc"
)

// BenchmarkLease takes and releases a lease in memory: on one key, and on
// 10,000 keys in turn.
func BenchmarkLease(b *testing.B) {
	for _, keys := range []int{1, 10000} {
		b.Run("keys="+strconv.Itoa(keys), func(b *testing.B) {
			ctx := context.Background()
			lim, err := sluice.NewConcurrencyLimit(4, time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			defer lim.Close()
			names := make([]string, keys)
			for i := range names {
				names[i] = "k" + strconv.Itoa(i)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				lease, err := lim.TryAcquire(ctx, names[i], 1)
				if err != nil || !lease.Allowed {
					b.Fatal(err, lease.Allowed)
				}
				if err := lease.Release(ctx); err != nil {
					b.Fatal(err)
				}
				if i++; i == keys {
					i = 0
				}
			}
		})
	}
}

// BenchmarkLeaseHandoff measures the time from a release to the start of
// the next holder waiting for the slot, in memory: woken by the release
// (Acquire), against a waiter that polls every millisecond. It reports
// the median and 99th percentile of the handoffs.
func BenchmarkLeaseHandoff(b *testing.B) {
	leaseproc.Handoffs(b, time.Millisecond, func(b *testing.B) (engine.Store, engine.Store) {
		st := sluice.NewMemStore(sluice.MemStoreConfig{})
		b.Cleanup(func() { st.Close() })
		return st, st
	})
}
