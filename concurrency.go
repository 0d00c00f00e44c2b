package sluice

import (
	"math"
	"time"

	"github.com/sluice-go/sluice/engine"
)

// NewConcurrencyLimit returns a limiter of how many at once: at most limit
// cost held per key by leases ([Lease]), each of which the holder releases
// when done and which ends by itself ttl after it was taken or last
// extended: NewConcurrencyLimit(2, time.Minute) lets two calls per key run
// at once. A holder that died keeps its slot until its lease expires, and
// no longer: choose a ttl longer than the longest task, or extend the lease
// while it runs. Allow takes a lease nobody releases, held for the whole
// ttl.
//
// Guarantee: at no instant do the live leases of a key hold more than
// limit, on any store, however many processes share it.
//
// A key holds at most [WithMaxEntries] leases (1,024 by default), one per
// lease of any cost above zero; beyond that an acquisition is denied as if
// the limit were reached. Reserve, Wait, AllowAtMost, penalties and counted
// denials are refused with [ErrUnsupported] or [ErrInvalidConfig].
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
