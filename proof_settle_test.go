package sluice_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/guarantees"
	"github.com/sluice-go/sluice/internal/reference"
)

// Each of the following pins a behaviour of VerbCharge and VerbRefund, as
// package engine defines them (settle.go) and the models of
// internal/reference have them, on the smallest trace that shows it:
// the random traces of the proofs reach each of them only now and then.

// TestASettlementInABlockForgetsAFreshAlgorithmState: a refund that
// empties the key leaves the algorithm's state fresh at now, and a fresh
// state is the zero State, so that keeping it and forgetting the key are
// the same, even for a clock that steps back. Under a penalty, a block in
// force keeps the key, but only the block: a settlement, as every other
// decision the algorithm records in a block (an admission, a fill-up, a
// cancel), forgets an algorithm's state it leaves fresh and keeps Until
// alone, as reference.Strict does. A clock that steps back before now
// then finds the key fresh (but for its block), as the same key without a
// penalty, and not holding what the emptied point's line held then.
func TestASettlementInABlockForgetsAFreshAlgorithmState(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC).UnixNano()
	for _, alg := range reservingAlgorithms(t) {
		t.Run(alg.name, func(t *testing.T) {
			for _, penalty := range []int64{0, 10 * guarantees.Period(alg.params)} {
				p := alg.params
				p.Penalty = penalty
				st, d, err := p.Step(engine.State{}, engine.Op{Verb: engine.VerbAllow, Cost: p.Limit, Now: now})
				require.NoError(t, err)
				require.True(t, d.Allowed)
				st, _, err = p.Step(st, engine.Op{Verb: engine.VerbAllow, Cost: p.Limit, Now: now})
				require.NoError(t, err)
				at := now + 1
				next, d, err := p.Step(cloneState(st), engine.Op{Verb: engine.VerbRefund, Cost: 0x1p1000, Now: at})
				require.NoError(t, err)
				require.Positive(t, d.Granted)
				require.Equal(t, engine.State{Until: st.Until}, next, "penalty %v: the key emptied at now is fresh but for its block", time.Duration(penalty))
				_, back, err := p.Step(cloneState(next), engine.Op{Verb: engine.VerbCheck, Now: at - max(p.Interval/2, 1)})
				require.NoError(t, err)
				require.Zero(t, back.Used, "penalty %v: a clock that steps back finds the emptied key fresh", time.Duration(penalty))
			}
		})
	}
}

