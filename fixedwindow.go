package sluice

import (
	"time"

	"github.com/sluice-go/sluice/internal/arith"
)

// FixedWindow counts each key's cost in consecutive windows of a fixed
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
//
// A FixedWindow is safe for concurrent use.
type FixedWindow struct {
	limiter
}

// NewFixedWindow returns a fixed window limiter admitting up to limit per
// window: NewFixedWindow(100, time.Minute).
func NewFixedWindow(limit float64, window time.Duration, opts ...Option) (*FixedWindow, error) {
	l, err := newLimiter(Params{Kind: KindFixedWindow, Limit: limit, Interval: int64(window)}, opts)
	if err != nil {
		return nil, err
	}
	return &FixedWindow{l}, nil
}

func (p *Params) stepFixedWindow(s *State, op Op, d *Decision) {
	start, count := s.Time, s.A
	switch {
	case p.Anchored:
		if count <= 0 || op.Now-start >= p.Interval {
			start, count = max(op.Now, start), 0
		}
	default:
		// A clock that stepped back stays in the stored window.
		if w := arith.FloorDiv(op.Now, p.Interval) * p.Interval; w > start {
			start, count = w, 0
		}
	}
	if count+op.Cost-p.Limit <= p.slack() {
		d.Allowed = true
		count = p.fill(count, op.Cost)
		if op.Verb == VerbAllow {
			*s = State{Time: start, A: count}
		}
	} else {
		d.RetryAfter = after(start+p.Interval, op.Now)
	}
	p.describe(d, count)
	if count > 0 {
		d.ResetAfter = after(start+p.Interval, op.Now)
	}
}
