package sluice

import "github.com/sluice-go/sluice/engine"

// NewTokenBucket returns a token bucket refilling at rate and holding up to
// burst tokens: NewTokenBucket(sluice.PerSecond(10), 20). A request of cost
// c is admitted iff the key's bucket holds at least c tokens, which it then
// takes. A new bucket starts full, and a full one is forgotten. Tokens
// refill continuously or, with [WithIntervalRefill], rate.Amount at a time
// once per whole elapsed interval, never losing progress towards the next.
//
// Guarantee: the cost admitted in any interval of length d is at most burst
// + rate*d, or burst + rate.Amount*ceil(d/rate.Period) with interval
// refill.
func NewTokenBucket(rate Rate, burst float64, opts ...Option) (*Limiter, error) {
	if err := rate.validate(); err != nil {
		return nil, err
	}
	p := engine.Params{Kind: engine.KindTokenBucket, Limit: burst, Interval: int64(rate.Period), Amount: rate.Amount}
	return newLimiter(p, opts)
}
