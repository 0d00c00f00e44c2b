package redisstore_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/redisstore"
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
