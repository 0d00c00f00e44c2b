// Package sluice is an embeddable rate limiter: per-client limits for
// services and HTTP APIs, pacing of calls to third-party APIs, and spend
// budgets.
//
// Each algorithm is a pure function of a small record per key and the
// time: nothing drips in the background, keys not touched cost nothing,
// and a clock that steps backwards never loosens a limit.
//
//   - [NewGCRA]: one time per key, exact to the nanosecond: the usual
//     choice;
//   - [NewLeakyBucket]: a float level, for budgets and spend checks;
//   - [NewTokenBucket]: burst and refill rate, continuous or per interval;
//   - [NewFixedWindow], [NewCalendarWindow]: a count per window or
//     calendar period;
//   - [NewSlidingLog]: the exact sliding window; [NewSlidingCounter]: its
//     estimate;
//   - [NewConcurrencyLimit]: how many at once, held by leases.
//
// Costs are float64: a request may cost 1, or 1,000 rows, or 30.50 of
// money. Each constructor returns a [Limiter]:
//
//	lim, err := sluice.NewGCRA(sluice.PerSecond(10), 5) // 10/s, bursts of 5
//	if err != nil {
//		return err
//	}
//	d, err := lim.Allow(ctx, clientIP, 1)
//	if err != nil {
//		return err // invalid input or a failing store, never a denial
//	}
//	if !d.Allowed {
//		// d.RetryAfter says when to come back.
//	}
//
// Allow polices; Reserve books a turn within a maximum delay, Wait sleeps
// until its turn (waiters on a key served in the order they came), and
// AllowAtMost grants as much of a batch as fits. [WithPenalty] blocks a
// key that overflows for a set time, [WithCountDenied] makes denials
// count, and [NewGroup] decides a request against several limiters as
// one: recorded in all of them, or in none.
//
// State lives in an [engine.Store]: by default an in-process [MemStore]; the
// modules github.com/sluice-go/sluice/redisstore and .../pgstore share
// limits between processes, with the same atomic decisions.
//
// Package [github.com/sluice-go/sluice/engine] states each algorithm and
// the store contract; nearcache and allowance spare a remote store calls;
// policy builds limiters from a JSON document; sluicehttp, sluicegrpc,
// sluiceprom and sluiceotel adapt limiters to HTTP, gRPC and metrics.
//
// Invalid input is an error, never a panic or a silent wrong answer:
// configuration when a limiter is built ([ErrInvalidConfig]), costs on
// every call ([ErrInvalidCost], [ErrCostExceedsLimit]).
package sluice
