package redisstore_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/redisstore"
	"github.com/sluice-go/sluice/storetest"
)

// TestServerClockSettles charges and refunds keys on the server's clock,
// Op.Now ignored: a charge beyond the limit leaves the key in debt, which
// admits nothing, a refund gives back what the key still holds, and each
// decision's Granted is the cost moved. A key refunded to empty is fresh
// again: no key.
func TestServerClockSettles(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c)
	ctx := t.Context()
	const minute = int64(time.Minute)
	for _, tt := range []struct {
		name string
		p    engine.Params
	}{
		{"GCRA", engine.Params{Kind: engine.KindGCRA, Limit: 4, Interval: minute}},
		{"LeakyBucket", engine.Params{Kind: engine.KindLeakyBucket, Limit: 4, Interval: minute, Amount: 1}},
		{"TokenBucket", engine.Params{Kind: engine.KindTokenBucket, Limit: 4, Interval: minute, Amount: 1}},
		{"IntervalRefill", engine.Params{Kind: engine.KindTokenBucket, Limit: 4, Interval: minute, Amount: 1, IntervalRefill: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, err := st.Apply(ctx, tt.name, &tt.p, engine.Op{Verb: engine.VerbCharge, Cost: 6, Now: math.MaxInt64})
			require.NoError(t, err)
			require.Equal(t, 6.0, d.Granted, "the whole charge recorded")
			require.False(t, d.Allowed, "in debt")
			require.Equal(t, 4.0, d.Used)
			require.Positive(t, d.RetryAfter)
			d, err = st.Apply(ctx, tt.name, &tt.p, engine.Op{Verb: engine.VerbRefund, Cost: 10, Now: -1})
			require.NoError(t, err)
			require.InDelta(t, 6, d.Granted, 0.01, "what the key still holds given back")
			require.LessOrEqual(t, d.Granted, 6.0)
			require.True(t, d.Allowed)
			require.Zero(t, d.Used)
			require.Zero(t, c.Exists(ctx, st.Key(tt.name)).Val(), "a key fresh again is no key")
		})
	}
}

// TestSettleOfNegativeZeroIsStepsBitForBit charges and refunds a cost of
// -0, which the store takes as Step does, on an empty key and on one in
// as much debt as it may hold: each decision is Step's bit for bit, its
// Granted -0 where Go's min gives -0.
func TestSettleOfNegativeZeroIsStepsBitForBit(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	ctx := t.Context()
	negZero := math.Copysign(0, -1)
	for _, tt := range []struct {
		name string
		p    engine.Params
	}{
		{"GCRA", engine.Params{Kind: engine.KindGCRA, Limit: 4, Interval: int64(time.Second)}},
		{"LeakyBucket", engine.Params{Kind: engine.KindLeakyBucket, Limit: 4, Interval: int64(time.Second), Amount: 1}},
		{"TokenBucket", engine.Params{Kind: engine.KindTokenBucket, Limit: 4, Interval: 7, Amount: 0.3}},
		{"IntervalRefill", engine.Params{Kind: engine.KindTokenBucket, Limit: 4, Interval: 7, Amount: 0.3, IntervalRefill: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.p
			var s engine.State
			for i, op := range []engine.Op{
				{Verb: engine.VerbRefund, Cost: negZero, Now: base},
				{Verb: engine.VerbCharge, Cost: negZero, Now: base},
				{Verb: engine.VerbCharge, Cost: math.Ldexp(1, 1000), Now: base},
				{Verb: engine.VerbCharge, Cost: negZero, Now: base},
				{Verb: engine.VerbRefund, Cost: negZero, Now: base},
				{Verb: engine.VerbRefund, Cost: math.Ldexp(1, 1000), Now: base + 1},
			} {
				var want engine.Decision
				var err error
				s, want, err = p.Step(s, op)
				require.NoError(t, err)
				got, err := st.Apply(ctx, tt.name, &p, op)
				require.NoError(t, err)
				require.Equal(t, want, got, "op %d: %+v", i, op)
				require.Equal(t, math.Float64bits(want.Granted), math.Float64bits(got.Granted), "op %d: %+v", i, op)
			}
		})
	}
}

// settled is a key of a store deciding by the caller's clock whose
// decisions a test requires to be Step's, bit for bit, from the state
// Step keeps.
type settled struct {
	st  *redisstore.Store
	key string
	s   engine.State
}

// apply decides op under p on the key, requires Step's decision, and
// returns it.
func (k *settled) apply(t *testing.T, p engine.Params, op engine.Op) engine.Decision {
	t.Helper()
	where := fmt.Sprintf("%s: op %+v under %+v from %+v", k.key, op, p, k.s)
	next, want, err := p.Step(k.s, op)
	require.NoError(t, err, where)
	got, err := k.st.Apply(t.Context(), k.key, &p, op)
	require.NoError(t, err, where)
	storetest.RequireIdenticalDecision(t, want, got, where)
	k.s = next
	return want
}

