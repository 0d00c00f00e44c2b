package reference_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/reference"
)

// TestModelsExhaustAsDefined pins VerbExhaust, for each algorithm that
// supports it, to decisions worked out by hand from its definition: the
// key's whole limit in use at now + MaxDelay, whatever it holds beyond
// that kept, and the decision that of a check of the cost at now on the
// key so left (a block in force included), recorded whatever it says.
func TestModelsExhaustAsDefined(t *testing.T) {
	const s = int64(time.Second)
	const ms = int64(time.Millisecond)
	t0 := 1000 * s
	type step struct {
		op               engine.Op // Now, and a cancel's or a booking's At, after t0
		allowed, blocked bool
		used             float64 // unclamped, as the model gives it
		retry, reset     int64
	}
	allow := func(c float64, at int64) engine.Op { return engine.Op{Verb: engine.VerbAllow, Cost: c, Now: at} }
	check := func(c float64, at int64) engine.Op { return engine.Op{Verb: engine.VerbCheck, Cost: c, Now: at} }
	reserve := func(c float64, at, maxDelay int64) engine.Op {
		return engine.Op{Verb: engine.VerbReserve, Cost: c, Now: at, MaxDelay: maxDelay}
	}
	exhaust := func(c float64, at, maxDelay int64) engine.Op {
		return engine.Op{Verb: engine.VerbExhaust, Cost: c, Now: at, MaxDelay: maxDelay}
	}
	gcra, leaky, token, refill, penalized, counted := tableLimits()
	tests := []struct {
		name  string
		p     engine.Params
		steps []step
		until int64 // after t0: the block a strict key keeps after the steps, if not zero
	}{
		{"GCRA: a fresh key full now", gcra, []step{
			// TAT = now + bT: a unit fits once T has passed.
			{op: exhaust(1, 0, 0), used: 5, retry: 100 * ms, reset: 500 * ms},
			{op: exhaust(0, 0, 0), allowed: true, used: 5, reset: 500 * ms}, // a cost of nothing fits a full key
		}, 0},
		{"GCRA: full in 2s", gcra, []step{
			// TAT = 2s + 500ms: a unit fits from TAT + T - bT = 2.1s.
			{op: exhaust(1, 0, 2*s), used: 25, retry: 2100 * ms, reset: 2500 * ms},
			{op: exhaust(0, 0, 0), used: 25, retry: 2 * s, reset: 2500 * ms}, // never lowered
			{op: check(1, 2*s), used: 5, retry: 100 * ms, reset: 500 * ms},   // full at 2s
			{op: check(5, 2500*ms), allowed: true, used: 5, reset: 500 * ms}, // the burst's worth freed from then
		}, 0},
		{"GCRA: a later TAT of its own is kept", gcra, []step{
			{op: allow(5, 0), allowed: true, used: 5, reset: 500 * ms},
			// Booked at 300ms: TAT 800ms.
			{op: reserve(3, 0, s), allowed: true, used: 8, reset: 800 * ms},
			// Full at 200ms is TAT 700ms: the key's own is later.
			{op: exhaust(1, 0, 200*ms), used: 8, retry: 400 * ms, reset: 800 * ms},
			// Full at 400ms is TAT 900ms: later than its own.
			{op: exhaust(1, 0, 400*ms), used: 9, retry: 500 * ms, reset: 900 * ms},
		}, 0},
		{"GCRA whose burst rounds to no nanoseconds: full now is fresh", engine.Params{Kind: engine.KindGCRA, Limit: 0.25, Interval: 1}, []step{
			{op: exhaust(0, 0, 0), allowed: true},
			// Forgotten, as a fresh key is: a clock that steps back finds
			// no TAT at now.
			{op: check(0, -1), allowed: true},
		}, 0},
		{"leaky bucket: a fresh key full now", leaky, []step{
			// The point (now, 3): a unit leaks in 2/3s, rounded up.
			{op: exhaust(1, 0, 0), used: 3, retry: 666666667, reset: 2 * s},
			{op: exhaust(0, 0, 0), allowed: true, used: 3, reset: 2 * s},
		}, 0},
		{"leaky bucket: full in 1s", leaky, []step{
			// The point (1s, 3): 1.5 more before it, at now; 1.5 leaks in 1s after it.
			{op: exhaust(1.5, 0, s), used: 4.5, retry: 2 * s, reset: 3 * s},
		}, 0},
		{"leaky bucket: a booking's point higher than the line", leaky, []step{
			{op: allow(3, 0), allowed: true, used: 3, reset: 2 * s},
			// Booked when 1.5 has leaked: the point (1s, 3).
			{op: reserve(1.5, 0, 2*s), allowed: true, used: 4.5, reset: 3 * s},
			// The line through (500ms, 3) is at 2.25 at 1s: the point stays.
			{op: exhaust(0, 0, 500*ms), used: 4.5, retry: s, reset: 3 * s},
			// The point's line is at 2.25 at 1.5s: the point (1.5s, 3).
			{op: exhaust(0, 0, 1500*ms), used: 5.25, retry: 1500 * ms, reset: 3500 * ms},
		}, 0},
		{"leaky bucket: a booking's point lower than the line", leaky, []step{
			{op: allow(3, 0), allowed: true, used: 3, reset: 2 * s},
			{op: reserve(1.5, 0, 2*s), allowed: true, used: 4.5, reset: 3 * s},
			// Given back: the point (1s + 1ns, 1.5).
			{op: engine.Op{Verb: engine.VerbCancel, Cost: 1.5, At: s}, allowed: true, used: 3.0000000015, reset: 2*s + 1},
			// The line through (500ms, 3) is at 2.2499999985 at 1s + 1ns,
			// above the point: raised to it, 3.75 at now, empty at 2.5s.
			{op: exhaust(0, 0, 500*ms), used: 3.75, retry: 500 * ms, reset: 2500 * ms},
		}, 0},
		{"token bucket: full in 1s, what was in use leaked by then", token, []step{
			{op: allow(4, 0), allowed: true, used: 4, reset: s},
			// Empty by 1.5s: the point (1.5s, 10), 14 at 500ms; 2 more
			// fit half a second after it.
			{op: exhaust(2, 500*ms, s), used: 14, retry: 1500 * ms, reset: 3500 * ms},
		}, 0},
		{"interval refill: a fresh key full now", refill, []step{
			// The point (now, 10): a unit fits at the first refill, 10
			// tokens come back after three.
			{op: exhaust(1, 0, 0), used: 10, retry: s, reset: 3 * s},
		}, 0},
		{"interval refill: the key's refill instants", refill, []step{
			{op: allow(10, 0), allowed: true, used: 10, reset: 3 * s},
			// Seen at 2.5s: 2 in use since the refill at 2s, made 10 there.
			{op: exhaust(1, 2500*ms, 0), used: 10, retry: 500 * ms, reset: 2500 * ms},
		}, 0},
		{"interval refill: full again by then, its refill clock starts over", refill, []step{
			{op: allow(4, 0), allowed: true, used: 4, reset: s},
			// Full again at 1s: the point (1.5s, 10), 18 in use at now
			// counting the two refills to come before it.
			{op: exhaust(4, 0, 1500*ms), used: 18, retry: 2500 * ms, reset: 4500 * ms},
		}, 0},
		{"interval refill: a booking's point", refill, []step{
			// Booked from 2.5s, as a group books: the point (2.5s, 1).
			// Three refills to come before it at now: 13 in use.
			{op: engine.Op{Verb: engine.VerbReserve, Cost: 1, MaxDelay: 5 * s, At: 2500 * ms}, allowed: true, used: 13, reset: 3500 * ms},
			// 10 in use at 1s is 2 at 2.5s, after the refills at 1.5s and
			// 2.5s: raised to it. A unit fits at the refill at 1.5s.
			{op: exhaust(1, 0, s), used: 14, retry: 1500 * ms, reset: 3500 * ms},
			// 10 in use at 500ms is 2 at 2.5s too: unchanged.
			{op: exhaust(1, 0, 500*ms), used: 14, retry: 1500 * ms, reset: 3500 * ms},
		}, 0},
		{"GCRA under a penalty: a block in force is reported and kept", penalized, []step{
			{op: allow(5, 0), allowed: true, used: 5, reset: 500 * ms},
			{op: allow(1, 0), blocked: true, used: 5, retry: 30 * s, reset: 30 * s},
			// TAT 10.5s; the block ends at 30s.
			{op: exhaust(1, 10*s, 0), blocked: true, used: 5, retry: 20 * s, reset: 20 * s},
			// A cost that fits still describes the key as it stands.
			{op: exhaust(0, 20*s, 0), blocked: true, used: 5, retry: 10 * s, reset: 10 * s},
			// After the block: the algorithm's check, no block started.
			{op: exhaust(1, 40*s, s), used: 15, retry: 1100 * ms, reset: 1500 * ms},
		}, 30 * s}, // the exhaust after the block left it as it was
		{"leaky bucket, denials counted and penalized: an exhaust neither counts nor blocks", counted, []step{
			{op: exhaust(1, 0, 0), used: 3, retry: 666666667, reset: 2 * s},
			{op: exhaust(1, 0, 0), used: 3, retry: 666666667, reset: 2 * s},
			{op: allow(1, 0), blocked: true, used: 3, retry: 10 * s, reset: 10 * s}, // an Allow does
		}, 10 * s},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newStepper(t, tt.p)
			for i, st := range tt.steps {
				op := st.op
				op.Now += t0
				if op.At != 0 {
					op.At += t0
				}
				d, blocked := m.decide(op)
				require.Equal(t, st.blocked, blocked, "step %d: Blocked", i)
				used, _ := d.Used.Float64()
				require.Equal(t, st.allowed, d.Allowed, "step %d: Allowed", i)
				require.InDelta(t, st.used, used, 1e-9, "step %d: Used", i)
				require.Equal(t, st.retry, d.RetryAfter, "step %d: RetryAfter", i)
				require.Equal(t, st.reset, d.ResetAfter, "step %d: ResetAfter", i)
				if op.Verb == engine.VerbExhaust {
					require.Zero(t, d.Delay, "step %d: Delay", i)
					require.Zero(t, d.At, "step %d: At", i)
					require.True(t, reference.Records(op.Verb, d), "step %d: an exhaust records", i)
				}
			}
			if m.strict != nil {
				want := int64(0)
				if tt.until != 0 {
					want = t0 + tt.until
				}
				require.Equal(t, want, m.strict.Until(), "the block the key keeps")
			}
		})
	}
}

