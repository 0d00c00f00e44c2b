package sluice

import (
	"context"

	"github.com/sluice-go/sluice/engine"
)

// NewLeakyBucket returns a leaky bucket meter with the given capacity that
// leaks at rate: NewLeakyBucket(1000, sluice.Per(1000, 30*24*time.Hour))
// is a monthly budget of 1000 units. Each key has a float64 level that
// costs fill and that leaks linearly, never below zero; a key whose level
// has leaked to zero is forgotten. [Limiter.Fillup] records a cost
// unconditionally, for work already done; CanAccept reports whether a cost
// would fit now, changing nothing; Allow records the cost only if it fits,
// atomically, where CanAccept then Fillup would race.
//
// Guarantee: the cost admitted by Allow in any interval of length d is at
// most capacity + rate*d.
func NewLeakyBucket(capacity float64, leak Rate, opts ...Option) (*Limiter, error) {
	if err := leak.validate(); err != nil {
		return nil, err
	}
	p := engine.Params{Kind: engine.KindLeakyBucket, Limit: capacity, Interval: int64(leak.Period), Amount: leak.Amount}
	return newLimiter(p, opts)
}

// Fillup adds cost to key's level unconditionally, clamping the level at
// capacity, and returns the level reached (Decision.Used). Full reports
// whether it reached capacity, Allowed whether the whole cost fitted; a
// cost above the capacity fills the bucket. The algorithms other than the
// leaky bucket return an error wrapping [ErrUnsupported].
func (l *Limiter) Fillup(ctx context.Context, key string, cost float64) (d Decision, err error) {
	err = l.now(ctx, key, engine.VerbFill, cost, decided(&d))
	return d, err
}
