package sluice

import "github.com/sluice-go/sluice/engine"

// NewGCRA returns a GCRA limiter admitting rate in the long run and bursts
// of up to burst units from rest: NewGCRA(sluice.PerSecond(10), 5).
//
// The generic cell rate algorithm is a leaky bucket kept as one
// number per key, the theoretical arrival time (TAT) at which the key would
// be fresh again.
//
// With emission interval T = period/amount (the time one unit of cost
// takes) and tolerance burst*T, a request of cost c arriving at now is
// admitted iff
//
//	now >= max(TAT, now) + c*T - burst*T
//
// and then TAT becomes max(TAT, now) + c*T. A burst of exactly burst units is
// admitted from rest, and the steady rate is exactly one unit per T.
//
// All arithmetic is in integer nanoseconds: T is rounded to the nearest
// nanosecond once, when the limiter is built, and c*T and burst*T are
// rounded to the nearest nanosecond, so the TAT does not drift however
// many requests it admits, and RetryAfter and ResetAfter are exact.
//
// Guarantee: the cost admitted in any interval of length d is at most
// burst + d/T.
func NewGCRA(rate Rate, burst float64, opts ...Option) (*Limiter, error) {
	t, err := rate.interval()
	if err != nil {
		return nil, err
	}
	return newLimiter(engine.Params{Kind: engine.KindGCRA, Limit: burst, Interval: t}, opts)
}
