package redisstore_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/redisstore"
	"github.com/sluice-go/sluice/storetest"
)

// The tests here hold reservations (VerbReserve), cancels (VerbCancel),
// partial grants (VerbAtMost) and bucket states that lie after now to
// Params.Step bit for bit: every field of every decision, and the state
// the script stores, read back from Redis.

// twin drives one key of a store and the specification side by side.
type twin struct {
	t   *testing.T
	c   redis.UniversalClient
	st  *redisstore.Store
	p   engine.Params
	key string
	s   engine.State // the specification's state of the key
}

func newTwin(t *testing.T, c redis.UniversalClient, st *redisstore.Store, p engine.Params, key string) *twin {
	return &twin{t: t, c: c, st: st, p: p, key: key}
}

// apply runs op on the store in caller-clock mode and requires Step's
// decision, or its error, and Step's state in Redis afterwards.
func (k *twin) apply(op engine.Op, what string) engine.Decision {
	k.t.Helper()
	next, want, wantErr := k.p.Step(cloneState(k.s), op)
	got, err := k.st.Apply(k.t.Context(), k.key, &k.p, op)
	where := fmt.Sprintf("%s: %v, op %+v", what, k.p, op)
	if wantErr != nil {
		require.ErrorIs(k.t, err, sentinelOf(wantErr), where)
		return got
	}
	require.NoError(k.t, err, where)
	storetest.RequireIdenticalDecision(k.t, want, got, where)
	if k.p.Records(op.Verb, &want) {
		k.s = next
	}
	requireSameState(k.t, k.s, storedState(k.t, k.c, k.st, k.key), where)
	return got
}

// applyOnServerClock runs op on the store in server-clock mode, where the
// time of the decision is the server's, unknown to the test. Redis's TIME
// has whole microseconds: the decision must be Step's, with its state,
// for one of the microseconds between the server's time read before and
// after the call.
func (k *twin) applyOnServerClock(op engine.Op, what string) engine.Decision {
	k.t.Helper()
	ctx := k.t.Context()
	before, err := k.c.Time(ctx).Result()
	require.NoError(k.t, err)
	got, err := k.st.Apply(ctx, k.key, &k.p, op)
	require.NoError(k.t, err, what)
	after, err := k.c.Time(ctx).Result()
	require.NoError(k.t, err)
	stored := storedState(k.t, k.c, k.st, k.key)
	for now := before.UnixNano(); now <= after.UnixNano(); now += int64(time.Microsecond) {
		op.Now = now
		next, want, err := k.p.Step(cloneState(k.s), op)
		require.NoError(k.t, err)
		if !k.p.Records(op.Verb, &want) {
			next = k.s
		}
		if storetest.IdenticalDecision(want, got) && sameState(next, stored) {
			k.s = next
			return got
		}
	}
	k.t.Fatalf("%s: %v, op %+v: no instant between %v and %v gives Step's decision and state\ngot %+v, stored %+v",
		what, k.p, op, before, after, got, stored)
	return got
}

// serverTime returns the Redis server's clock, in nanoseconds since the
// epoch (whole microseconds, as TIME gives it and as the script reads it).
func serverTime(t *testing.T, c redis.UniversalClient) int64 {
	t.Helper()
	now, err := c.Time(t.Context()).Result()
	require.NoError(t, err)
	return now.UnixNano()
}

func cloneState(s engine.State) engine.State {
	s.Log = append([]engine.Entry(nil), s.Log...)
	return s
}

// sentinelOf returns the sluice sentinel err wraps.
func sentinelOf(err error) error {
	for _, s := range []error{sluice.ErrCostExceedsLimit, sluice.ErrInvalidCost, sluice.ErrInvalidDelay,
		sluice.ErrTimeOutOfRange, sluice.ErrUnsupported, sluice.ErrInvalidConfig} {
		if errors.Is(err, s) {
			return s
		}
	}
	return err
}

