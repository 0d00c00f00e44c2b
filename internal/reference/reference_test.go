package reference_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/reference"
)

// TestModelsGiveHandComputedDecisions pins each model to decisions worked
// out by hand from the definitions, so that the models are checked against
// something other than the code they judge.
func TestModelsGiveHandComputedDecisions(t *testing.T) {
	const s = int64(time.Second)
	t0 := 1000 * s // a whole second: aligned windows start here
	type step struct {
		verb              engine.Verb
		cost              float64
		at                int64 // nanoseconds after t0
		allowed           bool
		retry, resetAfter int64
	}
	allow, check, fill := engine.VerbAllow, engine.VerbCheck, engine.VerbFill
	tests := []struct {
		name  string
		p     engine.Params
		steps []step
	}{
		{"leaky bucket 3 leaking 1.5/s", engine.Params{Kind: engine.KindLeakyBucket, Limit: 3, Interval: s, Amount: 1.5}, []step{
			{allow, 3, 0, true, 0, 2 * s},
			{allow, 1, 0, false, 666666667, 2 * s},         // 1 unit leaks in 2/3 s, rounded up
			{check, 1, 666666667, true, 0, 2 * s},          // level 1.9999999995 + 1 leaks in 1999999999.67ns
			{fill, 2, s, false, 0, 2 * s},                  // 1.5 + 2 clamps at 3
			{allow, 0.5, s - 1, false, 333333335, 2*s + 1}, // the clock stepped back: 1.5e-9 more than 3 then
			{allow, 0.5, s + 333333334, true, 0, 2 * s},    // 3 - 0.500000001 + 0.5
			{check, 0, s + 333333333, false, 1, 2*s + 1},   // 1ns before that point the level was above 3
		}},
		{"GCRA 10/s burst 5", engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: s / 10}, []step{
			{allow, 5, 0, true, 0, s / 2},
			{allow, 1, 0, false, s / 10, s / 2},
			{allow, 1, s / 10, true, 0, s / 2},
			{check, 2, s / 10, false, 2 * s / 10, s / 2},
		}},
		{"token bucket 4/s burst 10, interval refill", engine.Params{Kind: engine.KindTokenBucket, Limit: 10, Interval: s, Amount: 4, IntervalRefill: true}, []step{
			{allow, 10, 0, true, 0, 3 * s},
			{allow, 1, s - 1, false, 1, 2*s + 1},
			{allow, 5, s, false, s, 2 * s}, // 4 refilled: 6 in use, 5 more needs a second refill
			{allow, 4, s, true, 0, 3 * s},
		}},
		{"fixed window 5/s aligned", engine.Params{Kind: engine.KindFixedWindow, Limit: 5, Interval: s}, []step{
			{allow, 5, s / 2, true, 0, s / 2},
			{allow, 1, s - 1, false, 1, 1},
			{allow, 5, s, true, 0, s},
		}},
		{"fixed window 5/s anchored", engine.Params{Kind: engine.KindFixedWindow, Limit: 5, Interval: s, Anchored: true}, []step{
			{allow, 1, s / 2, true, 0, s},
			{allow, 5, s, false, s / 2, s / 2},
			{allow, 5, 3 * s / 2, true, 0, s},
		}},
		{"sliding log 5/s", engine.Params{Kind: engine.KindSlidingLog, Limit: 5, Interval: s, MaxEntries: 5}, []step{
			{allow, 2, 0, true, 0, s},
			{allow, 3, s / 2, true, 0, s},
			{allow, 2, s / 2, false, s / 2, s}, // the first entry leaves at s, the last at 3s/2
			{allow, 2, s, true, 0, s},
		}},
		{"sliding counter 5/s", engine.Params{Kind: engine.KindSlidingCounter, Limit: 5, Interval: s}, []step{
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
				d := m.Apply(engine.Op{Verb: st.verb, Cost: st.cost, Now: t0 + st.at})
				require.Equal(t, st.allowed, d.Allowed, "step %d", i)
				require.Equal(t, st.retry, d.RetryAfter, "step %d RetryAfter", i)
				require.Equal(t, st.resetAfter, d.ResetAfter, "step %d ResetAfter", i)
			}
		})
	}
}

