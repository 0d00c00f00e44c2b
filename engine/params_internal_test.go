package engine

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestUsualRequestsAreExactlyTheAcceptedAllowsAndChecks pins the inlined
// shortcut of Check: on the edges of every check, an Allow or Check is
// usual iff the full checks accept it, and no fill-up is usual.
func TestUsualRequestsAreExactlyTheAcceptedAllowsAndChecks(t *testing.T) {
	p := Params{Kind: KindGCRA, Limit: 5, Interval: 1e8}
	require.NoError(t, p.Validate())
	negZero := math.Copysign(0, -1) // the constant -0.0 is plain zero in Go
	costs := []float64{0, math.SmallestNonzeroFloat64, 1, 5, math.Nextafter(5, 6), 6, negZero, -1, math.NaN(), math.Inf(1), math.Inf(-1)}
	require.True(t, slices.ContainsFunc(costs, func(c float64) bool { return c == 0 && math.Signbit(c) }), "a negative zero is among the costs")
	times := []int64{0, 1, maxTime - 1, maxTime, maxTime + 1, -1, math.MinInt64, math.MaxInt64}
	for _, verb := range []Verb{0, VerbAllow, VerbCheck, VerbFill, VerbFill + 1} {
		for _, cost := range costs {
			for _, now := range times {
				op := Op{Verb: verb, Cost: cost, Now: now}
				err := CheckTime(now)
				if err == nil {
					err = p.CheckCost(verb, cost)
				}
				accepted := err == nil && (verb == VerbAllow || verb == VerbCheck)
				require.Equal(t, accepted, p.Usual(op.Verb, op.Cost, op.Now), "%+v", op)
				require.Equal(t, err, p.Check(op), "%+v", op)
			}
		}
	}
}
