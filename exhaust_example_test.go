package sluice_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/sluice-go/sluice"
)

// A third-party API answered "429 Too Many Requests" with "Retry-After:
// 30": the key that paces calls to it is exhausted for 30 seconds, and
// every worker sharing the limiter's store waits past them.
func ExampleLimiter_Exhaust() {
	mock := clock.NewMock() // simulated time makes the output exact
	lim, err := sluice.NewGCRA(sluice.PerSecond(10), 1, sluice.WithClock(mock))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if _, err := lim.Exhaust(ctx, "api.example.com", 30*time.Second); err != nil {
		log.Fatal(err)
	}
	d, err := lim.Allow(ctx, "api.example.com", 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(d.Allowed, d.RetryAfter)
	// Output: false 30.1s
}
