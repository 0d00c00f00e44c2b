package sluice

import (
	"math"
	"time"

	"github.com/sluice-go/sluice/engine"
)

// NewSlidingLog returns an exact sliding window limiter admitting up to
// limit in any window: NewSlidingLog(100, time.Minute).
//
// The sliding log is the exact sliding window: it keeps each key's admitted
// requests of the last window (time and cost) and admits a request iff the
// cost admitted in the window ending now, plus its own, stays within the
// limit.
//
// Guarantee: never more than limit in any interval of one window's length.
//
// Memory grows with the number of requests admitted per window, so it is
// bounded: a key keeps at most MaxEntries entries ([WithMaxEntries];
// ceil(limit) by default, at most 1024 unless set). When the log is full,
// a new request's cost is merged into the newest entry, which takes the new
// request's time: the merged cost then leaves the window later than it
// would have, so the guarantee still holds, and the limiter only becomes
// stricter. With unit costs and the default bound, entries are never merged.
func NewSlidingLog(limit float64, window time.Duration, opts ...Option) (*Limiter, error) {
	p := engine.Params{Kind: engine.KindSlidingLog, Limit: limit, Interval: int64(window)}
	if limit > 0 && !math.IsInf(limit, 0) {
		p.MaxEntries = int(min(math.Ceil(limit), defaultLogEntries))
	}
	return newLimiter(p, opts)
}

const defaultLogEntries = 1024

// NewSlidingCounter returns a sliding window counter admitting up to limit
// per window: NewSlidingCounter(100, time.Minute).
//
// The sliding counter approximates a sliding window with two counters per key:
// the count of the current aligned window and of the previous one. A
// request is admitted iff
//
//	previous * (window - elapsed) / window + current + cost <= limit
//
// where elapsed is the time since the current window started: it assumes
// the previous window's requests were spread evenly over it.
//
// Error: when they were not, the estimate is off. Requests bunched at the
// end of the previous window are under-counted as soon as the window turns,
// so an interval of one window's length can hold up to about 2*limit in
// the worst case (limit at the very end of one window and, as the weight
// of that window falls, nearly limit again within the next); requests
// bunched at its start are over-counted, which only makes it stricter.
// Under steady traffic within the limit it admits everything; under
// sustained overload it admits about limit-1 per window, because the last
// unit of a window fits only once the previous window's weight is zero.
// The project's tests measure both.
//
// State per key: two counts and the current window's start, whatever the
// limit.
func NewSlidingCounter(limit float64, window time.Duration, opts ...Option) (*Limiter, error) {
	return newLimiter(engine.Params{Kind: engine.KindSlidingCounter, Limit: limit, Interval: int64(window)}, opts)
}
