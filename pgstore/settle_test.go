package pgstore_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/pgstore"
	"github.com/sluice-go/sluice/storetest"
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
	url := testserver.StartPostgres(t).URL
	clock := newDBClock(t, url, 0)
	byCaller, _ := newStore(t, newPool(t, url, 4), pgstore.WithCallerClock())
	byDatabase, _ := newStore(t, clock.pool)
	for ai, limit := range exhaustible() {
		for _, callerClock := range []bool{true, false} {
			st := byDatabase
			if callerClock {
				st = byCaller
			}
			t.Run(fmt.Sprintf("%d_%v_penalty_%v_count_denied_%v_caller_clock_%v", ai, limit.Kind, limit.Penalty, limit.CountDenied, callerClock), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(ai), 0x5e771e))
				variants := storetest.Variants(limit)
				settled := map[engine.Verb]int{}
				for trace := range 6 {
					p := limit
					key := fmt.Sprintf("settle%d.%v.%d", ai, callerClock, trace)
					var k replayed
					now := base / 1000 * 1000
					for step := range 40 {
						if trace%2 == 1 && rng.IntN(6) == 0 {
							p = variants[rng.IntN(len(variants))] // the key's limit changes
						}
						now = max(now+microGap(rng, p), 0)
						op := settleOp(rng, p, now, k.booked)
						sent := op
						if !callerClock {
							clock.set(t, now)
							sent.Now = rng.Int64() // ignored
						}
						where := fmt.Sprintf("trace %d step %d params %+v op %+v", trace, step, p, op)
						want, ok := k.step(t, st, key, p, op, sent, where, sluice.ErrInvalidDelay)
						switch {
						case ok && want.At != 0:
							k.booked = append(k.booked, engine.Op{Verb: engine.VerbCancel, Cost: op.Cost, At: want.At})
						case ok && want.Granted > 0:
							settled[op.Verb]++
						}
					}
				}
				require.Positive(t, settled[engine.VerbCharge], "no charge recorded anything")
				require.Positive(t, settled[engine.VerbRefund], "no refund gave anything back")
			})
		}
	}
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

// settled is a key of a store deciding by the caller's clock whose
// decisions a test requires to be Step's, bit for bit (see replayed).
type settled struct {
	st  sluice.Store
	key string
	k   replayed
}

// apply decides op under p on the key, requires Step's decision, and
// returns it.
func (s *settled) apply(t *testing.T, p engine.Params, op engine.Op) engine.Decision {
	t.Helper()
	where := fmt.Sprintf("%s: op %+v under %+v from %+v", s.key, op, p, s.k.s)
	d, ok := s.k.step(t, s.st, s.key, p, op, op, where, sluice.ErrUnsupported)
	require.True(t, ok, where)
	return d
}

// TestRefundThatEmptiesUnderABlockIsSteps refunds, under a penalty's
// block, all that a key holds: the key is fresh again, and forgotten, its
// block kept. A check with the clock stepped back then finds the zero
// State, not the point the refund moved to (the TAT at now, or a
// bucket's point there), which would lie ahead of the earlier clock and
// hold what leaks or refills until then.
func TestRefundThatEmptiesUnderABlockIsSteps(t *testing.T) {
	st, _ := newStore(t, newPool(t, testserver.StartPostgres(t).URL, 4), pgstore.WithCallerClock())
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
			require.Equal(t, engine.State{Until: base + 1 + p.Penalty}, k.k.s, "forgotten, the block kept")
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
// what the key holds, times the interval, exceed maxSpan (and bigint,
// where they would be out of range), and every wait is capped as Step
// caps it, at the refills of maxSpan and one more, at an interval whose
// count of them exceeds 2^53 and at one of a minute.
func TestRefillsOfADebtReadUnderASlowerLimitAreSteps(t *testing.T) {
	st, _ := newStore(t, newPool(t, testserver.StartPostgres(t).URL, 4), pgstore.WithCallerClock())
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
	st, _ := newStore(t, newPool(t, testserver.StartPostgres(t).URL, 4), pgstore.WithCallerClock())
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