// storedState reads key's state from Redis as the script packs it: a
// header of a kind byte and six doubles (expiry seconds and nanoseconds,
// the State's time as seconds and nanoseconds, A and B), then, if the kind
// has 128 added, the block's end (Until) as seconds and nanoseconds, then
// the sliding log's entries (seconds, nanoseconds, cost). An absent key is
// the zero State.
func storedState(t *testing.T, c redis.UniversalClient, st *redisstore.Store, key string) engine.State {
	t.Helper()
	v, err := c.Get(t.Context(), st.Key(key)).Bytes()
	if errors.Is(err, redis.Nil) {
		return engine.State{}
	}
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(v), 49)
	f := func(off int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(v[off:])) }
	ns := func(off int) int64 { return int64(f(off))*1e9 + int64(f(off+8)) }
	s := engine.State{Time: ns(17), A: f(33), B: f(41)}
	off := 49
	if v[0] >= 128 {
		require.GreaterOrEqual(t, len(v), 65)
		s.Until = ns(49)
		require.NotZero(t, s.Until, "a block's end is stored only when there is one")
		off = 65
	}
	for ; off+24 <= len(v); off += 24 {
		s.Log = append(s.Log, engine.Entry{Time: ns(off), Cost: f(off + 16)})
	}
	return s
}

// sameState reports whether a and b are the same bit for bit.
func sameState(a, b engine.State) bool {
	if a.Time != b.Time || math.Float64bits(a.A) != math.Float64bits(b.A) ||
		math.Float64bits(a.B) != math.Float64bits(b.B) || a.Until != b.Until || len(a.Log) != len(b.Log) {
		return false
	}
	for i := range a.Log {
		if a.Log[i].Time != b.Log[i].Time || math.Float64bits(a.Log[i].Cost) != math.Float64bits(b.Log[i].Cost) {
			return false
		}
	}
	return true
}

func requireSameState(t *testing.T, want, got engine.State, where string) {
	t.Helper()
	if !sameState(want, got) {
		t.Fatalf("stored state is not Step's: %s\nwant %+v (A %#x)\ngot  %+v (A %#x)",
			where, want, math.Float64bits(want.A), got, math.Float64bits(got.A))
	}
}

// reservable are Params of every algorithm that books reservations, at
// the suite's scales and at the edges of what the script computes.
func reservable() []engine.Params {
	var ps []engine.Params
	for _, p := range append(storetest.Algorithms(), extremes...) {
		if p.Reservable() {
			ps = append(ps, p)
		}
	}
	return append(ps,
		engine.Params{Kind: engine.KindLeakyBucket, Limit: 3, Interval: 1 << 51, Amount: 1},
		engine.Params{Kind: engine.KindTokenBucket, Limit: 2.5, Interval: 333333333, Amount: 0.7},
		engine.Params{Kind: engine.KindTokenBucket, Limit: 1, Interval: int64(24 * time.Hour), Amount: 1, IntervalRefill: true},
	)
}

// origins are the times the scenarios start from: a realistic time, the
// epoch, and ten thousand days before the latest time sluice accepts.
var origins = []int64{base, 0, 1<<62 - int64(10000*24*time.Hour)}

