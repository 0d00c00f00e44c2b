package pgstore_test

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
)

// settleOp draws a request that charges or refunds a key often, of any
// cost: none, a unit, the limit, a fraction, a few limits (into debt),
// costs no key may hold (2^1000, and at the GCRA's interval, one of more
// nanoseconds than maxSpan and one of more than an int8 holds); and among
// them admissions, checks,
// exhausts, reservations and cancels of them, which book the key's point
// ahead of now, where a charge or a refund acts.
func settleOp(rng *rand.Rand, p engine.Params, now int64, booked []engine.Op) engine.Op {
	scale := p.Interval * int64(math.Ceil(p.Limit))
	cost := []float64{0, 1, math.Ceil(p.Limit), math.Round(rng.Float64()*p.Limit*100) / 100}[rng.IntN(4)]
	op := engine.Op{Verb: engine.VerbAllow, Cost: cost, Now: now}
	switch r := rng.IntN(14); {
	case r < 6:
		op.Verb = engine.VerbCharge + engine.Verb(rng.IntN(2)) // or a refund
		switch rng.IntN(8) {
		case 0:
			op.Cost = math.Round(rng.Float64()*3*p.Limit*100) / 100
		case 1:
			op.Cost = 0x1p1000
		case 2:
			op.Cost = 1e10 // more than 2^60 ns at the GCRA's quarter second
		case 3:
			op.Cost = 1e11 // more than 2^63 ns, which no int8 holds
		}
	case r == 6:
		op.Verb = engine.VerbCheck
	case r == 7:
		op.Verb, op.MaxDelay = engine.VerbExhaust, rng.Int64N(2*scale)
	case r < 10:
		op.Verb, op.MaxDelay = engine.VerbReserve, rng.Int64N(2*scale)
	case r < 12 && len(booked) > 0:
		op = booked[len(booked)-1-rng.IntN(min(len(booked), 2))]
		op.Now = now
	}
	return op
}

// TestSettleIsStepInEveryVariant replays random traces of charges and
// refunds among admissions, checks, exhausts, reservations and cancels, in
// every variant of the statement that runs them (exhaustible's), through
// stores deciding by the caller's clock and by the database's (which the
// test moves, forwards and back, in whole microseconds, and which an op's
// own time does not change): each decision must be Step's, bit for bit,
// at the store's time, Granted included. A key's limit changes now and
// then to another of its algorithm (storetest.Variants), so that a GCRA's
// state is carried over to another interval before it is settled; keys go
// into debt, are booked ahead, and blocks start, end, and are found again
// when the clock steps back.
func TestSettleIsStepInEveryVariant(t *testing.T) {
	settled := map[string]map[engine.Verb]int{}
	replayEveryVariant(t, "settle", 0x5e771e, settleOp, func(t *testing.T, op engine.Op, want engine.Decision) {
		if settled[t.Name()] == nil {
			settled[t.Name()] = map[engine.Verb]int{}
			t.Cleanup(func() {
				require.Positive(t, settled[t.Name()][engine.VerbCharge], "no charge recorded anything")
				require.Positive(t, settled[t.Name()][engine.VerbRefund], "no refund gave anything back")
			})
		}
		if want.Granted > 0 && (op.Verb == engine.VerbCharge || op.Verb == engine.VerbRefund) {
			settled[t.Name()][op.Verb]++
		}
	})
}

// TestServerClockSettleIsAtItsClock charges and refunds a key by the
// database's real clock, as a limiter without WithCallerClock does: the
// debt runs from the database's time, whatever the op's own time says.
func TestServerClockSettleIsAtItsClock(t *testing.T) {
	pool := newPool(t, testserver.StartPostgres(t).URL, 4)
	st, _ := newStore(t, pool)
	ctx := context.Background()
	p := engine.Params{Kind: engine.KindGCRA, Limit: 2, Interval: int64(time.Minute)}
	d, err := st.Apply(ctx, "k", &p, engine.Op{Verb: engine.VerbCharge, Cost: 62, Now: 1})
	require.NoError(t, err)
	require.Equal(t, 62.0, d.Granted, "recorded whole, in debt")
	require.False(t, d.Allowed, "described as a check of no cost on the key in debt")
	require.Equal(t, p.Limit, d.Used)
	// An hour and two minutes held: the first unit frees after an hour.
	require.InDelta(t, time.Hour, d.RetryAfter, float64(time.Minute/2))
	require.InDelta(t, time.Hour+2*time.Minute, d.ResetAfter, float64(time.Minute/2))
	d, err = st.Apply(ctx, "k", &p, engine.Op{Verb: engine.VerbRefund, Cost: 30, Now: 1})
	require.NoError(t, err)
	require.Equal(t, 30.0, d.Granted, "given back whole")
	require.InDelta(t, 32*time.Minute, d.ResetAfter, float64(time.Minute/2))
	r, err := st.Apply(ctx, "k", &p, engine.Op{Verb: engine.VerbReserve, Cost: 1, MaxDelay: int64(time.Hour)})
	require.NoError(t, err)
	require.True(t, r.Allowed)
	require.InDelta(t, time.Now().Add(31*time.Minute).UnixNano(), r.At, float64(time.Minute/2),
		"the first turn after the debt, an instant on the database's clock, which is this machine's")
	d, err = st.Apply(ctx, "k", &p, engine.Op{Verb: engine.VerbRefund, Cost: 0x1p1000, Now: 1})
	require.NoError(t, err)
	require.InDelta(t, 33, d.Granted, 0.01, "what the key held, the booking's unit too")
	require.Zero(t, d.ResetAfter, "fresh again")
}
