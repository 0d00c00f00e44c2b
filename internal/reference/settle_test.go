package reference_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/reference"
)

// TestModelsSettleAsDefined pins VerbCharge and VerbRefund, for each
// algorithm that supports them, to decisions worked out by hand from their
// definition: the cost recorded at the key's latest point (now, or the
// later instant a booking left), beyond the limit if need be and up to
// what the rate frees in 2^60 ns, or given back there, down to empty at
// the most; Granted what was moved; and the decision that of a check of
// nothing at now on the key so left (a block in force included), recorded
// whatever it says.
func TestModelsSettleAsDefined(t *testing.T) {
	const s = int64(time.Second)
	const ms = int64(time.Millisecond)
	const span = int64(1) << 60
	const huge = 0x1p1000
	t0 := 1000 * s
	type step struct {
		op               engine.Op // Now, and a booking's At, after t0
		allowed, blocked bool
		granted          float64
		used             float64 // unclamped, as the model gives it
		retry, reset     int64
	}
	allow := func(c float64, at int64) engine.Op { return engine.Op{Verb: engine.VerbAllow, Cost: c, Now: at} }
	check := func(c float64, at int64) engine.Op { return engine.Op{Verb: engine.VerbCheck, Cost: c, Now: at} }
	reserve := func(c float64, at, maxDelay int64) engine.Op {
		return engine.Op{Verb: engine.VerbReserve, Cost: c, Now: at, MaxDelay: maxDelay}
	}
	charge := func(c float64, at int64) engine.Op { return engine.Op{Verb: engine.VerbCharge, Cost: c, Now: at} }
	refund := func(c float64, at int64) engine.Op { return engine.Op{Verb: engine.VerbRefund, Cost: c, Now: at} }
	gcra, leaky, token, refill, penalized, counted := tableLimits()
	// The ceilings: what each rate frees in 2^60 ns.
	gcraCeiling := float64(span) / float64(100*ms)  // 2^60 / T units
	leakyCeiling := 1729382256.910270464            // 2^60 * 1.5 / 1e9
	refillCeiling := float64(span/s) * 4            // floor(2^60 / 1e9) refills of 4
	refillDebt := int64((refillCeiling-10)/4+1) * s // ceil((ceiling - burst) / 4) refills
	refillReset := int64(refillCeiling/4) * s       // ceiling / 4 refills
	tests := []struct {
		name  string
		p     engine.Params
		steps []step
		until int64 // after t0: the block a strict key keeps after the steps, if not zero
	}{
		{"GCRA: a charge into debt is denied until repaid", gcra, []step{
			{op: allow(5, 0), allowed: true, used: 5, reset: 500 * ms},
			// TAT 800ms: nothing fits before 800ms - bT.
			{op: charge(3, 0), granted: 3, used: 8, retry: 300 * ms, reset: 800 * ms},
			{op: check(0, 299*ms), used: 5.01, retry: ms, reset: 501 * ms},
			{op: check(0, 300*ms), allowed: true, used: 5, reset: 500 * ms},
			{op: check(1, 300*ms), used: 5, retry: 100 * ms, reset: 500 * ms}, // from then as after a burst
		}, 0},
		{"GCRA: a charge onto a fresh key", gcra, []step{
			{op: charge(2, 0), allowed: true, granted: 2, used: 2, reset: 200 * ms},
			{op: charge(0, 0), allowed: true, used: 2, reset: 200 * ms}, // nothing moved
		}, 0},
		{"GCRA: a refund never below empty", gcra, []step{
			{op: allow(2, 0), allowed: true, used: 2, reset: 200 * ms},
			// 1.5 held at 50ms: all of it given back, and the key fresh.
			{op: refund(5, 50*ms), allowed: true, granted: 1.5},
			{op: refund(1, 60*ms), allowed: true}, // nothing held
			{op: check(5, 60*ms), allowed: true, used: 5, reset: 500 * ms},
		}, 0},
		{"GCRA: a refund at a booked future point", gcra, []step{
			{op: allow(5, 0), allowed: true, used: 5, reset: 500 * ms},
			// Booked for 300ms: TAT 800ms.
			{op: reserve(3, 0, s), allowed: true, used: 8, reset: 800 * ms},
			// TAT 600ms: a cost of nothing fits from 100ms.
			{op: refund(2, 0), granted: 2, used: 6, retry: 100 * ms, reset: 600 * ms},
			// 6 held at the TAT, seen now: down to now.
			{op: refund(10, 0), allowed: true, granted: 6},
		}, 0},
		{"GCRA: a cost's nanoseconds round half away from zero", engine.Params{Kind: engine.KindGCRA, Limit: 2, Interval: 3}, []step{
			{op: charge(0.5, 0), allowed: true, granted: 0.5, used: 2.0 / 3, reset: 2}, // 1.5ns is 2
			{op: refund(0.5, 0), allowed: true, granted: 0.5},                          // and back
			{op: allow(2, 0), allowed: true, used: 2, reset: 6},
			{op: refund(0.5, 0), allowed: true, granted: 0.5, used: 4.0 / 3, reset: 4},
		}, 0},
		{"GCRA: the ceiling", gcra, []step{
			// TAT now + 2^60: 2^60/T recorded.
			{op: charge(huge, 0), granted: gcraCeiling, used: gcraCeiling, retry: span - 500*ms, reset: span},
			{op: charge(1, 0), granted: 0, used: gcraCeiling, retry: span - 500*ms, reset: span},
			// A second later there is room for 10: a cost of 20 records that.
			{op: charge(20, s), granted: 10, used: gcraCeiling, retry: span - 500*ms, reset: span},
			// And all of it can be given back.
			{op: refund(huge, s), allowed: true, granted: gcraCeiling},
		}, 0},
		{"GCRA: beyond the ceiling, a booking's TAT records nothing more", gcra, []step{
			{op: engine.Op{Verb: engine.VerbExhaust, Now: 0, MaxDelay: span}, used: gcraCeiling + 5, retry: span, reset: span + 500*ms},
			{op: charge(1, 0), granted: 0, used: gcraCeiling + 5, retry: span, reset: span + 500*ms},
		}, 0},
		{"leaky bucket: a charge into debt is denied until repaid", leaky, []step{
			{op: allow(3, 0), allowed: true, used: 3, reset: 2 * s},
			// 4.5: the excess of 1.5 leaks in a second.
			{op: charge(1.5, 0), granted: 1.5, used: 4.5, retry: s, reset: 3 * s},
			{op: check(0, s-1), used: 3.0000000015, retry: 1, reset: 2*s + 1},
			{op: check(0, s), allowed: true, used: 3, reset: 2 * s},
		}, 0},
		{"leaky bucket: a refund never below empty", leaky, []step{
			{op: allow(3, 0), allowed: true, used: 3, reset: 2 * s},
			// 1.5 held at 1s: all of it given back, and the key fresh.
			{op: refund(5, s), allowed: true, granted: 1.5},
			{op: check(3, s), allowed: true, used: 3, reset: 2 * s},
		}, 0},
		{"leaky bucket: a refund at a booked future point", leaky, []step{
			{op: allow(3, 0), allowed: true, used: 3, reset: 2 * s},
			// Booked for 1s: the point (1s, 3), 4.5 now.
			{op: reserve(1.5, 0, 2*s), allowed: true, used: 4.5, reset: 3 * s},
			// The point (1s, 2), 3.5 now: nothing fits until a third of
			// a second, rounded up.
			{op: refund(1, 0), granted: 1, used: 3.5, retry: 333333334, reset: 2333333334},
			// 2 held at the point: the point (1s, 0) is kept, 1.5 now.
			{op: refund(5, 0), allowed: true, granted: 2, used: 1.5, reset: s},
		}, 0},
		{"leaky bucket: the ceiling", leaky, []step{
			{op: charge(huge, 0), granted: leakyCeiling, used: leakyCeiling, retry: span - 2*s, reset: span},
			{op: charge(1, 0), granted: 0, used: leakyCeiling, retry: span - 2*s, reset: span},
			// 1.5 has leaked a second later: that much room.
			{op: charge(3, s), granted: 1.5, used: leakyCeiling, retry: span - 2*s, reset: span},
			{op: refund(huge, s), allowed: true, granted: leakyCeiling},
		}, 0},
		{"token bucket: a charge into debt, and its refund", token, []step{
			{op: allow(10, 0), allowed: true, used: 10, reset: 2500 * ms},
			{op: charge(2, 0), granted: 2, used: 12, retry: 500 * ms, reset: 3 * s},
			{op: refund(2, 250*ms), allowed: true, granted: 2, used: 9, reset: 2250 * ms},
		}, 0},
		{"interval refill: a charge into debt is denied until repaid", refill, []step{
			{op: allow(10, 0), allowed: true, used: 10, reset: 3 * s},
			// 15 in use: two refills bring it back to 7.
			{op: charge(5, 0), granted: 5, used: 15, retry: 2 * s, reset: 4 * s},
			{op: check(0, 2*s-1), used: 11, retry: 1, reset: 2*s + 1},
			{op: check(0, 2*s), allowed: true, used: 7, reset: 2 * s},
		}, 0},
		{"interval refill: a refund never below empty", refill, []step{
			{op: allow(6, 0), allowed: true, used: 6, reset: 2 * s},
			// 2 in use since the refill at 1s: all of it given back, and
			// the key fresh.
			{op: refund(10, 1500*ms), allowed: true, granted: 2},
		}, 0},
		{"interval refill: a refund at a booked future point", refill, []step{
			{op: allow(10, 0), allowed: true, used: 10, reset: 3 * s},
			// Booked for the refill at 1s: the point (1s, 10), 14 now.
			{op: reserve(4, 0, 2*s), allowed: true, used: 14, reset: 4 * s},
			// The point (1s, 6), 10 now.
			{op: refund(4, 0), allowed: true, granted: 4, used: 10, reset: 3 * s},
			// The point (1s, 0) is kept, empty: 4 in use now, the
			// refill still to come.
			{op: refund(10, 0), allowed: true, granted: 6, used: 4, reset: s},
		}, 0},
		{"interval refill: the ceiling", refill, []step{
			{op: charge(huge, 0), granted: refillCeiling, used: refillCeiling, retry: refillDebt, reset: refillReset},
			{op: charge(1, 0), granted: 0, used: refillCeiling, retry: refillDebt, reset: refillReset},
			// A refill later, 4 tokens of room.
			{op: charge(10, s), granted: 4, used: refillCeiling, retry: refillDebt, reset: refillReset},
			{op: refund(huge, s), allowed: true, granted: refillCeiling},
		}, 0},
		{"GCRA under a penalty: a block in force is reported and kept", penalized, []step{
			{op: allow(5, 0), allowed: true, used: 5, reset: 500 * ms},
			{op: allow(1, 0), blocked: true, used: 5, retry: 30 * s, reset: 30 * s},
			// TAT 10.2s; the block ends at 30s.
			{op: charge(2, 10*s), blocked: true, granted: 2, used: 2, retry: 20 * s, reset: 20 * s},
			{op: refund(5, 10*s), blocked: true, granted: 2, retry: 20 * s, reset: 20 * s},
			// The TAT left at now is fresh, and forgotten, as without a
			// penalty: only the block is kept, and a clock that steps back
			// finds nothing in use before now.
			{op: check(0, 9900*ms), blocked: true, retry: 20100 * ms, reset: 20100 * ms},
			// After the block: the algorithm's check, no block started.
			{op: charge(7, 40*s), granted: 7, used: 7, retry: 200 * ms, reset: 700 * ms},
		}, 30 * s}, // the charge after the block left it as it was
		{"leaky bucket, denials counted and penalized: a settlement neither counts nor blocks", counted, []step{
			{op: charge(4, 0), granted: 4, used: 4, retry: 666666667, reset: 2666666667},
			{op: refund(1, 0), allowed: true, granted: 1, used: 3, reset: 2 * s},
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
				require.InDelta(t, st.used, used, 1e-9*max(st.used, 1), "step %d: Used", i)
				require.Equal(t, st.retry, d.RetryAfter, "step %d: RetryAfter", i)
				require.Equal(t, st.reset, d.ResetAfter, "step %d: ResetAfter", i)
				if op.Verb == engine.VerbCharge || op.Verb == engine.VerbRefund {
					require.Equal(t, st.granted, d.Granted, "step %d: Granted", i)
					require.Zero(t, d.Delay, "step %d: Delay", i)
					require.Zero(t, d.At, "step %d: At", i)
					require.True(t, reference.Records(op.Verb, d), "step %d: a %v records", i, op.Verb)
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

// TestSettleReadsAStateKeptUnderAnotherLimitAsItsOwn: after a change of
// limit, a charge or a refund first carries a GCRA TAT of another
// interval over at its now, as every decision but a check does, and then
// settles under the new limit.
func TestSettleReadsAStateKeptUnderAnotherLimitAsItsOwn(t *testing.T) {
	const ms = int64(time.Millisecond)
	t0 := int64(1000 * time.Second)
	for _, tc := range []struct {
		op                 engine.Op
		granted, used      float64
		retry, reset, keep int64
	}{
		// At 100ms the TAT holds 4 units, 800ms at the new interval: TAT
		// 900ms, and 1.1s after the charge of one. Nothing fits before
		// 1.1s - 400ms.
		{op: engine.Op{Verb: engine.VerbCharge, Cost: 1}, granted: 1, used: 5, retry: 600 * ms, reset: 1000 * ms, keep: 1100 * ms},
		// TAT 700ms after the refund of one: 3 held, 1 over the burst.
		{op: engine.Op{Verb: engine.VerbRefund, Cost: 1}, granted: 1, used: 3, retry: 200 * ms, reset: 600 * ms, keep: 700 * ms},
	} {
		t.Run(tc.op.Verb.String(), func(t *testing.T) {
			m, err := reference.New(engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: 100 * ms})
			require.NoError(t, err)
			require.True(t, m.Apply(engine.Op{Verb: engine.VerbAllow, Cost: 5, Now: t0}).Allowed) // TAT 500ms
			m, err = reference.Change(m, engine.Params{Kind: engine.KindGCRA, Limit: 2, Interval: 200 * ms})
			require.NoError(t, err)
			op := tc.op
			op.Now = t0 + 100*ms
			d := m.Apply(op)
			require.False(t, d.Allowed)
			require.Equal(t, tc.granted, d.Granted)
			used, _ := d.Used.Float64()
			require.Equal(t, tc.used, used)
			require.Equal(t, tc.retry, d.RetryAfter)
			require.Equal(t, tc.reset, d.ResetAfter)
			at, ok := reference.Expiry(m)
			require.True(t, ok)
			require.Equal(t, t0+tc.keep, at, "recorded")
		})
	}
}

// TestADebtReadUnderASlowerLimitWaitsAtMostTheSpan pins the models of a
// bucket charged to the ceiling, what its rate frees in 2^60 ns, and read
// under a limit of a slower rate, which holds more than it frees in 2^60
// ns: its durations are capped, as every duration is. The meter (here the
// token bucket refilled continuously) says to wait until 2^60 ns after its
// point, and forgives its level whole then; the interval refill counts the
// refills of 2^60 ns and one more at most, floor(2^60/Interval) + 1, and
// forgives nothing: read at that refill, it is still in debt, and waits
// as long again. (A store forgets either key at its expiry, now plus the
// ResetAfter capped the same way, by then.)
func TestADebtReadUnderASlowerLimitWaitsAtMostTheSpan(t *testing.T) {
	const s = int64(time.Second)
	const span = int64(1) << 60
	t0 := 1000 * s
	allow := func(at int64) engine.Op { return engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: t0 + at} }
	for _, tc := range []struct {
		refill  bool
		granted float64 // the ceiling at 4 a second
		wait    int64   // after the point
		reset   int64   // after 1ns
		then    bool    // whether the key admits at the point plus wait
	}{
		// 2^60 * 4/s; at 0.5/s it holds 8 * 2^60 ns of leak. Its reset,
		// from a point before now, counts 2^60 ns from now.
		{refill: false, granted: 4611686018.427387904, wait: span, reset: span, then: true},
		// floor(2^60/s) = 1152921504 refills of 4; at 0.5 a refill it
		// holds 8 times as many.
		{refill: true, granted: 1152921504 * 4, wait: 1152921505 * s, reset: 1152921505*s - 1, then: false},
	} {
		t.Run(map[bool]string{false: "meter", true: "interval refill"}[tc.refill], func(t *testing.T) {
			fast := engine.Params{Kind: engine.KindTokenBucket, Limit: 10, Interval: s, Amount: 4, IntervalRefill: tc.refill}
			slow := fast
			slow.Amount = 0.5
			m, err := reference.New(fast)
			require.NoError(t, err)
			d := m.Apply(engine.Op{Verb: engine.VerbCharge, Cost: 0x1p1000, Now: t0})
			require.Equal(t, tc.granted, d.Granted)
			m, err = reference.Change(m, slow)
			require.NoError(t, err)
			d = m.Apply(allow(1))
			require.False(t, d.Allowed)
			require.Equal(t, tc.wait-1, d.RetryAfter, "capped")
			require.Equal(t, tc.reset, d.ResetAfter, "capped")

			// The key as the charge left it, read under the slower limit
			// at the end of the wait, and a nanosecond before.
			read := func(at int64) reference.Decision {
				m, err := reference.New(slow)
				require.NoError(t, err)
				m.Load(engine.State{Time: t0, A: tc.granted})
				return m.Apply(allow(at))
			}
			require.False(t, read(tc.wait-1).Allowed)
			d = read(tc.wait)
			require.Equal(t, tc.then, d.Allowed)
			if tc.then {
				used, _ := d.Used.Float64()
				require.Equal(t, 1.0, used, "forgiven: admitted from empty")
				require.Equal(t, 2*s, d.ResetAfter)
			} else {
				require.Equal(t, tc.wait, d.RetryAfter, "still in debt: as long again")
			}
		})
	}
}