// TestReservationsAreBitIdenticalToStep books turns on a full key, gives
// them back in every order the cancel rule tells apart, and decides
// behind the bookings and from a clock that stepped back.
func TestReservationsAreBitIdenticalToStep(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	for pi, p := range reservable() {
		for oi, origin := range origins {
			t.Run(fmt.Sprintf("%d_%v_from_%d", pi, p.Kind, oi), func(t *testing.T) {
				k := newTwin(t, c, st, p, fmt.Sprintf("r%d.%d", pi, oi))
				now := origin
				op := func(verb engine.Verb, cost float64) engine.Op {
					return engine.Op{Verb: verb, Cost: cost, Now: now}
				}
				reserve := func(cost float64, maxDelay int64, what string) engine.Decision {
					o := op(engine.VerbReserve, cost)
					o.MaxDelay = maxDelay
					return k.apply(o, what)
				}
				cancel := func(d engine.Decision, cost float64, what string) engine.Decision {
					o := op(engine.VerbCancel, cost)
					o.At = d.At
					return k.apply(o, what)
				}
				unit := min(1, p.Limit)
				require.True(t, reserve(unit, 0, "a reservation that fits now is an allow").Allowed)
				require.Zero(t, reserve(unit, 0, "").Delay)
				k.apply(op(engine.VerbAtMost, p.Limit), "fill the key")
				denied := reserve(unit, 0, "a reservation without delay on a full key")
				if !denied.Allowed {
					require.Positive(t, denied.RetryAfter)
					require.False(t, reserve(unit, int64(denied.RetryAfter)-1, "just short of its turn").Allowed)
				}
				// Book until three bookings wait for their turn.
				var booked []engine.Decision
				for i := 0; len(booked) < 3; i++ {
					require.Less(t, i, 200, "a full key books ahead")
					d := reserve(unit, 1<<60, "a booking ahead")
					require.True(t, d.Allowed)
					if d.At != 0 {
						booked = append(booked, d)
					}
				}
				last := booked[len(booked)-1]
				reserve(p.Limit, 1<<60, "a booking of the whole limit")
				k.apply(op(engine.VerbAllow, unit), "an allow behind bookings")
				k.apply(op(engine.VerbCheck, 0), "a check behind bookings")
				k.apply(op(engine.VerbAtMost, 2*p.Limit), "a partial grant behind bookings")
				cancel(booked[0], unit, "a booking followed by later ones")
				cancel(last, unit, "a booking followed by one of the whole limit")
				d := reserve(unit, 1<<60, "the latest booking")
				require.True(t, cancel(d, unit, "the latest booking").Allowed)
				require.False(t, cancel(d, unit, "the latest booking again").Allowed)
				d = reserve(unit, 1<<60, "booked again")
				d.At++
				require.False(t, cancel(d, unit, "an instant no booking ends at").Allowed)
				d.At--
				cancel(d, 0.5*unit, "a cancel of less than was booked")
				for _, back := range []int64{1, p.Interval / 3, p.Interval, 5 * p.Interval} {
					now = max(origin, now-back)
					k.apply(op(engine.VerbCheck, unit), "a check from a clock that stepped back")
					k.apply(op(engine.VerbAllow, unit), "an allow from a clock that stepped back")
					k.apply(op(engine.VerbAtMost, p.Limit), "a partial grant from a clock that stepped back")
					reserve(unit, p.Interval, "a reservation from a clock that stepped back")
				}
				if d.At != 0 {
					now = d.At
					cancel(d, unit, "a booking whose instant has come")
				}
				for range 3 {
					now += p.Interval / 2
					k.apply(op(engine.VerbAllow, unit), "an allow as the bookings come due")
					reserve(unit, p.Interval, "a reservation as the bookings come due")
				}
			})
		}
	}
}

// TestReservationsNotBeforeAnInstantAreBitIdenticalToStep books turns no
// earlier than a given instant (Op.At, as a group books its limits), on a
// fresh key, a key in use and a full one, and gives them back. A meter's
// booking keeps its instant as Decision.At; the GCRA and the interval
// refill cannot tell a booking later than they needed from a later one,
// and give it no At.
func TestReservationsNotBeforeAnInstantAreBitIdenticalToStep(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	for pi, p := range reservable() {
		t.Run(fmt.Sprintf("%d_%v", pi, p.Kind), func(t *testing.T) {
			k := newTwin(t, c, st, p, fmt.Sprint("n", pi))
			now := base
			withoutAt := 0
			for i, fill := range []float64{0, 0.5, 1} {
				for j, ahead := range []int64{0, 1, p.Interval / 3, p.Interval, p.Interval + p.Interval/2, 3 * p.Interval} {
					cost := min(1, p.Limit)
					k.apply(engine.Op{Verb: engine.VerbAtMost, Cost: fill * p.Limit, Now: now}, "fill the key")
					d := k.apply(engine.Op{Verb: engine.VerbReserve, Cost: cost, Now: now, MaxDelay: 1 << 60, At: now + ahead},
						fmt.Sprintf("fill %d, a booking %d ahead", i, j))
					require.True(t, d.Allowed)
					switch {
					case d.Delay > 0 && d.At == 0:
						withoutAt++
					case d.Delay > 0:
						require.Equal(t, now+int64(d.Delay), d.At, "a booking's At is its instant")
						k.apply(engine.Op{Verb: engine.VerbCancel, Cost: cost, Now: now, At: d.At}, "its cancel")
					}
					now += 5 * p.Interval * int64(math.Ceil(p.Limit))
				}
			}
			if p.Kind == engine.KindGCRA || p.IntervalRefill {
				require.Positive(t, withoutAt, "some bookings later than needed have no At")
			} else {
				require.Zero(t, withoutAt, "every meter booking has its At")
			}
		})
	}
}

