package sluice

import "github.com/sluice-go/sluice/engine"

// NewTokenBucket returns a token bucket refilling at rate and holding up
// to burst tokens: NewTokenBucket(sluice.PerSecond(10), 20).
//
// Each key's bucket holds up to burst tokens, refills at a rate, and a request of cost c is admitted iff the
// bucket holds at least c tokens, which it then takes. A new bucket starts
// full.
//
// By default tokens refill continuously. With [WithIntervalRefill] they
// arrive only once per whole elapsed interval of the rate (rate.Amount at a
// time), and the time of the last refill advances by whole intervals, so
// partial progress towards the next refill is never lost.
//
// State per key: the tokens in use (burst minus the tokens held, so that
// zero is a full bucket) and the time of the last refill. A full bucket is
// forgotten.
//
// Guarantee: the cost admitted in any interval of length d is at most
// burst + rate*d (continuous refill), or burst + rate.Amount*ceil(d/period)
// with interval refill.
func NewTokenBucket(rate Rate, burst float64, opts ...Option) (*Limiter, error) {
	if err := rate.validate(); err != nil {
		return nil, err
	}
	p := engine.Params{Kind: engine.KindTokenBucket, Limit: burst, Interval: int64(rate.Period), Amount: rate.Amount}
	return newLimiter(p, opts)
}