// TestADebtReadUnderASlowerLimitWaitsAtMostTheSpan: a charge may leave a
// key holding what its rate frees in 2^60 ns; read under a limit of a
// slower rate ("Limits that change": as it stands, at the new rate), it
// holds more than that rate frees in 2^60 ns. Its waits are then capped
// as every duration is: a request is denied, records nothing, and is told
// to retry within 2^60 ns and an interval (the interval refill counts the
// refills of 2^60 ns and one more at most), never after a count of
// refills wrapped around to the past. The meter (the token bucket
// refilled continuously, as the leaky bucket) forgives its level whole
// 2^60 ns after its point, where its durations saturate: a nanosecond
// before, the key is still in debt; then it admits, from empty.
func TestADebtReadUnderASlowerLimitWaitsAtMostTheSpan(t *testing.T) {
	const s = int64(time.Second)
	now := time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC).UnixNano()
	for _, refill := range []bool{true, false} {
		t.Run(fmt.Sprintf("interval refill %v", refill), func(t *testing.T) {
			fast := engine.Params{Kind: engine.KindTokenBucket, Limit: 10, Interval: s, Amount: 4, IntervalRefill: refill}
			slow := fast
			slow.Amount = 0.5
			st, d, err := fast.Step(engine.State{}, engine.Op{Verb: engine.VerbCharge, Cost: 0x1p1000, Now: now})
			require.NoError(t, err)
			require.False(t, d.Allowed, "in debt")
			require.Greater(t, st.A, float64(1<<60/slow.Interval)*slow.Amount, "more than the slower limit frees in 2^60 ns")
			// The model of the slower limit, holding the key as the
			// charge left it, decides the same.
			same := func(op engine.Op, got engine.Decision) {
				t.Helper()
				m, err := reference.New(slow)
				require.NoError(t, err)
				m.Load(st)
				want := m.Apply(op)
				lenient, err := reference.Compare(slow, op, got, want)
				require.NoError(t, err, "got %+v\nwant %+v", got, want)
				require.False(t, lenient, "compared exactly")
			}
			op := engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now + 1}
			next, d, err := slow.Step(cloneState(st), op)
			require.NoError(t, err)
			same(op, d)
			require.False(t, d.Allowed, "a key %v in debt admitted (state %+v)", st.A, next)
			require.Equal(t, st, next, "a denial records nothing")
			require.Positive(t, d.RetryAfter)
			require.LessOrEqual(t, int64(d.RetryAfter), int64(1<<60)+slow.Interval, "the wait is capped")
			if refill {
				return
			}
			forgiven := st.Time + 1<<60
			require.Equal(t, forgiven, now+1+int64(d.RetryAfter), "the meter's debt is forgiven 2^60 ns after its point")
			op.Now = forgiven - 1
			_, d, err = slow.Step(cloneState(st), op)
			require.NoError(t, err)
			same(op, d)
			require.False(t, d.Allowed, "a nanosecond before, still in debt")
			op.Now = forgiven
			next, d, err = slow.Step(cloneState(st), op)
			require.NoError(t, err)
			same(op, d)
			require.True(t, d.Allowed, "forgiven 2^60 ns after its point")
			require.Equal(t, 1.0, d.Used, "from empty")
			require.Equal(t, engine.State{Time: forgiven, A: 1}, next)
		})
	}
}

// TestACountedDenialOfAKeyInDebtSaysToWait: a denied request has a
// RetryAfter above zero ("RetryAfter zero iff admitted"), a counted
// denial of a key in debt near the instant its debt is repaid included.
// With denials counted, a denial fills the key up at now and then says
// when the same request would be admitted from the full key: a meter
// decides the denial from its point and the retry from now, in float
// arithmetic that forgives 2^-48 of the time from the point and the slack
// of the limit at now, so that for a key whose point holds more than its
// limit (a debt) the retry of a request the denial finds a few
// nanoseconds early may fit at once. The denial then says to retry after
// a nanosecond, not after nothing. The exact model says a few
// nanoseconds: such a request lies within reference.Band of the instant
// the debt is repaid (only there do the two roundings differ), where
// reference.Compare checks the invariants alone.
func TestACountedDenialOfAKeyInDebtSaysToWait(t *testing.T) {
	p := engine.Params{Kind: engine.KindLeakyBucket, Limit: 1000, Interval: int64(30 * 24 * time.Hour), Amount: 1000, CountDenied: true}
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC).UnixNano()
	st, _, err := p.Step(engine.State{}, engine.Op{Verb: engine.VerbAllow, Cost: 1000, Now: now})
	require.NoError(t, err)
	st, d, err := p.Step(st, engine.Op{Verb: engine.VerbCharge, Cost: 363.0829005897392, Now: now})
	require.NoError(t, err)
	repaid := now + int64(d.RetryAfter)
	for at := repaid - 100; at <= repaid+100; at++ {
		op := engine.Op{Verb: engine.VerbAllow, Now: at}
		_, d, err := p.Step(cloneState(st), op)
		require.NoError(t, err)
		require.Equal(t, d.Allowed, d.RetryAfter == 0, "%v from the instant the charge said the debt is repaid: %+v", time.Duration(at-repaid), d)
		// The model agrees, within reference.Compare's tolerances.
		m, err := reference.NewStrict(p)
		require.NoError(t, err)
		m.Load(st)
		want := m.Decide(op)
		_, err = reference.CompareStrict(p, op, d, want)
		require.NoError(t, err, "%v from the instant the charge said the debt is repaid:\ngot  %+v\nwant %+v", time.Duration(at-repaid), d, want.Decision)
	}
}