// TestPartialGrantsAreBitIdenticalToStep asks every algorithm for more
// than, less than and exactly what a key holds, in whole units and not.
func TestPartialGrantsAreBitIdenticalToStep(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	for pi, p := range append(storetest.Algorithms(), extremes...) {
		t.Run(fmt.Sprintf("%d_%v", pi, p.Kind), func(t *testing.T) {
			k := newTwin(t, c, st, p, fmt.Sprint("g", pi))
			now := base
			for i, cost := range []float64{0, 0.5, 1, 2.5, p.Limit, p.Limit + 1, 3 * p.Limit, 1, 0.25, 7, 0, math.Nextafter(p.Limit, 0)} {
				k.apply(engine.Op{Verb: engine.VerbAtMost, Cost: cost, Now: now}, fmt.Sprintf("grant %d of %v", i, cost))
				now += p.Interval / 7
			}
			d := k.apply(engine.Op{Verb: engine.VerbAtMost, Cost: 1e300, Now: now}, "a huge cost")
			require.LessOrEqual(t, d.Granted, p.Limit)
		})
	}
}

// TestClockSteppingBackIsBitIdenticalToStep decides on the buckets from
// times before their state's point: a little, by whole intervals, beyond
// 2^53 ns, and back to the epoch.
func TestClockSteppingBackIsBitIdenticalToStep(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	for pi, p := range reservable() {
		if p.Kind == engine.KindGCRA {
			continue // its state always lies after now: nothing changed there
		}
		t.Run(fmt.Sprintf("%d_%v", pi, p.Kind), func(t *testing.T) {
			k := newTwin(t, c, st, p, fmt.Sprint("b", pi))
			for i, back := range []int64{0, 1, 999, p.Interval / 2, p.Interval, p.Interval + 1, 3 * p.Interval, 1<<53 + 12345, base} {
				verbs := []engine.Verb{engine.VerbAllow, engine.VerbCheck, engine.VerbAtMost}
				if p.Kind == engine.KindLeakyBucket {
					verbs = append(verbs, engine.VerbFill)
				}
				for _, verb := range verbs {
					k.apply(engine.Op{Verb: engine.VerbAllow, Cost: p.Limit * 0.6, Now: base}, "fill at base")
					k.apply(engine.Op{Verb: verb, Cost: min(1, p.Limit), Now: max(base-back, 0)}, fmt.Sprintf("%v %d back", verb, i))
				}
			}
		})
	}
}

