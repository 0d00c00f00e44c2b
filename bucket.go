package sluice

import (
	"context"

	"github.com/sluice-go/sluice/engine"
)

// NewLeakyBucket returns a leaky bucket with the given capacity that leaks
// at rate: NewLeakyBucket(1000, sluice.Per(1000, 30*24*time.Hour)) is a
// monthly budget of 1000 units.
//
// A leaky bucket meter gives each key a level that requests
// fill and that leaks away linearly at a constant rate, never below zero.
// Levels and costs are float64, so it meters requests, rows or money alike.
//
// It has three verbs. [Limiter.Fillup] always records its cost (clamping
// the level at capacity) and reports whether the bucket is full: use it to
// account for work already done. CanAccept reports whether a cost would fit
// now, changing nothing. Allow is the atomic "CanAccept, then Fillup": it
// records the cost only if it fits, which closes the race two concurrent
// spenders would have between the two calls.
//
// State per key: the level and the time it was measured. A key whose level
// has leaked to zero is forgotten.
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
// capacity, and returns the level reached (Decision.Used). The fill-up
// reached capacity, the instant the level would have reached or passed it,
// iff the decision's Full reports true; Allowed reports whether the whole
// cost fitted. A cost larger than the capacity is allowed here: it fills
// the bucket.
// Only the leaky bucket fills up: the other algorithms return an error
// wrapping [ErrUnsupported].
func (l *Limiter) Fillup(ctx context.Context, key string, cost float64) (d Decision, err error) {
	err = l.now(ctx, key, engine.VerbFill, cost, decided(&d))
	return d, err
}
