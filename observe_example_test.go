package sluice_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-go/sluice"
)

// An Observer sees every decision with its outcome; the metrics adapters
// (sluiceprom, sluiceotel) are Observers.
func ExampleWithObserver() {
	counts := map[string]int{}
	count := func(_ context.Context, e sluice.Event) {
		counts[e.Outcome()]++ // an Observer for many goroutines must lock
	}
	lim, err := sluice.NewGCRA(sluice.PerMinute(2), 2, sluice.WithName("login"), sluice.WithObserver(count))
	if err != nil {
		panic(err)
	}
	for range 3 {
		lim.Allow(context.Background(), "user:42", 1)
	}
	lim.Allow(context.Background(), "user:42", -1)
	fmt.Println(counts["allowed"], "allowed,", counts["denied"], "denied,", counts["invalid"], "invalid")
	// Output: 2 allowed, 1 denied, 1 invalid
}

// WithTimeout bounds each store call; a caller's earlier deadline wins.
// On a remote store that stalls, Allow returns an error wrapping
// ErrTimeout once the timeout passes.
func ExampleWithTimeout() {
	lim, err := sluice.NewGCRA(sluice.PerSecond(10), 20,
		sluice.WithTimeout(50*time.Millisecond)) // with sluice.WithStore(redisStore)
	if err != nil {
		panic(err)
	}
	d, err := lim.Allow(context.Background(), "client-1", 1)
	if err != nil {
		// errors.Is(err, sluice.ErrTimeout): fail open or closed, by policy.
		return
	}
	fmt.Println(d.Allowed)
	// Output: true
}