// TestBookingsFarAheadAreBitIdenticalToStep replays random traces that
// book far ahead (beyond 2^53 ns, where the script's integers need care),
// give bookings back in any order (a cancel can leave a bucket holding
// more than its burst), and jump back and forth by more than 2^53 ns.
func TestBookingsFarAheadAreBitIdenticalToStep(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	params := []engine.Params{
		{Kind: engine.KindTokenBucket, Limit: 3, Interval: 1<<51 + 7, Amount: 1, IntervalRefill: true},
		{Kind: engine.KindTokenBucket, Limit: 2, Interval: 7, Amount: 0.3, IntervalRefill: true},
		{Kind: engine.KindTokenBucket, Limit: 1.5, Interval: 1 << 50, Amount: 0.4, IntervalRefill: true},
		{Kind: engine.KindLeakyBucket, Limit: 3, Interval: 1 << 51, Amount: 1},
		{Kind: engine.KindTokenBucket, Limit: 2, Interval: 1<<50 + 3, Amount: 0.7},
		{Kind: engine.KindGCRA, Limit: 3, Interval: 1<<50 + 1},
	}
	for pi, p := range params {
		t.Run(fmt.Sprintf("%d_%v", pi, p.Kind), func(t *testing.T) {
			for trace := range 8 {
				rng := rand.New(rand.NewPCG(uint64(pi), uint64(trace)))
				k := newTwin(t, c, st, p, fmt.Sprintf("f%d.%d", pi, trace))
				now := origins[trace%len(origins)]
				var booked []engine.Op
				for range 80 {
					now = max(now+farGap(rng, p), 0)
					costs := []float64{1, 0.25, 0, p.Limit, 0.5}
					op := engine.Op{Verb: engine.VerbReserve, Cost: costs[rng.IntN(len(costs))], Now: now, MaxDelay: 1 << 60}
					switch r := rng.IntN(10); {
					case r < 3 && len(booked) > 0:
						i := len(booked) - 1 // mostly the latest, as a cancel gives it back
						if rng.IntN(3) == 0 {
							i = rng.IntN(len(booked))
						}
						op = booked[i]
						op.Now = now
					case r < 5:
						op.Verb = engine.VerbAllow
						op.Cost = min(op.Cost, p.Limit)
					case r < 6:
						op.Verb = engine.VerbCheck
					case r < 7:
						op.Verb = engine.VerbAtMost
						op.Cost *= 2.5
					}
					d := k.apply(op, "far ahead")
					if op.Verb == engine.VerbReserve && d.At != 0 {
						booked = append(booked, engine.Op{Verb: engine.VerbCancel, Cost: op.Cost, At: d.At})
					}
				}
			}
		})
	}
}

// farGap draws the time to the next request: steps around the interval,
// back before the bookings, or 2^53 ns and more either way.
func farGap(rng *rand.Rand, p engine.Params) int64 {
	switch r := rng.IntN(10); {
	case r < 4:
		return rng.Int64N(p.Interval)
	case r < 6:
		return -rng.Int64N(3 * p.Interval)
	case r < 7:
		return 1<<53 + rng.Int64N(1<<54)
	case r < 8:
		return -(1<<53 + rng.Int64N(1<<54))
	}
	return 0
}

// TestServerClockReservationsAreBitIdenticalToStep books and cancels on
// the server's clock: a reservation's At is on that clock, and the cancel
// that hands it back, whatever its own Now says, gives the turn back.
func TestServerClockReservationsAreBitIdenticalToStep(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c)
	const hour = int64(time.Hour)
	for pi, p := range []engine.Params{
		{Kind: engine.KindGCRA, Limit: 2, Interval: hour},
		{Kind: engine.KindLeakyBucket, Limit: 2, Interval: hour, Amount: 1},
		{Kind: engine.KindTokenBucket, Limit: 2, Interval: hour, Amount: 1},
		{Kind: engine.KindTokenBucket, Limit: 2, Interval: hour, Amount: 1, IntervalRefill: true},
	} {
		t.Run(fmt.Sprintf("%d_%v", pi, p.Kind), func(t *testing.T) {
			k := newTwin(t, c, st, p, fmt.Sprint("s", pi))
			reserve := engine.Op{Verb: engine.VerbReserve, Cost: 1, MaxDelay: 10 * hour}
			for range 2 {
				require.Zero(t, k.applyOnServerClock(reserve, "a reservation that fits now").Delay)
			}
			first := k.applyOnServerClock(reserve, "a booking ahead")
			before := serverTime(t, c)
			second := k.applyOnServerClock(reserve, "a second booking ahead")
			after := serverTime(t, c)
			require.Positive(t, first.Delay)
			require.Greater(t, second.At, first.At)
			// The booking was decided at an instant of the server's clock
			// between the two readings, however long the call took: its
			// instant less its delay.
			decided := second.At - int64(second.Delay)
			require.GreaterOrEqual(t, decided, before, "At is on the server's clock")
			require.LessOrEqual(t, decided, after, "At is on the server's clock")

			cancel := func(d engine.Decision) engine.Op {
				return engine.Op{Verb: engine.VerbCancel, Cost: 1, Now: 12345, At: d.At} // Now is ignored
			}
			require.False(t, k.applyOnServerClock(cancel(first), "a booking followed by another").Allowed)
			require.True(t, k.applyOnServerClock(cancel(second), "the latest booking").Allowed)
			require.False(t, k.applyOnServerClock(cancel(second), "the latest booking again").Allowed)
			k.applyOnServerClock(engine.Op{Verb: engine.VerbAtMost, Cost: 3}, "a partial grant behind a booking")
			k.applyOnServerClock(engine.Op{Verb: engine.VerbReserve, Cost: 2, MaxDelay: hour}, "a booking too far")
		})
	}
}

