package engine

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestUsualRequestsAreExactlyTheAcceptedAllowsAndChecks pins the inlined
// shortcut of Check: on the edges of every check, a calendar window's
// included, an Allow or Check is usual iff the full checks accept it, and
// no fill-up is usual.
func TestUsualRequestsAreExactlyTheAcceptedAllowsAndChecks(t *testing.T) {
	const w = int64(1e9) // a calendar window's windows: [w, 2w), [2w, 3w), [3w, 4w)
	limits := []Params{
		{Kind: KindGCRA, Limit: 5, Interval: 1e8},
		{Kind: KindFixedWindow, Limit: 5, Interval: w, Windows: [4]int64{w, 2 * w, 3 * w, 4 * w}},
	}
	negZero := math.Copysign(0, -1) // the constant -0.0 is plain zero in Go
	costs := []float64{0, math.SmallestNonzeroFloat64, 1, 5, math.Nextafter(5, 6), 6, negZero, -1, math.NaN(), math.Inf(1), math.Inf(-1)}
	require.True(t, slices.ContainsFunc(costs, func(c float64) bool { return c == 0 && math.Signbit(c) }), "a negative zero is among the costs")
	times := []int64{0, 1, w - 1, w, 4*w - 1, 4 * w, maxTime - 1, maxTime, maxTime + 1, -1, math.MinInt64, math.MaxInt64}
	for _, p := range limits {
		require.NoError(t, p.Validate())
		for _, verb := range []Verb{0, VerbAllow, VerbCheck, VerbFill, VerbFill + 1} {
			for _, cost := range costs {
				for _, now := range times {
					op := Op{Verb: verb, Cost: cost, Now: now}
					err := CheckTime(now)
					if err == nil {
						err = p.CheckWindows(now)
					}
					if err == nil {
						err = p.CheckCost(verb, cost)
					}
					accepted := err == nil && (verb == VerbAllow || verb == VerbCheck)
					require.Equal(t, accepted, p.Usual(op.Verb, op.Cost, op.Now), "%v %+v", p, op)
					require.Equal(t, err, p.Check(op), "%v %+v", p, op)
				}
			}
		}
	}
}

// TestBookingsAreExactlyTheAcceptedReservationsAndCancels pins Check's
// shortcut for the shaping verbs: on the edges of every check, a
// reservation or a cancel under Params that book takes the shortcut iff
// the full checks accept it, and no other op, nor any op of the other
// algorithms (a calendar window's included), does.
func TestBookingsAreExactlyTheAcceptedReservationsAndCancels(t *testing.T) {
	costs := []float64{0, 1, 5, math.Nextafter(5, 6), -1, math.NaN(), math.Inf(1), math.Inf(-1)}
	times := []int64{0, maxTime, maxTime + 1, -1, math.MaxInt64}
	instants := []int64{0, 1, maxTime + maxSpan, maxTime + maxSpan + 1, -1, math.MinInt64}
	delays := []int64{0, maxSpan, maxSpan + 1, -1}
	verbs := []Verb{VerbAllow, VerbCheck, VerbFill, VerbReserve, VerbCancel, VerbAtMost, VerbExhaust, VerbExtend}
	calendar := Params{Kind: KindFixedWindow, Limit: 5, Interval: 10, Windows: [4]int64{0, 10, 20, 30}}
	for _, p := range []Params{
		{Kind: KindGCRA, Limit: 5, Interval: 1e8},
		{Kind: KindLeakyBucket, Limit: 5, Interval: 1e9, Amount: 1},
		{Kind: KindTokenBucket, Limit: 5, Interval: 1e9, Amount: 1},
		{Kind: KindFixedWindow, Limit: 5, Interval: 1e9},
		{Kind: KindConcurrency, Limit: 5, Interval: 1e9, MaxEntries: 5},
		calendar,
	} {
		require.NoError(t, p.Validate(), "%v", p.Kind)
		books := p.Reservable()
		for _, verb := range verbs {
			for _, cost := range costs {
				for _, now := range times {
					for _, at := range instants {
						for _, delay := range delays {
							op := Op{Verb: verb, Cost: cost, Now: now, At: at, MaxDelay: delay}
							accepted := p.check(op) == nil
							want := accepted && books && (verb == VerbReserve || verb == VerbCancel)
							require.Equal(t, want, p.booking(&op), "%v %+v", p.Kind, op)
							if p.booking(&op) {
								require.NoError(t, p.Check(op), "%v %+v", p.Kind, op)
							}
						}
					}
				}
			}
		}
	}
}
