package sluice

import (
	"time"

	"github.com/sluice-go/sluice/engine"
)

// NewFixedWindow returns a fixed window limiter admitting up to limit per
// window: NewFixedWindow(100, time.Minute). A request is admitted iff its
// window's count plus its cost stays within limit. Denied requests are not
// counted, and a key is forgotten when its window ends. Windows start at
// multiples of the window length since the Unix epoch, so every key's
// windows turn over together, or, with [WithAnchoredWindows], at a key's
// first request and then at its first request after each window ends.
//
// Guarantee: at most limit per window; an interval of one window's length
// across a boundary can hold up to 2*limit (aligned) or, with unit costs,
// 2*limit-1 (anchored).
func NewFixedWindow(limit float64, window time.Duration, opts ...Option) (*Limiter, error) {
	return newLimiter(engine.Params{Kind: engine.KindFixedWindow, Limit: limit, Interval: int64(window)}, opts)
}
