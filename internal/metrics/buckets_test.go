package metrics

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
)

func TestCheckBucketsAcceptsOnlyIncreasingBounds(t *testing.T) {
	for _, tc := range []struct {
		buckets []float64
		ok      bool
	}{
		{[]float64{0.001, 0.01, 0.1}, true},
		{[]float64{0.5}, true},
		{[]float64{0.1, math.Inf(1)}, true},
		{nil, false},
		{[]float64{0.1, 0.1}, false},
		{[]float64{0.2, 0.1}, false},
		{[]float64{math.NaN()}, false},
		{[]float64{0.1, math.NaN()}, false},
	} {
		err := CheckBuckets("test", tc.buckets)
		if tc.ok {
			require.NoError(t, err, "%v", tc.buckets)
		} else {
			require.ErrorIs(t, err, sluice.ErrInvalidConfig, "%v", tc.buckets)
		}
	}
}
