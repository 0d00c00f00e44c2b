package arith

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFloorDivRoundsTowardNegativeInfinity(t *testing.T) {
	for _, tc := range []struct{ a, b, want int64 }{
		{7, 2, 3}, {-7, 2, -4}, {-8, 2, -4}, {0, 5, 0}, {-1, 1e9, -1},
		{math.MinInt64, 1e9, -9223372037}, {math.MaxInt64, 1e9, 9223372036},
	} {
		require.Equal(t, tc.want, FloorDiv(tc.a, tc.b), "%d / %d", tc.a, tc.b)
	}
}

func TestNanosRoundsHalfAwayFromZero(t *testing.T) {
	require.Equal(t, int64(333333333), Nanos(1, 333333333))
	require.Equal(t, int64(833333333), Nanos(2.5, 333333333)) // 833333332.5
	require.Equal(t, int64(0), Nanos(0, 1e9))
}

func TestCeilNanosForgivesNoiseAndCaps(t *testing.T) {
	for _, tc := range []struct {
		ns   float64
		want int64
	}{
		{0, 0}, {-1, 0}, {math.NaN(), 0},
		{1e9, 1e9},
		{1e9 * (1 + Tolerance/2), 1e9}, // rounding noise above a whole nanosecond
		{1e9 + 0.5, 1e9 + 1},           // a real half nanosecond
		{2 * MaxSpan, MaxSpan}, {math.Inf(1), MaxSpan},
	} {
		require.Equal(t, tc.want, CeilNanos(tc.ns), "%v", tc.ns)
	}
}

func TestSpans(t *testing.T) {
	require.Equal(t, 3e9, BucketSpan(5, 2, 1e9), "5 units at 2 per second take three whole seconds")
	require.Equal(t, 2.5e8, GCRASpan(2.5, 1e8))
}