// TestModelsBookCancelAndGrantAsDefined pins the models of the shaping
// verbs (Reserve, Cancel, AtMost) to decisions worked out by hand from
// their definitions.
func TestModelsBookCancelAndGrantAsDefined(t *testing.T) {
	const s = int64(time.Second)
	t0 := 1000 * s
	type step struct {
		verb     engine.Verb
		cost     float64
		at       int64 // nanoseconds after t0
		maxDelay int64 // a reservation's
		booked   int64 // a cancel's reservation instant, after t0
		from     int64 // a reservation's earliest instant, after t0
		// The decision.
		allowed           bool
		retry, resetAfter int64
		delay             int64 // At is then t0 + at + delay, or else
		noAt              bool  // booked from a later instant than needed: no At to cancel by
		granted           float64
	}
	allow, reserve, cancel, atMost := engine.VerbAllow, engine.VerbReserve, engine.VerbCancel, engine.VerbAtMost
	tests := []struct {
		name  string
		p     engine.Params
		steps []step
	}{
		{"GCRA 10/s burst 5", engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: s / 10}, []step{
			{verb: allow, cost: 5, allowed: true, resetAfter: s / 2},
			{verb: reserve, cost: 1, maxDelay: s, allowed: true, resetAfter: 6 * s / 10, delay: s / 10},
			// The next one would come at 200ms: past a MaxDelay of 100ms,
			// by 100ms.
			{verb: reserve, cost: 1, maxDelay: s / 10, retry: s / 10, resetAfter: 6 * s / 10},
			{verb: reserve, cost: 1, maxDelay: 2 * s / 10, allowed: true, resetAfter: 7 * s / 10, delay: 2 * s / 10},
			// The first is no longer the last booking: nothing given back.
			{verb: cancel, cost: 1, booked: s / 10, resetAfter: 7 * s / 10},
			// Given back a nanosecond late: the TAT is 600ms + 1ns.
			{verb: cancel, cost: 1, at: s / 20, booked: 2 * s / 10, allowed: true, resetAfter: 6*s/10 + 1 - s/20},
			{verb: cancel, cost: 1, at: s / 20, booked: 2 * s / 10, resetAfter: 6*s/10 + 1 - s/20}, // again: nothing
			// A backlog of 5 and 1ns at 100ms: nothing fits, one unit at
			// 200ms and 1ns.
			{verb: atMost, cost: 3, at: s / 10, retry: s/10 + 1, resetAfter: s/2 + 1},
			{verb: atMost, cost: 3, at: 3*s/10 + 1, allowed: true, resetAfter: s / 2, granted: 2},
			{verb: atMost, cost: 0.5, at: 4*s/10 + 1, allowed: true, resetAfter: 45 * s / 100, granted: 0.5},
			{verb: atMost, cost: 0, at: 4*s/10 + 1, resetAfter: 45 * s / 100}, // a check, admitting nothing
		}},
		{"GCRA 10/s burst 5, booked from a later instant", engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: s / 10}, []step{
			{verb: allow, cost: 5, allowed: true, resetAfter: s / 2},
			// Due at 100ms, booked from 300ms as an arrival then: the TAT
			// becomes max(500ms, 300ms) + 100ms, which a later booking's
			// could be: no At, and nothing to give back.
			{verb: reserve, cost: 1, maxDelay: s, from: 3 * s / 10, allowed: true, resetAfter: 6 * s / 10, delay: 3 * s / 10, noAt: true},
			{verb: reserve, cost: 1, maxDelay: s / 2, from: 6 * s / 10, retry: s / 10, resetAfter: 6 * s / 10},
			{verb: cancel, cost: 1, resetAfter: 6 * s / 10}, // by an instant that is now: nothing to give back
			// From rest, a later instant is an arrival then.
			{verb: reserve, cost: 1, at: 10 * s, maxDelay: s, from: 10*s + s/2, allowed: true, resetAfter: 6 * s / 10, delay: s / 2, noAt: true},
		}},
		{"leaky bucket 3 leaking 1.5/s", engine.Params{Kind: engine.KindLeakyBucket, Limit: 3, Interval: s, Amount: 1.5}, []step{
			{verb: allow, cost: 3, allowed: true, resetAfter: 2 * s},
			// 1.5 has leaked at 1s: the point moves there, full again.
			{verb: reserve, cost: 1.5, maxDelay: 2 * s, allowed: true, resetAfter: 3 * s, delay: s},
			// At 500ms, before the point, the level is 3 + 0.75.
			{verb: allow, cost: 0, at: s / 2, retry: s / 2, resetAfter: 5 * s / 2},
			{verb: reserve, cost: 1.5, at: s / 2, maxDelay: s / 2, retry: s, resetAfter: 5 * s / 2},
			// Given back a nanosecond late: the line of the bucket never
			// reserved, 1ns later, empty at 2s + 1ns.
			{verb: cancel, cost: 1.5, at: s / 2, booked: s, allowed: true, resetAfter: 3*s/2 + 1},
			{verb: cancel, cost: 1.5, at: s / 2, booked: s, resetAfter: 3*s/2 + 1},
			// 2.25 at 500ms: not even one unit fits, until 666666667.67ns.
			{verb: atMost, cost: 2.5, at: s / 2, retry: 166666668, resetAfter: 3*s/2 + 1},
			// 1.5 at 1s + 1ns: one unit fits, and 2.5 leaks in
			// 1666666666.67ns from then.
			{verb: atMost, cost: 2.5, at: s, allowed: true, resetAfter: 1666666668, granted: 1},
		}},
		{"leaky bucket 3 leaking 1.5/s, booked from a later instant", engine.Params{Kind: engine.KindLeakyBucket, Limit: 3, Interval: s, Amount: 1.5}, []step{
			{verb: allow, cost: 3, allowed: true, resetAfter: 2 * s},
			// Due at 1s, booked from 1.5s: 0.75 + 1.5 there.
			{verb: reserve, cost: 1.5, maxDelay: 2 * s, from: 3 * s / 2, allowed: true, resetAfter: 3 * s, delay: 3 * s / 2},
			{verb: cancel, cost: 1.5, booked: 3 * s / 2, allowed: true, resetAfter: 2*s + 1},
		}},
		{"token bucket 4/s burst 10, interval refill", engine.Params{Kind: engine.KindTokenBucket, Limit: 10, Interval: s, Amount: 4, IntervalRefill: true}, []step{
			{verb: allow, cost: 10, allowed: true, resetAfter: 3 * s},
			// The refill at 1s brings 4: booked there, 10 in use again.
			{verb: reserve, cost: 4, maxDelay: s, allowed: true, resetAfter: 4 * s, delay: s},
			// At 500ms, 14 in use counting the refill still to come.
			{verb: allow, cost: 1, at: s / 2, retry: 3 * s / 2, resetAfter: 7 * s / 2},
			{verb: reserve, cost: 4, at: s / 2, maxDelay: s, retry: s / 2, resetAfter: 7 * s / 2},
			// Given back a nanosecond late: 10 in use from 1ns, the
			// refills a nanosecond after the bucket's never reserved.
			{verb: cancel, cost: 4, at: s / 2, booked: s, allowed: true, resetAfter: 5*s/2 + 1},
			{verb: cancel, cost: 4, at: s / 2, booked: s, resetAfter: 5*s/2 + 1},
			{verb: allow, cost: 4, at: s, retry: 1, resetAfter: 2*s + 1},
			{verb: allow, cost: 4, at: s + 1, allowed: true, resetAfter: 3 * s},
			// 10 in use until 2s + 1ns brings 4: 4 of 4.5 then.
			{verb: atMost, cost: 4.5, at: 2*s + 1, allowed: true, resetAfter: 3 * s, granted: 4},
		}},
		{"token bucket 4/s burst 10, interval refill, booked from a later instant", engine.Params{Kind: engine.KindTokenBucket, Limit: 10, Interval: s, Amount: 4, IntervalRefill: true}, []step{
			{verb: allow, cost: 10, allowed: true, resetAfter: 3 * s},
			// Due at the refill at 1s, booked from 1.5s: the point is that
			// refill's, before the booking's instant: no At.
			{verb: reserve, cost: 4, maxDelay: 2 * s, from: 3 * s / 2, allowed: true, resetAfter: 4 * s, delay: 3 * s / 2, noAt: true},
			{verb: reserve, cost: 4, maxDelay: 2 * s, allowed: true, resetAfter: 5 * s, delay: 2 * s},
			{verb: cancel, cost: 4, booked: s, resetAfter: 5 * s}, // a later booking exists
		}},
		{"fixed window 5/s", engine.Params{Kind: engine.KindFixedWindow, Limit: 5, Interval: s}, []step{
			{verb: atMost, cost: 7, allowed: true, resetAfter: s, granted: 5},
			{verb: atMost, cost: 7, at: s / 2, retry: s / 2, resetAfter: s / 2},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := reference.New(tt.p)
			require.NoError(t, err)
			for i, st := range tt.steps {
				op := engine.Op{Verb: st.verb, Cost: st.cost, Now: t0 + st.at, MaxDelay: st.maxDelay}
				switch {
				case st.verb == cancel:
					op.At = t0 + st.booked
				case st.from != 0:
					op.At = t0 + st.from
				}
				d := m.Apply(op)
				require.Equal(t, st.allowed, d.Allowed, "step %d", i)
				require.Equal(t, st.retry, d.RetryAfter, "step %d RetryAfter", i)
				require.Equal(t, st.resetAfter, d.ResetAfter, "step %d ResetAfter", i)
				require.Equal(t, st.delay, d.Delay, "step %d Delay", i)
				if st.delay > 0 && !st.noAt {
					require.Equal(t, op.Now+st.delay, d.At, "step %d At", i)
				} else {
					require.Zero(t, d.At, "step %d At", i)
				}
				require.Equal(t, st.granted, d.Granted, "step %d Granted", i)
			}
		})
	}
}
