package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-go/sluice"
)

// A concurrency limit of two calls at once per account: a third is
// denied until a lease is released, and a release frees its slot at once.
func ExampleNewConcurrencyLimit() {
	ctx := context.Background()
	exports, err := sluice.NewConcurrencyLimit(2, time.Minute, sluice.WithClock(newExampleClock()))
	if err != nil {
		panic(err)
	}
	first, _ := exports.TryAcquire(ctx, "account-42", 1)
	second, _ := exports.TryAcquire(ctx, "account-42", 1)
	third, _ := exports.TryAcquire(ctx, "account-42", 1)
	fmt.Println(first.Allowed, second.Allowed, third.Allowed, third.RetryAfter)

	if err := first.Release(ctx); err != nil {
		panic(err)
	}
	again, _ := exports.TryAcquire(ctx, "account-42", 1)
	fmt.Println(again.Allowed, again.Remaining)

	// Releasing twice is harmless, and says so.
	fmt.Println(errors.Is(first.Release(ctx), sluice.ErrNotHeld))
	// Output:
	// true true false 1m0s
	// true 0
	// true
}

// Acquire waits for a slot, in arrival order, and is woken by the release
// that frees it. A holder that never releases (it died) gives its slot
// back when its lease expires.
func ExampleLimiter_Acquire() {
	ctx := context.Background()
	lim, err := sluice.NewConcurrencyLimit(1, 30*time.Second)
	if err != nil {
		panic(err)
	}
	held, _ := lim.TryAcquire(ctx, "report", 1)
	go func() {
		// ... the work ...
		held.Release(ctx)
	}()
	lease, err := lim.Acquire(ctx, "report", 1) // until the release above
	if err != nil {
		panic(err) // ctx ended, or the store failed
	}
	defer lease.Release(ctx)
	fmt.Println(lease.Allowed)
	// Output:
	// true
}

// A group holds a concurrency limit beside a rate, decided as one: "at
// most 2 at once and 1 per second per API key". A lease is taken only
// where the rate admits, and the rate spent only where a lease is taken.
func ExampleGroup_TryAcquire() {
	ctx := context.Background()
	fake := newExampleClock()
	store := sluice.NewMemStore(sluice.MemStoreConfig{})
	defer store.Close()
	slots, _ := sluice.NewConcurrencyLimit(2, time.Minute, sluice.WithStore(store), sluice.WithClock(fake))
	rate, _ := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithStore(store), sluice.WithClock(fake))
	calls, err := sluice.NewGroup(slots, rate)
	if err != nil {
		panic(err)
	}
	keys := []string{"slots:key-7", "rate:key-7"}
	for range 4 {
		lease, err := calls.TryAcquire(ctx, keys, 1)
		if err != nil {
			panic(err)
		}
		fmt.Println(lease.Allowed, lease.RetryAfter)
		fake.Add(time.Second)
	}
	// Output:
	// true 0s
	// true 0s
	// false 58s
	// false 57s
}
