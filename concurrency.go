package sluice

import (
	"math"
	"time"

	"github.com/sluice-go/sluice/engine"
)

// NewConcurrencyLimit returns a limiter of how many at once: at most limit
// cost held per key by leases, each of which the holder releases when done
// and which ends by itself ttl after it was taken or last extended:
// NewConcurrencyLimit(2, time.Minute) lets two calls per key run at once.
//
// Take a lease with [Limiter.TryAcquire], or wait for one with
// [Limiter.Acquire], and give it back with [Lease.Release]; a long task
// extends its lease with [Lease.Extend]. The time to live is what keeps a
// holder that died (a crash, a killed process, a lost network) from
// holding its slot for ever: its slot comes back by itself when its lease
// expires, and no sooner, so choose a ttl longer than the longest task,
// or extend the lease while the task runs.
//
// Guarantee: at no instant do the live leases of a key hold more than
// limit, on any store, however many processes share it. Allow takes a
// lease that nobody releases: it holds its slot for the whole ttl.
//
// A key holds at most [WithMaxEntries] leases (1,024 by default): a lease
// of any cost above zero takes one, and beyond that bound an acquisition
// is denied as if the limit were reached. Reserve, Wait, AllowAtMost,
// penalties and counted denials are refused with [ErrUnsupported] or
// [ErrInvalidConfig]: a lease is taken whole and now, or not at all.
func NewConcurrencyLimit(limit float64, ttl time.Duration, opts ...Option) (*Limiter, error) {
	p := engine.Params{Kind: engine.KindConcurrency, Limit: limit, Interval: int64(ttl), MaxEntries: defaultLeases}
	if limit > 0 && !math.IsInf(limit, 0) {
		p.MaxEntries = max(defaultLeases, int(min(math.Ceil(limit), 1<<20)))
	}
	return newLimiter(p, opts)
}

// defaultLeases is how many leases a key of a concurrency limit holds
// unless WithMaxEntries says otherwise: more than its limit in units.
const defaultLeases = 1024
