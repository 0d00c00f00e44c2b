package sluice

import (
	"time"

	"github.com/sluice-go/sluice/engine"
)

// NewFixedWindow returns a fixed window limiter admitting up to limit per
// window: NewFixedWindow(100, time.Minute).
//
// A fixed window counts each key's cost in consecutive windows of a fixed
// length and admits a request iff the window's count plus its cost stays
// within the limit. Denied requests are not counted.
//
// Windows are aligned to the clock by default: they start at whole
// multiples of the window length since the Unix epoch, so every key's
// windows turn over together. With [WithAnchoredWindows] a key's window
// starts at its first request, and the next one at its first request after
// that window ends.
//
// State per key: the window's count and its start. A key is forgotten when
// its window ends.
//
// Guarantee: at most limit per window. Across a window boundary, an
// interval of one window's length can hold up to 2*limit (aligned: a full
// window's worth just before the boundary and again just after it) or, with
// unit costs, 2*limit-1 (anchored: a window's first request opens it, so at
// most limit-1 of its requests fall in its last instants).
func NewFixedWindow(limit float64, window time.Duration, opts ...Option) (*Limiter, error) {
	return newLimiter(engine.Params{Kind: engine.KindFixedWindow, Limit: limit, Interval: int64(window)}, opts)
}
