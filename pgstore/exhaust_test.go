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

// exhaustible returns a limit of each variant that has an exhaust
// statement of its own: the GCRA, the leaky bucket and the token bucket
// (refilled continuously and per interval), each lenient, under a
// penalty, with denials counted, and with both (the variant of counted
// denials). storetest.Strict holds a few of them only.
func exhaustible() []engine.Params {
	const s = int64(time.Second)
	var out []engine.Params
	for _, p := range []engine.Params{
		{Kind: engine.KindGCRA, Limit: 3, Interval: s / 4},
		{Kind: engine.KindLeakyBucket, Limit: 4, Interval: s, Amount: 2},
		{Kind: engine.KindTokenBucket, Limit: 5, Interval: s, Amount: 1.5},
		{Kind: engine.KindTokenBucket, Limit: 5, Interval: s, Amount: 2, IntervalRefill: true},
	} {
		for _, strict := range []struct {
			penalty     int64
			countDenied bool
		}{{0, false}, {1500 * int64(time.Millisecond), false}, {0, true}, {2 * s, true}} {
			p.Penalty, p.CountDenied = strict.penalty, strict.countDenied
			out = append(out, p)
		}
	}
	return out
}

// exhaustOp draws a request that exhausts a key often: an exhaust of any
// delay (none, around the algorithm's time scale, the longest, or
// invalid), and among them admissions that overflow it (and start a
// penalty's block), checks, partial grants, reservations and cancels of
// them.
func exhaustOp(rng *rand.Rand, p engine.Params, now int64, booked []engine.Op) engine.Op {
	scale := p.Interval * int64(math.Ceil(p.Limit))
	cost := []float64{0, 1, 1, math.Ceil(p.Limit), math.Round(rng.Float64()*p.Limit*100) / 100}[rng.IntN(5)]
	op := engine.Op{Verb: engine.VerbAllow, Cost: cost, Now: now}
	switch r := rng.IntN(12); {
	case r < 4:
		op.Verb = engine.VerbExhaust
		switch d := rng.IntN(10); {
		case d < 3:
		case d < 7:
			op.MaxDelay = rng.Int64N(scale)
		case d < 8:
			op.MaxDelay = scale + rng.Int64N(4*scale)
		case d < 9:
			op.MaxDelay = 1 << 60
		default:
			op.MaxDelay = (1 << 60) + 1 // an error
		}
	case r == 4:
		op.Verb = engine.VerbCheck
	case r == 5:
		op.Verb, op.Cost = engine.VerbAtMost, math.Round(rng.Float64()*2*p.Limit*100)/100
	case r < 8:
		op.Verb, op.MaxDelay = engine.VerbReserve, rng.Int64N(2*scale)
	case r < 10 && len(booked) > 0:
		op = booked[len(booked)-1-rng.IntN(min(len(booked), 2))]
		op.Now = now
	}
	return op
}

// TestExhaustIsStepInEveryVariant replays random traces of exhausts among
// admissions, checks, partial grants, reservations and cancels, in every
// variant of the statements that run them, through stores deciding by the
// caller's clock and by the database's (which the test moves, forwards
// and back, in whole microseconds, and which an op's own time does not
// change): each decision must be Step's, bit for bit, at the store's
// time. A key's limit changes now and then to another of its algorithm
// (storetest.Variants), so that a GCRA's state is carried over to another
// interval before it is exhausted; blocks start, end, and are found again
// when the clock steps back.
func TestExhaustIsStepInEveryVariant(t *testing.T) {
	replayEveryVariant(t, "exhaust", 0xe4a5, exhaustOp, nil)
}

// replayEveryVariant replays, in every variant of the statements of the
// algorithms that book ahead (exhaustible's), through stores deciding by
// the caller's clock and by the database's (which it moves, forwards and
// back, in whole microseconds, and which an op's own time does not
// change), 6 traces of 40 ops that draw draws, each required to be Step's
// bit for bit at the store's time; it books the cancels of the
// reservations that wait, and hands every decision Step made to decided,
// if not nil. Every other trace changes the key's limit now and then to
// another of its algorithm (storetest.Variants).
func replayEveryVariant(t *testing.T, name string, seed uint64, draw func(*rand.Rand, engine.Params, int64, []engine.Op) engine.Op,
	decided func(t *testing.T, op engine.Op, want engine.Decision)) {
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
				rng := rand.New(rand.NewPCG(uint64(ai), seed))
				variants := storetest.Variants(limit)
				for trace := range 6 {
					p := limit
					key := fmt.Sprintf("%s%d.%v.%d", name, ai, callerClock, trace)
					var k replayed
					now := base / 1000 * 1000
					for step := range 40 {
						if trace%2 == 1 && rng.IntN(6) == 0 {
							p = variants[rng.IntN(len(variants))] // the key's limit changes
						}
						now = max(now+microGap(rng, p), 0)
						op := draw(rng, p, now, k.booked)
						sent := op
						if !callerClock {
							clock.set(t, now)
							sent.Now = rng.Int64() // ignored
						}
						where := fmt.Sprintf("trace %d step %d params %+v op %+v", trace, step, p, op)
						want, ok := k.step(t, st, key, p, op, sent, where, sluice.ErrInvalidDelay)
						if ok && want.At != 0 {
							k.booked = append(k.booked, engine.Op{Verb: engine.VerbCancel, Cost: op.Cost, At: want.At})
						}
						if ok && decided != nil {
							decided(t, op, want)
						}
					}
				}
			})
		}
	}
}

// TestServerClockExhaustIsRelativeToItsClock exhausts a key by the
// database's real clock, as a limiter without WithCallerClock does: the
// key is full until MaxDelay after the database's time, whatever the op's
// own time says.
func TestServerClockExhaustIsRelativeToItsClock(t *testing.T) {
	pool := newPool(t, testserver.StartPostgres(t).URL, 4)
	st, _ := newStore(t, pool)
	ctx := context.Background()
	p := engine.Params{Kind: engine.KindGCRA, Limit: 2, Interval: int64(time.Minute)}
	hour := int64(time.Hour)
	d, err := st.Apply(ctx, "k", &p, engine.Op{Verb: engine.VerbExhaust, Cost: 1, Now: 1, MaxDelay: hour})
	require.NoError(t, err)
	require.False(t, d.Allowed, "described as a check on the full key")
	require.Equal(t, p.Limit, d.Used)
	// Full an hour from now, and then a burst of two minutes: one unit
	// frees a minute before its end.
	require.InDelta(t, time.Hour+time.Minute, d.RetryAfter, float64(time.Minute/2))
	require.InDelta(t, time.Hour+2*time.Minute, d.ResetAfter, float64(time.Minute/2))
	r, err := st.Apply(ctx, "k", &p, engine.Op{Verb: engine.VerbReserve, Cost: 1, MaxDelay: 2 * hour})
	require.NoError(t, err)
	require.True(t, r.Allowed)
	require.InDelta(t, time.Now().Add(time.Hour+time.Minute).UnixNano(), r.At, float64(time.Minute/2),
		"the first turn after the exhaust, an instant on the database's clock, which is this machine's")
}