// TestReservationKeepsTheKeyUntilItsTurnHasPassed requires a key that
// holds a booking to live at least until the key is fresh again, which
// lies after the booked instant.
func TestReservationKeepsTheKeyUntilItsTurnHasPassed(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c)
	ctx := t.Context()
	for pi, p := range []engine.Params{
		{Kind: engine.KindGCRA, Limit: 1, Interval: int64(time.Hour)},
		{Kind: engine.KindLeakyBucket, Limit: 1, Interval: int64(time.Hour), Amount: 1},
		{Kind: engine.KindTokenBucket, Limit: 1, Interval: int64(time.Hour), Amount: 1, IntervalRefill: true},
	} {
		t.Run(fmt.Sprintf("%d_%v", pi, p.Kind), func(t *testing.T) {
			key := fmt.Sprint("ttl", pi)
			var d engine.Decision
			for range 3 {
				var err error
				d, err = st.Apply(ctx, key, &p, engine.Op{Verb: engine.VerbReserve, Cost: 1, MaxDelay: int64(10 * time.Hour)})
				require.NoError(t, err)
				require.True(t, d.Allowed)
			}
			require.Greater(t, d.Delay, time.Hour, "the third booking waits for two turns")
			require.Greater(t, d.ResetAfter, d.Delay, "fresh only after the booked turn")
			expiry, err := c.PExpireTime(ctx, st.Key(key)).Result()
			require.NoError(t, err)
			require.GreaterOrEqual(t, expiry, time.Duration(d.At)+d.ResetAfter-d.Delay-time.Second,
				"the key lives until it is fresh again")
		})
	}
}

// TestInvalidReservationsFailBeforeRedis uses a client of a port where no
// server listens: every error here comes from validation.
func TestInvalidReservationsFailBeforeRedis(t *testing.T) {
	c := newClient(t, fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t)))
	gcra := engine.Params{Kind: engine.KindGCRA, Limit: 2, Interval: int64(time.Second)}
	window := engine.Params{Kind: engine.KindFixedWindow, Limit: 2, Interval: int64(time.Second)}
	tests := []struct {
		name string
		p    engine.Params
		op   engine.Op
		want error
	}{
		{"NegativeMaxDelay", gcra, engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: base, MaxDelay: -1}, sluice.ErrInvalidDelay},
		{"MaxDelayOver2To60", gcra, engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: base, MaxDelay: 1<<60 + 1}, sluice.ErrInvalidDelay},
		{"NegativeAt", gcra, engine.Op{Verb: engine.VerbCancel, Cost: 1, Now: base, At: -1}, sluice.ErrTimeOutOfRange},
		{"AtBeyondTheLatestBooking", gcra, engine.Op{Verb: engine.VerbCancel, Cost: 1, Now: base, At: 1<<62 + 1<<60 + 1}, sluice.ErrTimeOutOfRange},
		{"ReservationOfAWindow", window, engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: base}, sluice.ErrUnsupported},
		{"CancelOfAWindow", window, engine.Op{Verb: engine.VerbCancel, Cost: 1, Now: base, At: base + 1}, sluice.ErrUnsupported},
		{"ReservationAboveTheLimit", gcra, engine.Op{Verb: engine.VerbReserve, Cost: 3, Now: base}, sluice.ErrCostExceedsLimit},
		{"NaNGrant", gcra, engine.Op{Verb: engine.VerbAtMost, Cost: math.NaN(), Now: base}, sluice.ErrInvalidCost},
		{"WholeUnitAboveALimitBelowOne", engine.Params{Kind: engine.KindGCRA, Limit: 0.5, Interval: int64(time.Second)},
			engine.Op{Verb: engine.VerbAtMost, Cost: 2, Now: base}, sluice.ErrCostExceedsLimit},
	}
	for _, mode := range []struct {
		name string
		opts []redisstore.Option
	}{{"CallerClock", []redisstore.Option{redisstore.WithCallerClock(testSkew)}}, {"ServerClock", nil}} {
		st := newStore(t, c, mode.opts...)
		for _, tt := range tests {
			t.Run(mode.name+"/"+tt.name, func(t *testing.T) {
				_, err := st.Apply(t.Context(), "k", &tt.p, tt.op)
				require.ErrorIs(t, err, tt.want)
				_, _, specErr := tt.p.Step(engine.State{}, tt.op)
				require.ErrorIs(t, specErr, tt.want, "the specification agrees")
			})
		}
	}
}

