package sluice_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-go/sluice"
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
	for _, mode := range []string{"wake", "poll=1ms"} {
		b.Run("mode="+mode, func(b *testing.B) {
			ctx := context.Background()
			lim, err := sluice.NewConcurrencyLimit(1, time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			defer lim.Close()
			handoffs := benchHandoffs(b, func() (sluice.Lease, error) {
				if mode == "wake" {
					return lim.Acquire(ctx, "k", 1)
				}
				for {
					lease, err := lim.TryAcquire(ctx, "k", 1)
					if err != nil || lease.Allowed {
						return lease, err
					}
					time.Sleep(time.Millisecond)
				}
			}, func() (sluice.Lease, error) { return lim.TryAcquire(ctx, "k", 1) })
			reportHandoffs(b, handoffs)
		})
	}
}

// benchHandoffs hands one slot from a holder to a waiter b.N times: the
// holder takes it with take, the waiter waits for it with wait, and the
// time from the holder's release to the waiter's lease is one handoff.
func benchHandoffs(b *testing.B, wait, take func() (sluice.Lease, error)) []time.Duration {
	ctx := context.Background()
	handoffs := make([]time.Duration, 0, b.N)
	for b.Loop() {
		held, err := take()
		if err != nil || !held.Allowed {
			b.Fatal(err, held.Allowed)
		}
		type handoff struct {
			at    time.Time
			lease sluice.Lease
		}
		got := make(chan handoff, 1)
		go func() {
			lease, err := wait()
			at := time.Now()
			if err != nil || !lease.Allowed {
				b.Error(err, lease.Allowed)
			}
			got <- handoff{at, lease}
		}()
		time.Sleep(50 * time.Microsecond) // the waiter is waiting
		released := time.Now()
		if err := held.Release(ctx); err != nil {
			b.Fatal(err)
		}
		h := <-got
		handoffs = append(handoffs, h.at.Sub(released))
		if err := h.lease.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	return handoffs
}

// reportHandoffs reports the median and 99th percentile of handoffs.
func reportHandoffs(b *testing.B, handoffs []time.Duration) {
	slices.Sort(handoffs)
	if len(handoffs) == 0 {
		return
	}
	b.ReportMetric(float64(handoffs[len(handoffs)/2].Microseconds()), "median-µs")
	b.ReportMetric(float64(handoffs[len(handoffs)*99/100].Microseconds()), "p99-µs")
}
