package sluice_test

import (
	"context"
	"fmt"
	"log"

	"github.com/benbjohnson/clock"

	"github.com/sluice-go/sluice"
)

// Calls to a language model are paced by the tokens they use, which are
// known only from the answer: each call waits for its estimate, and is
// settled with what it used. One used more, and the key owes the excess;
// the next used less, and what it did not use goes to the next caller.
func ExampleLimiter_Settle() {
	mock := clock.NewMock() // simulated time makes the output exact
	tokens, err := sluice.NewGCRA(sluice.PerMinute(10_000), 10_000, sluice.WithClock(mock))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	const estimate = 1000
	for _, used := range []float64{1340, 600} {
		if err := tokens.Wait(ctx, "llm", estimate); err != nil {
			log.Fatal(err)
		}
		d, err := tokens.Settle(ctx, "llm", estimate, used)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("used %v of %v: %v tokens left\n", used, estimate, d.Remaining)
	}
	// Output:
	// used 1340 of 1000: 8660 tokens left
	// used 600 of 1000: 8060 tokens left
}
