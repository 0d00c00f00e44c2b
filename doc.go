// Package sluice is an embeddable rate limiter: per-client limits for
// services and HTTP APIs, pacing of calls to third-party APIs, and spend
// budgets.
//
// Each algorithm is a pure function of a small record per key and the
// time: nothing drips in the background, and keys that are not touched cost
// nothing. The algorithms are
//
//   - [NewGCRA]: one theoretical arrival time per key, exact to the
//     nanosecond: the default choice for per-client request limits;
//   - [NewLeakyBucket]: a meter with a float level ([Limiter.Fillup],
//     CanAccept, Allow): budgets and spend checks;
//   - [NewTokenBucket]: burst and refill rate, refilled continuously or
//     once per interval;
//   - [NewFixedWindow]: a count per window, aligned to the clock or
//     anchored at each key's first request;
//   - [NewSlidingLog]: the exact sliding window; [NewSlidingCounter]: its
//     two-counter approximation.
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
// Wait blocks until a request is admitted, for pacing background work:
// it books its turn with Reserve, so waiters on a key are served in the
// order they came, one store call each. Reserve books a turn within a
// maximum delay (shaping, where Allow only polices), and AllowAtMost
// grants as much of a batch as fits. [WithPenalty] blocks a key that
// overflows for a set time, [WithCountDenied] makes denials count, and
// [NewGroup] decides a request against several limiters as one: recorded
// in all of them, or in none.
//
// State lives in a [Store]. The default, [MemStore], is sharded and
// in-process; the Redis and PostgreSQL stores (modules
// github.com/sluice-go/sluice/redisstore and .../pgstore) share limits
// between processes and run every algorithm atomically with the same
// decisions. Package [github.com/sluice-go/sluice/engine] holds each
// algorithm as a pure function and the contract a store of one's own
// implements.
//
// In production, [WithObserver] reports every decision (the modules
// .../sluiceprom and .../sluiceotel turn them into metrics), [WithTimeout]
// bounds each call to a remote store ([ErrTimeout]), and the package
// github.com/sluice-go/sluice/nearcache answers a remote store's recent
// denials in process, without changing a decision; package
// github.com/sluice-go/sluice/allowance admits a hot key's requests in
// process from blocks leased from the remote store, within a stated bound.
// Package github.com/sluice-go/sluice/policy builds limiters from a JSON
// document of policies and tiers, which a running process may reload.
//
// Invalid input is an error, never a panic or a silent wrong answer:
// configuration is validated when a limiter is built ([ErrInvalidConfig]),
// costs on every call ([ErrInvalidCost], [ErrCostExceedsLimit]).
//
// A clock that steps backwards never loosens a limit: package engine says
// exactly what each algorithm does.
package sluice
