package guarantees

import (
	"math"

	"github.com/sluice-go/sluice/engine"
)

// Slack is what the float algorithms may admit beyond a bound, relative
// to the limit: they compare amounts with a slack of 2^-48 of the limit;
// 1e-12 of it leaves room for float rounding.
const Slack = 1e-12

// windowsTouched is the most aligned (or back-to-back) windows of length w
// an interval of d nanoseconds can touch: its d instants a..a+d-1 span
// ceil((d-1)/w)+1 of them at most.
func windowsTouched(d, w int64) float64 {
	return float64((d-1+w-1)/w + 1)
}

// Bound returns the most cost p lets through in any interval of
// length d, as each algorithm's documentation states it.
func Bound(p engine.Params, d int64, cost float64) float64 {
	switch p.Kind {
	case engine.KindLeakyBucket:
		return p.Limit + p.Amount*float64(d)/float64(p.Interval)
	case engine.KindTokenBucket:
		if p.IntervalRefill {
			return p.Limit + p.Amount*math.Ceil(float64(d)/float64(p.Interval))
		}
		return p.Limit + p.Amount*float64(d)/float64(p.Interval)
	case engine.KindGCRA:
		return p.Limit + float64(d)/float64(p.Interval)
	case engine.KindFixedWindow:
		n := windowsTouched(d, p.Interval)
		if p.Anchored && n == 2 && cost == 1 {
			// A window's first request opens it, so an interval that
			// does not start with it holds at most limit-1 of its requests.
			return 2*p.Limit - 1
		}
		return n * p.Limit
	case engine.KindSlidingLog:
		return math.Ceil(float64(d)/float64(p.Interval)) * p.Limit
	}
	// The sliding counter admits at most limit per aligned window, as cur
	// never exceeds it.
	return windowsTouched(d, p.Interval) * p.Limit
}
