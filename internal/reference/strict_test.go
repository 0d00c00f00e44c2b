package reference_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/reference"
)

// TestStrictModelGivesHandComputedDecisions pins the model of penalties
// and counted denials to decisions worked out by hand from their
// definitions (docs/limits.md, Params.Penalty and CountDenied).
func TestStrictModelGivesHandComputedDecisions(t *testing.T) {
	const s = int64(time.Second)
	t0 := 1000 * s
	type step struct {
		op                  engine.Op // Now in ns after t0
		allowed, blocked    bool
		used                float64
		retry, reset, delay int64
	}
	allow := func(c float64, at int64) engine.Op { return engine.Op{Verb: engine.VerbAllow, Cost: c, Now: at} }
	check := func(c float64, at int64) engine.Op { return engine.Op{Verb: engine.VerbCheck, Cost: c, Now: at} }
	gcra := engine.Params{Kind: engine.KindGCRA, Limit: 2, Interval: s}
	penalized := gcra
	penalized.Penalty = 30 * s
	counted := gcra
	counted.CountDenied = true
	both := engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: s, Penalty: 60 * s, CountDenied: true}
	leaky := engine.Params{Kind: engine.KindLeakyBucket, Limit: 4, Interval: s, Amount: 2, Penalty: 10 * s}
	window := engine.Params{Kind: engine.KindFixedWindow, Limit: 2.5, Interval: s, CountDenied: true}
	tests := []struct {
		name  string
		p     engine.Params
		steps []step
	}{
		{"a penalty blocks from the overflow for its length, never extended", penalized, []step{
			{op: allow(2, 0), allowed: true, used: 2, reset: 2 * s},
			{op: check(1, 0), used: 2, retry: s, reset: 2 * s},                         // a check starts no block
			{op: allow(1, 0), blocked: true, used: 2, retry: 30 * s, reset: 30 * s},    // the overflow
			{op: allow(1, 10*s), blocked: true, used: 0, retry: 20 * s, reset: 20 * s}, // drained, still blocked
			{op: check(0, 10*s), blocked: true, used: 0, retry: 20 * s, reset: 20 * s}, // even a cost of nothing
			{op: engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: 10 * s, MaxDelay: 19 * s}, // cannot wait for the end
				blocked: true, used: 0, retry: s, reset: 20 * s},
			{op: engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: 10 * s, MaxDelay: 20 * s}, // booked at the end
				allowed: true, blocked: true, used: 21, delay: 20 * s, reset: 21 * s},
			{op: allow(1, 30*s), allowed: true, used: 2, reset: 2 * s},                 // at the end: the algorithm decides
			{op: allow(1, 30*s), blocked: true, used: 2, retry: 30 * s, reset: 30 * s}, // and a new overflow blocks again
		}},
		{"a counted denial fills the key, and RetryAfter waits for a whole request from full", counted, []step{
			{op: allow(2, 0), allowed: true, used: 2, reset: 2 * s},
			{op: allow(1, s/2), used: 2, retry: s, reset: 2 * s},     // half a unit was free: filled
			{op: allow(1, s+s/2-1), used: 2, retry: s, reset: 2 * s}, // a nanosecond early: filled again
			{op: allow(1, 2*s+s/2-1), allowed: true, used: 2, reset: 2 * s},
		}},
		{"a counted denial in a block fills the key to its limit", both, []step{
			{op: allow(5, 0), allowed: true, used: 5, reset: 5 * s},
			{op: allow(1, 0), blocked: true, used: 5, retry: 60 * s, reset: 60 * s},
			{op: allow(1, 30*s), blocked: true, used: 5, retry: 30 * s, reset: 30 * s},
			{op: check(5, 59*s), blocked: true, used: 0, retry: s, reset: s},
			{op: allow(5, 60*s), allowed: true, used: 5, reset: 5 * s},
		}},
		{"a fill-up past capacity starts a block; in it a fill-up records but does not fit", leaky, []step{
			{op: engine.Op{Verb: engine.VerbFill, Cost: 5, Now: 0}, blocked: true, used: 4, retry: 10 * s, reset: 10 * s},
			{op: engine.Op{Verb: engine.VerbFill, Cost: 1, Now: s}, blocked: true, used: 3, retry: 9 * s, reset: 9 * s},
			{op: engine.Op{Verb: engine.VerbAtMost, Cost: 3, Now: s}, blocked: true, used: 3, retry: 9 * s, reset: 9 * s},
			{op: engine.Op{Verb: engine.VerbAtMost, Cost: 3, Now: 10 * s}, allowed: true, used: 3, reset: 3 * s / 2},
		}},
		{"a counted denial fills what room a window has left", window, []step{
			{op: allow(2, 0), allowed: true, used: 2, reset: s},
			{op: allow(1, s/4), used: 2.5, retry: 3 * s / 4, reset: 3 * s / 4},
			{op: allow(0.5, s/2), used: 2.5, retry: s / 2, reset: s / 2},
			{op: allow(1, s), allowed: true, used: 1, reset: s},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := reference.NewStrict(tt.p)
			require.NoError(t, err)
			for i, st := range tt.steps {
				op := st.op
				op.Now += t0
				d := m.Decide(op)
				used, _ := d.Used.Float64()
				require.Equal(t, st.allowed, d.Allowed, "step %d: Allowed", i)
				require.Equal(t, st.blocked, d.Blocked, "step %d: Blocked", i)
				require.InDelta(t, st.used, used, 1e-9, "step %d: Used", i)
				require.Equal(t, st.retry, d.RetryAfter, "step %d: RetryAfter", i)
				require.Equal(t, st.reset, d.ResetAfter, "step %d: ResetAfter", i)
				require.Equal(t, st.delay, d.Delay, "step %d: Delay", i)
			}
		})
	}
}

