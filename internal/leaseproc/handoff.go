package leaseproc

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
)

// Denials returns an option that observes a limiter's denied lease
// acquisitions, and the channel that tells the key of each, without
// blocking (it holds 64): a waiter in Acquire has asked the store and is
// about to wait.
func Denials() (sluice.Option, <-chan string) {
	denied := make(chan string, 64)
	return sluice.WithObserver(func(_ context.Context, e sluice.Event) {
		if e.Lease && e.Verb == engine.VerbAllow && e.Outcome() == "denied" {
			select {
			case denied <- e.Key:
			default:
			}
		}
	}), denied
}

// Receive returns what c brings, or fails t once ctx ends: how the
// stores' tests wait for a waiter's denial, a wake-up or a lease.
func Receive[T any](t *testing.T, ctx context.Context, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-ctx.Done():
		t.Fatalf("no %s: %v", what, context.Cause(ctx))
		panic("unreachable")
	}
}

// Handoffs measures the time from a release to the lease of the waiter
// waiting for the slot (see handoff), in two modes: "wake", a waiter in
// Acquire, woken by the store, and "poll=...", one that asks again
// every so often. stores gives each mode the holder's store and the
// waiter's (two clients of one server, as two processes would have).
func Handoffs(b *testing.B, every time.Duration, stores func(b *testing.B) (holder, waiter engine.Store)) {
	for _, mode := range []string{"wake", "poll=" + every.String()} {
		b.Run("mode="+mode, func(b *testing.B) {
			ctx := context.Background()
			holderStore, waiterStore := stores(b)
			holder, err := sluice.NewConcurrencyLimit(1, time.Minute, sluice.WithStore(holderStore))
			if err != nil {
				b.Fatal(err)
			}
			observe, denials := Denials()
			waiter, err := sluice.NewConcurrencyLimit(1, time.Minute, sluice.WithStore(waiterStore), observe)
			if err != nil {
				b.Fatal(err)
			}
			take := func() (sluice.Lease, error) { return holder.TryAcquire(ctx, "k", 1) }
			if mode == "wake" {
				handoff(b, take, func() (sluice.Lease, error) { return waiter.Acquire(ctx, "k", 1) }, denials, 2)
			} else {
				handoff(b, take, func() (sluice.Lease, error) { return poll(waiter, "k", every) }, denials, 1)
			}
		})
	}
}

// handoff measures, b.N times, the time from the release of a slot's
// lease to the lease of the waiter waiting for the slot, and reports
// their median and 99th percentile. take takes the slot (the holder's
// lease); wait waits for it (Acquire, or a poll of TryAcquire) on a
// limiter whose denials (see Denials) tell of each of its denials. The
// holder releases once the waiter was denied settled times: twice for
// Acquire, which asks, and asks again once it watches for releases; once
// for a poll.
func handoff(b *testing.B, take, wait func() (sluice.Lease, error), denials <-chan string, settled int) {
	ctx := context.Background()
	type handoff struct {
		at    time.Time
		lease sluice.Lease
		err   error
	}
	handoffs := make([]time.Duration, 0, b.N)
	for b.Loop() {
		held, err := take()
		if err != nil || !held.Allowed {
			b.Fatal(err, held.Allowed)
		}
		for len(denials) > 0 { // the previous waiter's
			<-denials
		}
		got := make(chan handoff, 1)
		go func() {
			lease, err := wait()
			got <- handoff{time.Now(), lease, err}
		}()
		for range settled {
			<-denials
		}
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
	if len(handoffs) == 0 {
		return
	}
	slices.Sort(handoffs)
	µs := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(µs(handoffs[len(handoffs)/2]), "median-µs")
	b.ReportMetric(µs(handoffs[len(handoffs)*99/100]), "p99-µs")
}

// poll waits for a lease of lim on key by asking again every interval:
// the waiter handoff compares Acquire with.
func poll(lim *sluice.Limiter, key string, interval time.Duration) (sluice.Lease, error) {
	for {
		lease, err := lim.TryAcquire(context.Background(), key, 1)
		if err != nil || lease.Allowed {
			return lease, err
		}
		time.Sleep(interval)
	}
}

// TakeAndRelease measures a lease that never waits on one key of st: taken
// with TryAcquire, and with Acquire, which watches for releases only once
// denied, then released, one store call each.
func TakeAndRelease(b *testing.B, st engine.Store) {
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
