package redisstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/redisstore"
	"github.com/sluice-go/sluice/storetest"
)

// TestPenaltiesAreBitIdenticalToStep overflows keys under a penalty, with
// denials counted or not, then decides inside the block with every verb
// the algorithm runs (a reservation books no earlier than its end, a
// fill-up records), at its last nanosecond and its first after, from a
// clock that stepped back into it, and after Reset lifted it: each
// decision, Blocked included, and the state stored after it, the block's
// end included, are Step's bit for bit.
func TestPenaltiesAreBitIdenticalToStep(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	params := append(storetest.Strict(),
		engine.Params{Kind: engine.KindGCRA, Limit: 2, Interval: 1<<50 + 1, Penalty: 1 << 60, CountDenied: true},
		engine.Params{Kind: engine.KindTokenBucket, Limit: 2.5, Interval: 333333333, Amount: 0.7, Penalty: 7},
		engine.Params{Kind: engine.KindLeakyBucket, Limit: 3, Interval: int64(time.Second), Amount: 1, Penalty: int64(time.Minute)},
	)
	for pi, p := range params {
		for oi, origin := range origins {
			t.Run(fmt.Sprintf("%d_%v_from_%d", pi, p.Kind, oi), func(t *testing.T) {
				k := newTwin(t, c, st, p, fmt.Sprintf("p%d.%d", pi, oi))
				now := origin
				op := func(verb engine.Verb, cost float64) engine.Op {
					return engine.Op{Verb: verb, Cost: cost, Now: now}
				}
				var over engine.Decision
				for i := 0; ; i++ {
					require.Less(t, i, 100, "a key overflows")
					if over = k.apply(op(engine.VerbAllow, 1), "fill until it overflows"); !over.Allowed {
						break
					}
				}
				if p.Penalty == 0 {
					require.False(t, over.Blocked)
					k.apply(op(engine.VerbAllow, p.Limit), "a counted denial of more")
					return
				}
				require.True(t, over.Blocked, "the overflow starts a block")
				require.GreaterOrEqual(t, over.RetryAfter, time.Duration(p.Penalty))
				require.GreaterOrEqual(t, over.ResetAfter, time.Duration(p.Penalty), "the key lives until its block ends")
				end := now + p.Penalty
				inside := func(what string) {
					k.apply(op(engine.VerbCheck, 1), what+": a check")
					k.apply(op(engine.VerbAllow, 0), what+": an allow of nothing")
					k.apply(op(engine.VerbAllow, 1), what+": an allow")
					k.apply(op(engine.VerbAtMost, 2*p.Limit), what+": a partial grant")
					if p.Kind == engine.KindLeakyBucket {
						k.apply(op(engine.VerbFill, 1), what+": a fill-up")
					}
					if p.Reservable() {
						k.apply(engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: now}, what+": a reservation that cannot wait")
						k.apply(engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: now, MaxDelay: p.Penalty / 2}, what+": a reservation that waits half the block")
						d := k.apply(engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: now, MaxDelay: 1 << 60}, what+": a reservation that waits for the block's end")
						if d.Delay > 0 {
							k.apply(engine.Op{Verb: engine.VerbCancel, Cost: 1, Now: now, At: d.At}, what+": its cancel")
						}
					}
				}
				now++
				inside("the next nanosecond")
				now = end - 1
				inside("the block's last nanosecond")
				now = max(origin-1, 0)
				inside("a clock that stepped back")
				now = end
				inside("the block's end")
				now = end + 1
				inside("after the block")
				require.NoError(t, st.Reset(t.Context(), k.key))
				k.s = engine.State{}
				now = origin // (the block's end may lie beyond the latest time sluice accepts)
				d := k.apply(op(engine.VerbAllow, 1), "after Reset")
				require.True(t, d.Allowed, "Reset lifts the block")
				require.False(t, d.Blocked)
			})
		}
	}
}