// TestRefundThatEmptiesUnderABlockIsSteps refunds, under a penalty's
// block, all that a key holds: the key is fresh again, and forgotten, its
// block kept. A check with the clock stepped back then finds the zero
// State, not the point the refund moved to (the TAT at now, or a
// bucket's point there), which would lie ahead of the earlier clock and
// hold what leaks or refills until then.
func TestRefundThatEmptiesUnderABlockIsSteps(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	const s, ms = int64(time.Second), int64(time.Millisecond)
	penalty := int64(time.Minute)
	for _, tt := range []struct {
		name string
		p    engine.Params
	}{
		{"GCRA", engine.Params{Kind: engine.KindGCRA, Limit: 4, Interval: s, Penalty: penalty}},
		{"LeakyBucket", engine.Params{Kind: engine.KindLeakyBucket, Limit: 4, Interval: s, Amount: 1, Penalty: penalty}},
		{"TokenBucket", engine.Params{Kind: engine.KindTokenBucket, Limit: 4, Interval: s, Amount: 1.5, Penalty: penalty, CountDenied: true}},
		{"IntervalRefill", engine.Params{Kind: engine.KindTokenBucket, Limit: 4, Interval: s, Amount: 1, IntervalRefill: true, Penalty: penalty}},
	} {
		p := tt.p
		t.Run(tt.name, func(t *testing.T) {
			k := &settled{st: st, key: t.Name()}
			k.apply(t, p, engine.Op{Verb: engine.VerbAllow, Cost: 4, Now: base})
			d := k.apply(t, p, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: base + 1})
			require.True(t, d.Blocked, "the overflow starts the block")
			d = k.apply(t, p, engine.Op{Verb: engine.VerbRefund, Cost: 10, Now: base + 2*ms})
			require.True(t, d.Blocked)
			require.Equal(t, engine.State{Until: base + 1 + p.Penalty}, k.s, "forgotten, the block kept")
			for _, back := range []int64{1, ms, 3 * ms} {
				d = k.apply(t, p, engine.Op{Verb: engine.VerbCheck, Cost: 1, Now: base + 2*ms - back})
				require.Zero(t, d.Used, "stepped back %d ns", back)
			}
		})
	}
}

// TestRefillsOfADebtReadUnderASlowerLimitAreSteps charges an interval
// refill's key 2^1000, all the refills of maxSpan bring, and then decides
// it under a slower limit, of the same key: the refills it takes to free
// what the key holds, times the interval, exceed maxSpan (and int64, and
// PostgreSQL's bigint), and every wait is capped as Step caps it, at the
// refills of maxSpan and one more, at an interval whose count of them
// exceeds 2^53 and at one of a minute.
func TestRefillsOfADebtReadUnderASlowerLimitAreSteps(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	for _, p := range []engine.Params{
		{Kind: engine.KindTokenBucket, Limit: 4, Interval: 7, Amount: 0.3, IntervalRefill: true},
		{Kind: engine.KindTokenBucket, Limit: 4, Interval: int64(time.Minute), Amount: 1, IntervalRefill: true},
		{Kind: engine.KindTokenBucket, Limit: 4, Interval: int64(time.Minute), Amount: 1, IntervalRefill: true, CountDenied: true},
		{Kind: engine.KindTokenBucket, Limit: 4, Interval: int64(time.Minute), Amount: 1, IntervalRefill: true, Penalty: int64(time.Hour)},
	} {
		t.Run(fmt.Sprintf("%d_penalty_%v_count_denied_%v", p.Interval, p.Penalty, p.CountDenied), func(t *testing.T) {
			k := &settled{st: st, key: t.Name()}
			d := k.apply(t, p, engine.Op{Verb: engine.VerbCharge, Cost: math.Ldexp(1, 1000), Now: base})
			require.Positive(t, d.Granted)
			slower := p
			slower.Amount /= 1000
			for i, op := range []engine.Op{
				{Verb: engine.VerbCheck, Cost: 1, Now: base + 1},
				{Verb: engine.VerbAllow, Cost: 1, Now: base + 2},
				{Verb: engine.VerbReserve, Cost: 1, Now: base + 3, MaxDelay: 1 << 60},
				{Verb: engine.VerbAtMost, Cost: 2, Now: base + 4},
				{Verb: engine.VerbExhaust, Cost: 1, Now: base + 5, MaxDelay: p.Interval},
				{Verb: engine.VerbRefund, Cost: 1, Now: base + 6},
				{Verb: engine.VerbCharge, Cost: 1, Now: base + 7},
				{Verb: engine.VerbCheck, Cost: 0, Now: base + 8},
			} {
				d = k.apply(t, slower, op)
				if i == 0 {
					require.Equal(t, time.Duration((1<<60/slower.Interval+1)*slower.Interval-1), d.ResetAfter,
						"the refills of maxSpan and one more, from the key's point")
				}
			}
			k.apply(t, p, engine.Op{Verb: engine.VerbCheck, Cost: 1, Now: base + 9})
		})
	}
}

// TestDenialsOfAMeterInDebtWaitAsSteps fills a leaky bucket that counts
// denials, charges it past its limit, and tries it, with no cost and
// with a unit, at each nanosecond around the instant the charge said it
// would admit again: deciding a denial again from now, on the key filled
// up, may find it fits through rounding, and the denial then still waits
// a nanosecond, as Step says.
func TestDenialsOfAMeterInDebtWaitAsSteps(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	p := engine.Params{Kind: engine.KindLeakyBucket, Limit: 1000, Interval: int64(30 * 24 * time.Hour), Amount: 1000, CountDenied: true}
	for _, cost := range []float64{0, 1} {
		k := &settled{st: st, key: fmt.Sprintf("debt%v", cost)}
		k.apply(t, p, engine.Op{Verb: engine.VerbAllow, Cost: 1000, Now: base})
		d := k.apply(t, p, engine.Op{Verb: engine.VerbCharge, Cost: 363.0829005897392, Now: base})
		at := base + int64(d.RetryAfter)
		nanosecond := 0
		for now := at - 100; now <= at+100; now++ {
			d = k.apply(t, p, engine.Op{Verb: engine.VerbAllow, Cost: cost, Now: now})
			if !d.Allowed && d.RetryAfter == 1 {
				nanosecond++
			}
		}
		if cost == 0 {
			require.Positive(t, nanosecond, "no denial decided again fitted")
		}
	}
}
