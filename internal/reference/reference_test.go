package reference_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/reference"
)

// TestModelsGiveHandComputedDecisions pins each model to decisions worked
// out by hand from the definitions, so that the models are checked against
// something other than the code they judge.
func TestModelsGiveHandComputedDecisions(t *testing.T) {
	const s = int64(time.Second)
	t0 := 1000 * s // a whole second: aligned windows start here
	type step struct {
		verb              sluice.Verb
		cost              float64
		at                int64 // nanoseconds after t0
		allowed           bool
		retry, resetAfter int64
	}
	allow, check, fill := sluice.VerbAllow, sluice.VerbCheck, sluice.VerbFill
	tests := []struct {
		name  string
		p     sluice.Params
		steps []step
	}{
		{"leaky bucket 3 leaking 1.5/s", sluice.Params{Kind: sluice.KindLeakyBucket, Limit: 3, Interval: s, Amount: 1.5}, []step{
			{allow, 3, 0, true, 0, 2 * s},
			{allow, 1, 0, false, 666666667, 2 * s},         // 1 unit leaks in 2/3 s, rounded up
			{check, 1, 666666667, true, 0, 2 * s},          // level 1.9999999995 + 1 leaks in 1999999999.67ns
			{fill, 2, s, false, 0, 2 * s},                  // 1.5 + 2 clamps at 3
			{allow, 0.5, s - 1, false, 333333335, 2*s + 1}, // the clock stepped back: no leak until s again
		}},
		{"GCRA 10/s burst 5", sluice.Params{Kind: sluice.KindGCRA, Limit: 5, Interval: s / 10}, []step{
			{allow, 5, 0, true, 0, s / 2},
			{allow, 1, 0, false, s / 10, s / 2},
			{allow, 1, s / 10, true, 0, s / 2},
			{check, 2, s / 10, false, 2 * s / 10, s / 2},
		}},
		{"token bucket 4/s burst 10, interval refill", sluice.Params{Kind: sluice.KindTokenBucket, Limit: 10, Interval: s, Amount: 4, IntervalRefill: true}, []step{
			{allow, 10, 0, true, 0, 3 * s},
			{allow, 1, s - 1, false, 1, 2*s + 1},
			{allow, 5, s, false, s, 2 * s}, // 4 refilled: 6 in use, 5 more needs a second refill
			{allow, 4, s, true, 0, 3 * s},
		}},
		{"fixed window 5/s aligned", sluice.Params{Kind: sluice.KindFixedWindow, Limit: 5, Interval: s}, []step{
			{allow, 5, s / 2, true, 0, s / 2},
			{allow, 1, s - 1, false, 1, 1},
			{allow, 5, s, true, 0, s},
		}},
		{"fixed window 5/s anchored", sluice.Params{Kind: sluice.KindFixedWindow, Limit: 5, Interval: s, Anchored: true}, []step{
			{allow, 1, s / 2, true, 0, s},
			{allow, 5, s, false, s / 2, s / 2},
			{allow, 5, 3 * s / 2, true, 0, s},
		}},
		{"sliding log 5/s", sluice.Params{Kind: sluice.KindSlidingLog, Limit: 5, Interval: s, MaxEntries: 5}, []step{
			{allow, 2, 0, true, 0, s},
			{allow, 3, s / 2, true, 0, s},
			{allow, 2, s / 2, false, s / 2, s}, // the first entry leaves at s, the last at 3s/2
			{allow, 2, s, true, 0, s},
		}},
		{"sliding counter 5/s", sluice.Params{Kind: sluice.KindSlidingCounter, Limit: 5, Interval: s}, []step{
			{allow, 5, s / 2, true, 0, 3 * s / 2},
			{allow, 1, s + s/5, true, 0, 2*s - s/5}, // 5*0.8 + 1 = 5
			{allow, 1, s + s/5, false, s / 5, 2*s - s/5},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := reference.New(tt.p)
			require.NoError(t, err)
			for i, st := range tt.steps {
				d := m.Apply(sluice.Op{Verb: st.verb, Cost: st.cost, Now: t0 + st.at})
				require.Equal(t, st.allowed, d.Allowed, "step %d", i)
				require.Equal(t, st.retry, d.RetryAfter, "step %d RetryAfter", i)
				require.Equal(t, st.resetAfter, d.ResetAfter, "step %d ResetAfter", i)
			}
		})
	}
}