// TestStrictModelKeepsABlockUntilARecordedDecisionEndsIt steps the clock
// back before a block's end: after decisions that record nothing the key
// is blocked again; after a recorded one it is not.
func TestStrictModelKeepsABlockUntilARecordedDecisionEndsIt(t *testing.T) {
	const s = int64(time.Second)
	t0 := 1000 * s
	p := engine.Params{Kind: engine.KindFixedWindow, Limit: 1, Interval: s, Penalty: 5 * s}
	m, err := reference.NewStrict(p)
	require.NoError(t, err)
	require.True(t, m.Decide(engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: t0}).Allowed)
	require.True(t, m.Decide(engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: t0}).Blocked)
	require.Equal(t, t0+5*s, m.Until())

	d := m.Decide(engine.Op{Verb: engine.VerbCheck, Cost: 1, Now: t0 + 6*s})
	require.True(t, d.Allowed, "the block has ended")
	require.False(t, d.Blocked)
	d = m.Decide(engine.Op{Verb: engine.VerbCheck, Cost: 1, Now: t0 + 4*s})
	require.True(t, d.Blocked, "a check recorded nothing: the clock stepped back into the block")
	require.Equal(t, s, d.RetryAfter)

	require.True(t, m.Decide(engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: t0 + 6*s}).Allowed)
	require.Zero(t, m.Until(), "an admission after the block writes the key back without it")
	d = m.Decide(engine.Op{Verb: engine.VerbAllow, Cost: 0, Now: t0 + 4*s})
	require.False(t, d.Blocked)
}

func TestStrictModelWithoutOptionsIsTheAlgorithm(t *testing.T) {
	const s = int64(time.Second)
	p := engine.Params{Kind: engine.KindTokenBucket, Limit: 3, Interval: s, Amount: 1}
	strict, err := reference.NewStrict(p)
	require.NoError(t, err)
	plain, err := reference.New(p)
	require.NoError(t, err)
	for i, op := range []engine.Op{
		{Verb: engine.VerbAllow, Cost: 3, Now: 10 * s},
		{Verb: engine.VerbAllow, Cost: 1, Now: 10 * s},
		{Verb: engine.VerbReserve, Cost: 1, Now: 10 * s, MaxDelay: 2 * s},
		{Verb: engine.VerbCancel, Cost: 1, Now: 10 * s, At: 11 * s},
		{Verb: engine.VerbAtMost, Cost: 5, Now: 12 * s},
		{Verb: engine.VerbCheck, Cost: 2, Now: 12 * s},
	} {
		got, want := strict.Decide(op), plain.Apply(op)
		require.False(t, got.Blocked)
		require.Equal(t, want, got.Decision, "op %d", i)
	}
}

// TestACountedDenialOnAFullLogIsCloseToCallUnlessItsFloatSumIsExact: a
// counted denial on a sliding log the model finds exactly full fills
// nothing, but the float code, whose sums of decimal costs round, may
// find a hair of room and merge it into the newest entry, moving it to
// now: the decision lies on that threshold (its margin within Band).
// Costs whose float sums are exact leave no hair, and are compared.
func TestACountedDenialOnAFullLogIsCloseToCallUnlessItsFloatSumIsExact(t *testing.T) {
	const ms = int64(time.Millisecond)
	t0 := 1000 * int64(time.Second)
	log := engine.Params{Kind: engine.KindSlidingLog, Limit: 4, Interval: 1000 * ms, MaxEntries: 2, CountDenied: true}
	for _, tt := range []struct {
		name        string
		first, more float64
		lenient     bool
	}{
		{"decimal costs", 1.23, 0.8, true},
		{"dyadic costs", 1.25, 0.75, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := reference.NewStrict(log)
			require.NoError(t, err)
			require.True(t, m.Decide(engine.Op{Verb: engine.VerbAllow, Cost: tt.first, Now: t0}).Allowed)
			require.True(t, m.Decide(engine.Op{Verb: engine.VerbAllow, Cost: tt.more, Now: t0 + 700*ms}).Allowed)
			// Denied and counted: the room fills, merged into the newest
			// entry (two entries at most).
			require.False(t, m.Decide(engine.Op{Verb: engine.VerbAllow, Cost: 3.1, Now: t0 + 700*ms}).Allowed)
			d := m.Decide(engine.Op{Verb: engine.VerbAllow, Cost: 2.29, Now: t0 + 701*ms})
			require.False(t, d.Allowed)
			used, _ := d.Used.Float64()
			require.Equal(t, 4.0, used, "exactly full")
			require.Equal(t, tt.lenient, d.Margin <= reference.Band, "margin %v", d.Margin)
		})
	}
}