// TestExhaustReadsAStateKeptUnderAnotherLimitAsItsOwn: after a change of
// limit, an exhaust first carries a GCRA TAT of another interval over at
// its now, as every decision but a check does, and then fills up under
// the new limit; a bucket's point is read at the new rate.
func TestExhaustReadsAStateKeptUnderAnotherLimitAsItsOwn(t *testing.T) {
	const s = int64(time.Second)
	const ms = int64(time.Millisecond)
	t0 := 1000 * s
	t.Run("GCRA", func(t *testing.T) {
		m, err := reference.New(engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: 100 * ms})
		require.NoError(t, err)
		require.True(t, m.Apply(engine.Op{Verb: engine.VerbAllow, Cost: 5, Now: t0}).Allowed) // TAT 500ms
		m, err = reference.Change(m, engine.Params{Kind: engine.KindGCRA, Limit: 2, Interval: 200 * ms})
		require.NoError(t, err)
		// At 100ms the TAT holds 4 units, 800ms at the new interval: TAT
		// 900ms, later than full at 100ms (TAT 500ms). A unit fits from
		// 900ms + 200ms - 400ms.
		d := m.Apply(engine.Op{Verb: engine.VerbExhaust, Cost: 1, Now: t0 + 100*ms})
		require.False(t, d.Allowed)
		require.Equal(t, 600*ms, d.RetryAfter)
		require.Equal(t, 800*ms, d.ResetAfter)
		require.Equal(t, "4", d.Used.RatString())
		at, ok := reference.Expiry(m)
		require.True(t, ok)
		require.Equal(t, t0+900*ms, at, "recorded")
		// Recorded converted: a check later reads the same TAT.
		d = m.Apply(engine.Op{Verb: engine.VerbCheck, Cost: 1, Now: t0 + 300*ms})
		require.Equal(t, 400*ms, d.RetryAfter)
		require.Equal(t, 600*ms, d.ResetAfter)
	})
	t.Run("leaky bucket", func(t *testing.T) {
		m, err := reference.New(engine.Params{Kind: engine.KindLeakyBucket, Limit: 3, Interval: s, Amount: 1.5})
		require.NoError(t, err)
		require.True(t, m.Apply(engine.Op{Verb: engine.VerbAllow, Cost: 3, Now: t0}).Allowed)
		m, err = reference.Change(m, engine.Params{Kind: engine.KindLeakyBucket, Limit: 6, Interval: s, Amount: 3})
		require.NoError(t, err)
		// At 500ms the point (0, 3) is at 1.5 at 3/s: below 6, so the
		// point (500ms, 6). A unit leaks in 1/3s, 6 in 2s.
		d := m.Apply(engine.Op{Verb: engine.VerbExhaust, Cost: 1, Now: t0 + 500*ms})
		require.False(t, d.Allowed)
		require.Equal(t, int64(333333334), d.RetryAfter)
		require.Equal(t, 2*s, d.ResetAfter)
		require.Equal(t, "6", d.Used.RatString())
	})
}