// TestPlantedStatesAreBitIdenticalToStep writes states straight into
// Redis, as the script packs them, and decides on them: points far ahead
// of now and far behind it (2^53 ns and more either way), a few
// nanoseconds or whole intervals off, holding more than the burst (as a
// cancel can leave an interval-refill bucket), with every verb, and
// cancels of the booking the state ends at. Each decision and the state
// stored after it must be Step's bit for bit.
func TestPlantedStatesAreBitIdenticalToStep(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	ctx := t.Context()
	params := append(reservable(),
		engine.Params{Kind: engine.KindTokenBucket, Limit: 3, Interval: 1<<51 + 7, Amount: 1, IntervalRefill: true},
		engine.Params{Kind: engine.KindTokenBucket, Limit: 1e6, Interval: 7, Amount: 0.3, IntervalRefill: true},
		engine.Params{Kind: engine.KindLeakyBucket, Limit: 1e6, Interval: 3, Amount: 0.37},
		engine.Params{Kind: engine.KindGCRA, Limit: 3, Interval: 1<<50 + 1, Penalty: 1 << 60, CountDenied: true},
		engine.Params{Kind: engine.KindLeakyBucket, Limit: 3, Interval: 1 << 51, Amount: 1, Penalty: 1<<53 + 3},
	)
	params = append(params, storetest.Strict()...)
	for pi, p := range params {
		t.Run(fmt.Sprintf("%d_%v", pi, p.Kind), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(pi), 42))
			key := fmt.Sprint("planted", pi)
			blocked, withoutAt := 0, 0
			defer func() {
				if t.Failed() {
					return
				}
				if p.Penalty > 0 {
					require.Positive(t, blocked, "some decisions are blocked")
				}
				if p.Kind == engine.KindGCRA {
					require.Positive(t, withoutAt, "some bookings later than needed have no At")
				}
			}()
			for i := range 150 {
				now := []int64{base, rng.Int64N(1 << 62), rng.Int64N(int64(time.Hour))}[rng.IntN(3)]
				s := engine.State{Time: max(now+plantedOffset(rng, p), 0), A: plantedAmount(rng, p)}
				if p.Kind == engine.KindGCRA {
					s.A = 0
				}
				if rng.IntN(2) == 0 {
					// A block, in force or over, also on Params without a
					// penalty, whose steps keep or drop it as Go's do.
					s.Until = max(now+plantedBlock(rng, p), 1)
				}
				op := engine.Op{Verb: engine.Verb(1 + rng.IntN(6)), Cost: []float64{0, 1, 0.5, p.Limit, 2.5 * p.Limit}[rng.IntN(5)], Now: now}
				switch op.Verb {
				case engine.VerbFill:
					if p.Kind != engine.KindLeakyBucket {
						op.Verb = engine.VerbAllow
					}
				case engine.VerbReserve:
					op.MaxDelay = []int64{0, rng.Int64N(4 * p.Interval), 1 << 60}[rng.IntN(3)]
					// Mostly none, else an instant not to book before, as
					// a group gives: around now, or the state's point.
					op.At = []int64{0, 0, max(now+rng.Int64N(4*p.Interval)-p.Interval, 0), s.Time + rng.Int64N(3) - 1}[rng.IntN(4)]
					op.At = max(op.At, 0)
				case engine.VerbCancel:
					op.At = s.Time
					if p.Kind == engine.KindGCRA {
						op.At -= arithNanos(p.Limit, p.Interval)
					}
					op.At = max(op.At+[]int64{0, 0, 0, 1, -1}[rng.IntN(5)], 0)
				}
				if op.Verb != engine.VerbFill && op.Verb != engine.VerbAtMost {
					op.Cost = min(op.Cost, p.Limit)
				}
				plant(t, c, st.Key(key), p.Kind, s)
				next, want, wantErr := p.Step(s, op)
				got, err := st.Apply(ctx, key, &p, op)
				where := fmt.Sprintf("case %d: state %+v, op %+v", i, s, op)
				if wantErr != nil {
					require.ErrorIs(t, err, sentinelOf(wantErr), where)
					continue
				}
				require.NoError(t, err, where)
				storetest.RequireIdenticalDecision(t, want, got, where)
				if !p.Records(op.Verb, &want) {
					next = s
				}
				requireSameState(t, next, storedState(t, c, st, key), where)
				if want.Blocked {
					blocked++
				}
				if want.Delay > 0 && want.At == 0 {
					withoutAt++
				}
			}
		})
	}
}

