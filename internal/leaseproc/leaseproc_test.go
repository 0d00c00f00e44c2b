package leaseproc

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMostAtOnceCountsTouchingHoldsAsOverlapping pins the holders' count:
// a hold that starts as another ends overlaps it.
func TestMostAtOnceCountsTouchingHoldsAsOverlapping(t *testing.T) {
	for _, tc := range []struct {
		name  string
		holds []Interval
		most  int
		at    int64
	}{
		{"none", nil, 0, 0},
		{"apart", []Interval{{1, 2}, {3, 4}}, 1, 1},
		{"touching", []Interval{{1, 3}, {3, 4}}, 2, 3},
		{"nested", []Interval{{1, 10}, {2, 9}, {3, 4}, {5, 6}}, 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			most, at := MostAtOnce(tc.holds)
			require.Equal(t, tc.most, most)
			require.Equal(t, tc.at, at)
		})
	}
}