// TestBlockedKeyLivesUntilItsBlockEnds requires a key blocked by a
// penalty to expire no earlier than its block ends, however soon its
// algorithm alone would be fresh, and its value to carry the block. On the
// caller's clock both decisions come at one instant and the algorithms'
// states are fresh a millisecond later; on the server's clock the calls
// are some time apart, so the intervals are an hour: no pause of the
// machine running the test reaches the next admission, and the block
// still outlives the state by far.
func TestBlockedKeyLivesUntilItsBlockEnds(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	ctx := t.Context()
	for _, clock := range []struct {
		name     string
		opts     []redisstore.Option
		now      int64 // Op.Now, the same for both decisions; 0 on the server's clock
		interval time.Duration
		penalty  time.Duration
	}{
		{"caller_clock", []redisstore.Option{redisstore.WithCallerClock(0)}, base, time.Millisecond, time.Hour},
		{"server_clock", nil, 0, time.Hour, 10 * time.Hour},
	} {
		st := newStore(t, c, clock.opts...)
		interval, penalty := int64(clock.interval), int64(clock.penalty)
		for pi, p := range []engine.Params{
			{Kind: engine.KindGCRA, Limit: 1, Interval: interval, Penalty: penalty},
			{Kind: engine.KindFixedWindow, Limit: 1, Interval: interval, Anchored: true, Penalty: penalty, CountDenied: true},
			{Kind: engine.KindSlidingLog, Limit: 1, Interval: interval, MaxEntries: 1, Penalty: penalty},
		} {
			t.Run(fmt.Sprintf("%s_%d_%v", clock.name, pi, p.Kind), func(t *testing.T) {
				key := fmt.Sprint("blocked", pi)
				allow := engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: clock.now}
				d, err := st.Apply(ctx, key, &p, allow)
				require.NoError(t, err)
				require.True(t, d.Allowed)
				before, err := c.Time(ctx).Result()
				require.NoError(t, err)
				d, err = st.Apply(ctx, key, &p, allow)
				require.NoError(t, err)
				require.False(t, d.Allowed)
				require.True(t, d.Blocked)
				require.Equal(t, clock.penalty, d.ResetAfter)
				expiry, err := c.PExpireTime(ctx, st.Key(key)).Result()
				require.NoError(t, err)
				require.GreaterOrEqual(t, expiry, time.Duration(before.UnixMilli())*time.Millisecond+clock.penalty,
					"the key expires no earlier than its block ends")
				v, err := c.Get(ctx, st.Key(key)).Bytes()
				require.NoError(t, err)
				require.Equal(t, byte(p.Kind)+128, v[0], "the value carries the block")

				require.NoError(t, st.Reset(ctx, key))
				d, err = st.Apply(ctx, key, &p, allow)
				require.NoError(t, err)
				require.True(t, d.Allowed, "Reset lifts the block")
			})
		}
	}
}

// TestServerClockPenaltiesAreBitIdenticalToStep blocks keys on the
// server's clock: the block's end is an instant of that clock, and every
// decision inside the block is Step's at one of the microseconds the call
// lasted.
func TestServerClockPenaltiesAreBitIdenticalToStep(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c)
	const hour = int64(time.Hour)
	for pi, p := range []engine.Params{
		{Kind: engine.KindGCRA, Limit: 2, Interval: hour, Penalty: hour},
		{Kind: engine.KindTokenBucket, Limit: 2, Interval: hour, Amount: 1, IntervalRefill: true, Penalty: hour, CountDenied: true},
		{Kind: engine.KindSlidingCounter, Limit: 2, Interval: hour, Penalty: 3 * hour, CountDenied: true},
	} {
		t.Run(fmt.Sprintf("%d_%v", pi, p.Kind), func(t *testing.T) {
			k := newTwin(t, c, st, p, fmt.Sprint("s", pi))
			allow := engine.Op{Verb: engine.VerbAllow, Cost: 1}
			for range 2 {
				require.True(t, k.applyOnServerClock(allow, "within the limit").Allowed)
			}
			// The block ends a penalty after the overflow, which the server
			// decided after this reading of its clock.
			endsAfter := serverTime(t, c) + p.Penalty
			d := k.applyOnServerClock(allow, "the overflow")
			require.True(t, d.Blocked)
			require.Equal(t, time.Duration(p.Penalty), d.RetryAfter)
			require.True(t, k.applyOnServerClock(engine.Op{Verb: engine.VerbCheck, Cost: 0.5}, "a check in the block").Blocked)
			require.False(t, k.applyOnServerClock(allow, "an allow in the block").Allowed)
			if p.Reservable() {
				d := k.applyOnServerClock(engine.Op{Verb: engine.VerbReserve, Cost: 1, MaxDelay: 10 * hour}, "a reservation behind the block")
				// Its turn comes its delay after the decision, made before
				// this reading: however long the calls took, the turn is no
				// earlier than the block's end only if the delay reaches from
				// this reading to endsAfter.
				decidedBy := serverTime(t, c)
				require.True(t, d.Allowed)
				require.GreaterOrEqual(t, int64(d.Delay), endsAfter-decidedBy, "booked no earlier than the block's end")
			}
		})
	}
}
