package storetest_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/storetest"
)

// TestIdenticalDecisionSeesWhatTheTolerancesForgive pins the difference
// between the two comparisons: a store one float64 step or one nanosecond
// away from Step passes the tolerant comparison and fails the exact one.
func TestIdenticalDecisionSeesWhatTheTolerancesForgive(t *testing.T) {
	p := engine.Params{Kind: engine.KindLeakyBucket, Limit: 3, Interval: int64(time.Second), Amount: 1.5}
	want := engine.Decision{Allowed: true, Limit: 3, Used: 1.2, Remaining: 1.8, ResetAfter: 800 * time.Millisecond}
	for _, tc := range []struct {
		name string
		got  func(d engine.Decision) engine.Decision
	}{
		{"used one ulp above", func(d engine.Decision) engine.Decision { d.Used = math.Nextafter(d.Used, 4); return d }},
		{"remaining one ulp below", func(d engine.Decision) engine.Decision {
			d.Remaining = math.Nextafter(d.Remaining, 0)
			return d
		}},
		{"reset one nanosecond later", func(d engine.Decision) engine.Decision { d.ResetAfter++; return d }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.got(want)
			require.True(t, storetest.SameDecision(p, want, got), "within the tolerances")
			require.False(t, storetest.IdenticalDecision(want, got), "but not bit for bit")
		})
	}
	t.Run("negative zero", func(t *testing.T) {
		full := engine.Decision{Limit: 3, Used: 3, Remaining: 0, RetryAfter: time.Second}
		got := full
		got.Remaining = math.Copysign(0, -1)
		require.False(t, storetest.IdenticalDecision(full, got))
	})
	require.True(t, storetest.IdenticalDecision(want, want))
}