// plantedOffset draws where a planted state's point lies from now.
func plantedOffset(rng *rand.Rand, p engine.Params) int64 {
	k := 1 + rng.Int64N(5)
	switch rng.IntN(8) {
	case 0:
		return 0
	case 1:
		return rng.Int64N(2001) - 1000
	case 2:
		return k*p.Interval + rng.Int64N(3) - 1
	case 3:
		return -k*p.Interval + rng.Int64N(3) - 1
	case 4:
		return 1<<53 + rng.Int64N(1<<56)
	case 5:
		return -(1<<53 + rng.Int64N(1<<56))
	case 6:
		return rng.Int64N(4*p.Interval) - 2*p.Interval
	}
	return rng.Int64N(1<<54) - 1<<53
}

// plantedBlock draws where a planted block's end lies from now: ended,
// ending now or a nanosecond later, within the penalty, or far ahead.
func plantedBlock(rng *rand.Rand, p engine.Params) int64 {
	penalty := max(p.Penalty, int64(time.Second))
	switch rng.IntN(6) {
	case 0:
		return -rng.Int64N(penalty)
	case 1:
		return 0
	case 2:
		return 1
	case 3:
		return penalty
	case 4:
		return 1<<53 + rng.Int64N(1<<56)
	}
	return 1 + rng.Int64N(penalty)
}

// plantedAmount draws a planted state's amount: none, within the limit,
// the limit, or above it by a few refills.
func plantedAmount(rng *rand.Rand, p engine.Params) float64 {
	switch rng.IntN(5) {
	case 0:
		return 0
	case 1:
		return p.Limit
	case 2:
		return p.Limit + float64(1+rng.IntN(10))*p.Amount - []float64{0, 0.25, 0.5}[rng.IntN(3)]
	}
	return math.Round(rng.Float64()*p.Limit*100) / 100
}

// arithNanos is GCRA's conversion of an amount to nanoseconds.
func arithNanos(amount float64, interval int64) int64 {
	return int64(math.Round(amount * float64(interval)))
}

// plant writes s, whose times are not negative, as the state of the Redis
// key name, packed as the script packs it, with a TTL of an hour and an
// expiry (from which the script reads the state as fresh) beyond every
// time sluice accepts.
func plant(t *testing.T, c redis.UniversalClient, name string, kind engine.Kind, s engine.State) {
	t.Helper()
	b := []byte{byte(kind)}
	times := []float64{1 << 40, 0, float64(s.Time / 1e9), float64(s.Time % 1e9), s.A, s.B}
	if s.Until != 0 {
		b[0] += 128
		times = append(times, float64(s.Until/1e9), float64(s.Until%1e9))
	}
	for _, x := range times {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	for _, e := range s.Log {
		for _, x := range []float64{float64(e.Time / 1e9), float64(e.Time % 1e9), e.Cost} {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
		}
	}
	require.NoError(t, c.Set(t.Context(), name, b, time.Hour).Err())
}
