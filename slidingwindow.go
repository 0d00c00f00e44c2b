package sluice

import (
	"math"
	"time"

	"github.com/sluice-go/sluice/engine"
)

// NewSlidingLog returns an exact sliding window limiter admitting up to
// limit in any window: NewSlidingLog(100, time.Minute). It keeps each
// key's admitted requests of the last window (time and cost) and admits a
// request iff the cost admitted in the window ending now, plus its own,
// stays within limit.
//
// Guarantee: never more than limit in any interval of one window's length.
//
// A key keeps at most MaxEntries entries ([WithMaxEntries]; ceil(limit) by
// default, at most 1024 unless set): a request that finds the log full
// merges its cost into the newest entry, which takes its time, so the
// limiter only becomes stricter. With unit costs and the default bound,
// nothing is merged.
func NewSlidingLog(limit float64, window time.Duration, opts ...Option) (*Limiter, error) {
	p := engine.Params{Kind: engine.KindSlidingLog, Limit: limit, Interval: int64(window)}
	if limit > 0 && !math.IsInf(limit, 0) {
		p.MaxEntries = int(min(math.Ceil(limit), defaultLogEntries))
	}
	return newLimiter(p, opts)
}

const defaultLogEntries = 1024

// NewSlidingCounter returns a sliding window counter admitting up to limit
// per window: NewSlidingCounter(100, time.Minute). It keeps two counts per
// key whatever the limit, of the current aligned window and the previous
// one, and admits a request iff
//
//	previous * (window - elapsed) / window + current + cost <= limit
//
// where elapsed is the time since the current window started: it assumes
// the previous window's requests were spread evenly over it.
//
// Error: an interval of one window's length can hold up to about 2*limit
// in the worst case (requests bunched at the end of a window). Under steady
// traffic within the limit it admits everything; under sustained overload,
// about limit-1 per window. docs/rules.md says why.
func NewSlidingCounter(limit float64, window time.Duration, opts ...Option) (*Limiter, error) {
	return newLimiter(engine.Params{Kind: engine.KindSlidingCounter, Limit: limit, Interval: int64(window)}, opts)
}
