// Package benchmarks compares sluice with the Go rate limiters its users
// would otherwise pick: golang.org/x/time/rate, throttled/throttled v2,
// sethvargo/go-limiter, ulule/limiter v3 and, on Redis, go-redis/redis_rate.
//
// It is a module of its own so that the peers never enter sluice's
// dependencies. The benchmarks are in its test files; README.md describes
// what they measure and run.sh runs them and writes results/table.md.
package benchmarks
