package metrics

import (
	"fmt"
	"math"

	"github.com/sluice-go/sluice"
)

// CheckBuckets reports whether buckets can bound a latency histogram: at
// least one, none NaN, and strictly increasing. The error wraps
// [sluice.ErrInvalidConfig] and names the adapter, pkg.
func CheckBuckets(pkg string, buckets []float64) error {
	if len(buckets) == 0 {
		return fmt.Errorf("%w: %s: no buckets", sluice.ErrInvalidConfig, pkg)
	}
	for i, b := range buckets {
		if math.IsNaN(b) || i > 0 && !(b > buckets[i-1]) {
			return fmt.Errorf("%w: %s: buckets %v not increasing", sluice.ErrInvalidConfig, pkg, buckets)
		}
	}
	return nil
}
