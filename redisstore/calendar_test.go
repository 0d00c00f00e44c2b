package redisstore_test

import (
	"fmt"
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

// The tests here hold calendar windows (engine.Params.Windows) to
// Params.Step bit for bit, on the caller's clock and on the server's, and
// require the server's time outside a call's windows to be refused,
// recording nothing.

const (
	hour = int64(time.Hour)
	day  = 24 * hour
)

// calendar returns the fixed window of limit over the calendar windows
// [w0, w1), [w1, w2), [w2, w3).
func calendar(limit float64, w0, w1, w2, w3 int64) engine.Params {
	return engine.Params{Kind: engine.KindFixedWindow, Limit: limit, Interval: w2 - w1, Windows: [4]int64{w0, w1, w2, w3}}
}

// utc returns the instant of a date and time in UTC, in nanoseconds.
func utc(year int, month time.Month, d, h, ns int) int64 {
	return time.Date(year, month, d, h, 0, 0, ns, time.UTC).UnixNano()
}

// TestCalendarWindowDecidesAcrossItsBoundary counts a limit of 3 in a
// calendar window of 25 hours and 7 ns (a day that a clock change made
// longer), across its end into the next window, and from a clock that
// stepped back into the previous one: every decision is Step's, with its
// RetryAfter and ResetAfter to the nanosecond, and the stored state's
// Time is the end of the window counted in.
func TestCalendarWindowDecidesAcrossItsBoundary(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	w1 := utc(2026, time.October, 25, 0, 0)
	w0, w2 := w1-23*hour, w1+25*hour+7
	w3 := w2 + day
	p := calendar(3, w0, w1, w2, w3)
	require.NoError(t, p.Validate())
	k := newTwin(t, c, st, p, "day")
	allow := func(now int64, what string) engine.Decision {
		return k.apply(engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now}, what)
	}
	stored := func() engine.State { return storedState(t, c, st, "day") }

	now := w1 + hour + 123
	for i := range 3 {
		d := allow(now, "within the limit")
		require.True(t, d.Allowed)
		require.Equal(t, float64(i+1), d.Used)
		require.Equal(t, time.Duration(w2-now), d.ResetAfter, "until the window's end")
	}
	require.Equal(t, engine.State{Time: w2, A: 3}, stored(), "the window's end and its count")
	d := allow(now, "over the limit")
	require.False(t, d.Allowed)
	require.Equal(t, time.Duration(w2-now), d.RetryAfter)
	require.Equal(t, time.Duration(w2-now), d.ResetAfter)
	d = allow(w2-1, "the window's last nanosecond")
	require.False(t, d.Allowed)
	require.Equal(t, time.Nanosecond, d.RetryAfter)

	d = allow(w2, "the next window's first nanosecond")
	require.True(t, d.Allowed)
	require.Equal(t, 1.0, d.Used, "a new window counts from zero")
	require.Equal(t, time.Duration(w3-w2), d.ResetAfter)
	require.Equal(t, engine.State{Time: w3, A: 1}, stored())

	back := w2 - 10*int64(time.Second)
	d = allow(back, "a clock stepped back into the previous window")
	require.True(t, d.Allowed)
	require.Equal(t, 2.0, d.Used, "it stays in the stored window")
	require.Equal(t, time.Duration(w3-back), d.ResetAfter, "until the stored window's end")
	require.Equal(t, engine.State{Time: w3, A: 2}, stored())

	require.True(t, allow(w3-1, "the stored window's last nanosecond").Allowed)
	d = allow(w3-1, "over the limit at its last nanosecond")
	require.False(t, d.Allowed)
	require.Equal(t, time.Nanosecond, d.RetryAfter)

	// The caller's next calendar, now in its middle window.
	k.p = calendar(3, w1, w2, w3, w3+day)
	d = allow(w3, "the window after, under the next calendar")
	require.True(t, d.Allowed)
	require.Equal(t, 1.0, d.Used)
	require.Equal(t, time.Duration(day), d.ResetAfter)
}

// TestCalendarWindowEndsUnderABlock overflows a calendar window under a
// penalty a nanosecond before the window ends, so that the key, blocked,
// outlives its window: at the next window's first nanosecond, whose start
// is the stored end, the key counts nothing though the block holds it,
// and from the block's end the next window's allowance is whole.
func TestCalendarWindowEndsUnderABlock(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	w1 := utc(2026, time.March, 29, 0, 0)
	for _, counted := range []bool{false, true} {
		p := calendar(3, w1-day, w1, w1+23*hour, w1+47*hour)
		p.Penalty, p.CountDenied = hour+7, counted
		k := newTwin(t, c, st, p, fmt.Sprintf("blocked%v", counted))
		w2 := p.Windows[2]
		op := func(verb engine.Verb, cost float64, now int64) engine.Op {
			return engine.Op{Verb: verb, Cost: cost, Now: now}
		}
		k.apply(op(engine.VerbAllow, 2, w2-hour), "within the limit")
		d := k.apply(op(engine.VerbAllow, 2, w2-1), "the overflow at the window's last nanosecond")
		require.True(t, d.Blocked)
		require.Equal(t, w2, storedState(t, c, st, k.key).Time, "the window's end")
		d = k.apply(op(engine.VerbCheck, 1, w2), "a check at the next window's first nanosecond")
		require.True(t, d.Blocked)
		require.False(t, d.Allowed)
		require.Zero(t, d.Used, "the stored window has ended")
		k.apply(op(engine.VerbAtMost, 5, w2+1), "a partial grant in the block")
		d = k.apply(op(engine.VerbAllow, 3, w2-1+p.Penalty), "an allow of the whole limit at the block's end")
		require.True(t, d.Allowed)
		require.Equal(t, time.Duration(p.Windows[3]-(w2-1+p.Penalty)), d.ResetAfter)
	}
}

// TestYearlyCalendarWindow counts in calendar years, each longer than
// 2^53 ns: the store decides them (its spans are pairs), as Step does, to
// the nanosecond.
func TestYearlyCalendarWindow(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	// The year 2026 ends a nanosecond late, so that its length is no
	// double: the store must not compute with it.
	p := calendar(2, utc(2025, 1, 1, 0, 0), utc(2026, 1, 1, 0, 0), utc(2027, 1, 1, 0, 1), utc(2028, 1, 1, 0, 0))
	require.Greater(t, p.Interval, int64(1<<53))
	require.NotEqual(t, p.Interval, int64(float64(p.Interval)), "the interval is no double")
	k := newTwin(t, c, st, p, "year")
	now := utc(2026, time.July, 1, 0, 1)
	for range 2 {
		d := k.apply(engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now}, "within the year's limit")
		require.True(t, d.Allowed)
		require.Equal(t, time.Duration(p.Windows[2]-now), d.ResetAfter)
	}
	d := k.apply(engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now}, "over it")
	require.False(t, d.Allowed)
	require.Equal(t, time.Duration(p.Windows[2]-now), d.RetryAfter)
	now = p.Windows[3] - 1
	d = k.apply(engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now}, "the next year's last nanosecond")
	require.True(t, d.Allowed)
	require.Equal(t, time.Nanosecond, d.ResetAfter)
	require.Equal(t, engine.State{Time: p.Windows[3], A: 1}, storedState(t, c, st, "year"))
}

// calendars are boundaries of six consecutive calendar windows: a decision
// runs under the Params of three of them, D[k] to D[k+3], at a time in
// them. Windows of days that clock changes make longer or shorter, with
// odd nanoseconds; months; years (each longer than 2^53 ns, some a few
// nanoseconds more, so that their lengths are no doubles); windows
// before and after the epoch; and windows up to the latest boundary
// Validate accepts, 2^62 + 2^60 ns.
var calendars = []struct {
	name string
	d    [6]int64
}{
	{"days", [6]int64{base - 2*day + 12345, base - day + 12345, base + 23*hour + 12345, base + 2*day + 12345 - hour, base + 3*day - hour + 12346, base + 4*day}},
	{"months", [6]int64{utc(2026, 1, 1, 0, 0), utc(2026, 2, 1, 0, 0), utc(2026, 3, 1, 0, 0), utc(2026, 4, 1, 0, 0), utc(2026, 5, 1, 0, 0), utc(2026, 6, 1, 0, 0)}},
	{"years", [6]int64{utc(2023, 1, 1, 0, 0), utc(2024, 1, 1, 0, 3), utc(2025, 1, 1, 0, 0), utc(2026, 1, 1, 0, 1), utc(2027, 1, 1, 0, 0), utc(2028, 1, 1, 0, 0)}},
	{"epoch", [6]int64{-1 << 60, -7, 1<<40 + 3, 1 << 58, 1<<58 + 1<<57, 1 << 59}},
	{"end-of-time", [6]int64{1<<62 - 3<<59, 1<<62 - 1<<59 - 5, 1<<62 - 1e9 - 1, 1<<62 + 1, 1<<62 + 1<<59, 1<<62 + 1<<60}},
}

// calendarParams are the variants of a calendar window the random traces
// decide under: plain, with a fractional limit, with denials counted,
// under a penalty, and both.
func calendarParams(d [6]int64, k int) []engine.Params {
	p := calendar(3, d[k], d[k+1], d[k+2], d[k+3])
	frac := p
	frac.Limit = 2.5
	counted := p
	counted.CountDenied = true
	penalty := p
	penalty.Penalty = hour + 7
	both := penalty
	both.CountDenied = true
	return []engine.Params{p, frac, counted, penalty, both}
}

// TestCalendarWindowsAreBitIdenticalToStep decides random traces of allows,
// checks and partial grants, some of costs over the limit, under calendar
// windows, with a penalty and counted denials or not, at times that cross
// their boundaries, step back, and move to the next calendar's windows:
// each decision, and the state stored after it, are Step's bit for bit.
func TestCalendarWindowsAreBitIdenticalToStep(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	for _, cal := range calendars {
		for vi := range calendarParams(cal.d, 0) {
			t.Run(fmt.Sprintf("%s/%d", cal.name, vi), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(vi), 7))
				key := fmt.Sprintf("%s.%d", cal.name, vi)
				var s engine.State
				for i := range 300 {
					k := rng.IntN(3)
					p := calendarParams(cal.d, k)[vi]
					op := engine.Op{Verb: engine.VerbAllow, Now: calendarTime(rng, cal.d, k)}
					switch rng.IntN(5) {
					case 0:
						op.Verb = engine.VerbCheck
					case 1:
						op.Verb = engine.VerbAtMost
					}
					op.Cost = []float64{0, 0.5, 1, 1, 1, 2, 2.5, 3, 4}[rng.IntN(9)]
					s = requireStep(t, c, st, key, &p, s, op, fmt.Sprintf("op %d", i))
				}
			})
		}
	}
}

// calendarTime returns a time in the windows D[k] to D[k+3], from 0 to
// 2^62 ns: often at or around a boundary, else anywhere in them.
func calendarTime(rng *rand.Rand, d [6]int64, k int) int64 {
	lo, hi := max(d[k], 0), min(d[k+3], 1<<62+1) // [lo, hi)
	var now int64
	switch rng.IntN(3) {
	case 0:
		now = d[k+rng.IntN(4)] + rng.Int64N(5) - 2
	case 1:
		now = d[k+rng.IntN(4)] + rng.Int64N(2*hour) - hour
	default:
		now = lo + rng.Int64N(hi-lo)
	}
	return min(max(now, lo), hi-1)
}

// requireStep decides op on key under p on st, on the caller's clock,
// requires Step's decision on s, or its error (an overflow under a
// penalty is decided with it), and Step's state stored after, and
// returns the state.
func requireStep(t *testing.T, c redis.UniversalClient, st *redisstore.Store, key string, p *engine.Params,
	s engine.State, op engine.Op, what string,
) engine.State {
	t.Helper()
	next, want, wantErr := p.Step(cloneState(s), op)
	got, err := st.Apply(t.Context(), key, p, op)
	where := fmt.Sprintf("%s: %v, op %+v", what, p, op)
	if wantErr != nil {
		require.ErrorIs(t, err, sentinelOf(wantErr), where)
		if !p.Overflows(op, wantErr) {
			return s
		}
	} else {
		require.NoError(t, err, where)
	}
	storetest.RequireIdenticalDecision(t, want, got, where)
	if p.Records(op.Verb, &want) {
		s = next
	}
	requireSameState(t, s, storedState(t, c, st, key), where)
	return s
}

// TestCalendarGroupsAreBitIdenticalToDecideGroup decides groups of two
// calendar windows, each over windows of its own, and a GCRA, on the
// caller's clock: every decision and state is DecideGroup's over Step.
// A group with a calendar window whose windows do not hold the caller's
// time is refused before Redis is contacted.
func TestCalendarGroupsAreBitIdenticalToDecideGroup(t *testing.T) {
	srv := testserver.StartRedis(t)
	c := newClient(t, srv.Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	days, years := calendars[0].d, calendars[2].d
	keys := []string{"{g}:day", "{g}:year", "{g}:gcra"}
	spec := make([]engine.State, len(keys))
	rng := rand.New(rand.NewPCG(3, 4))
	now := days[1]
	for i := range 200 {
		// The day's calendar moves with the time; the years hold it.
		k := 0
		for k < 2 && now >= days[k+2] {
			k++
		}
		limits := []engine.Params{
			calendar(3, days[k], days[k+1], days[k+2], days[k+3]),
			calendar(5, years[2], years[3], years[4], years[5]),
			{Kind: engine.KindGCRA, Limit: 4, Interval: hour},
		}
		limits[1].CountDenied = i%2 == 0
		verb := []engine.Verb{engine.VerbAllow, engine.VerbAllow, engine.VerbCheck}[rng.IntN(3)]
		ops := make([]engine.GroupOp, len(limits))
		for j := range limits {
			ops[j] = engine.GroupOp{Key: keys[j], Params: &limits[j], Op: engine.Op{Verb: verb, Cost: 1, Now: now}}
		}
		next := append([]engine.State(nil), spec...)
		want := make([]engine.Decision, len(ops))
		wantD, err := engine.DecideGroup(ops, func(j int, op engine.Op) (engine.Decision, error) {
			s, d, err := limits[j].Step(cloneState(next[j]), op)
			if limits[j].Records(op.Verb, &d) {
				next[j] = s
			}
			return d, err
		}, want)
		require.NoError(t, err)
		got := make([]engine.Decision, len(ops))
		gotD, err := st.ApplyGroup(t.Context(), ops, got)
		where := fmt.Sprintf("group %d, %v at %d", i, verb, now)
		require.NoError(t, err, where)
		storetest.RequireIdenticalDecision(t, wantD, gotD, where)
		for j := range want {
			storetest.RequireIdenticalDecision(t, want[j], got[j], fmt.Sprintf("%s, limit %d", where, j))
			requireSameState(t, next[j], storedState(t, c, st, keys[j]), fmt.Sprintf("%s, limit %d", where, j))
		}
		spec = next
		now += rng.Int64N(3 * hour)
		if now >= days[5] {
			break
		}
	}

	calls := scriptCalls(t, srv.Addr)
	old := calendar(3, utc(2001, 1, 1, 0, 0), utc(2001, 1, 2, 0, 0), utc(2001, 1, 3, 0, 0), utc(2001, 1, 4, 0, 0))
	gcra := engine.Params{Kind: engine.KindGCRA, Limit: 4, Interval: hour}
	ops := []engine.GroupOp{
		{Key: "{h}:gcra", Params: &gcra, Op: engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: base}},
		{Key: "{h}:old", Params: &old, Op: engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: base}},
	}
	_, err := st.ApplyGroup(t.Context(), ops, make([]engine.Decision, 2))
	require.ErrorIs(t, err, sluice.ErrTimeOutOfRange)
	require.Equal(t, calls, scriptCalls(t, srv.Addr), "refused before Redis")
}

// TestCalendarWindowOutsideTheCallersTimeFailsBeforeRedis: on the
// caller's clock, a time outside the windows is refused by Apply and
// ApplyBatch as Step refuses it, without a round trip; the batch's other
// requests are decided.
func TestCalendarWindowOutsideTheCallersTimeFailsBeforeRedis(t *testing.T) {
	srv := testserver.StartRedis(t)
	c := newClient(t, srv.Addr)
	st := newStore(t, c, redisstore.WithCallerClock(testSkew))
	p := calendar(3, utc(2001, 1, 1, 0, 0), utc(2001, 1, 2, 0, 0), utc(2001, 1, 3, 0, 0), utc(2001, 1, 4, 0, 0))
	_, _, wantErr := p.Step(engine.State{}, allow(1, base))
	require.ErrorIs(t, wantErr, sluice.ErrTimeOutOfRange)
	calls := scriptCalls(t, srv.Addr)
	_, err := st.Apply(t.Context(), "old", &p, allow(1, base))
	require.ErrorIs(t, err, sluice.ErrTimeOutOfRange)
	require.Equal(t, calls, scriptCalls(t, srv.Addr), "refused before Redis")

	in := p
	results := st.ApplyBatch(t.Context(), []redisstore.Request{
		{Key: "old", Params: &p, Op: allow(1, base)},
		{Key: "in", Params: &in, Op: allow(1, utc(2001, 1, 2, 5, 0))},
	})
	require.ErrorIs(t, results[0].Err, sluice.ErrTimeOutOfRange)
	require.NoError(t, results[1].Err)
	require.True(t, results[1].Decision.Allowed)
	require.Equal(t, time.Duration(19*hour), results[1].Decision.ResetAfter)
	require.Zero(t, c.Exists(t.Context(), st.Key("old")).Val())
}

// serverCalendar returns a calendar window of limit 3 whose boundaries are
// the server's time now plus each of offsets.
func serverCalendar(now int64, offsets [4]int64) engine.Params {
	return calendar(3, now+offsets[0], now+offsets[1], now+offsets[2], now+offsets[3])
}

// TestServerClockCalendarWindow decides calendar windows on the server's
// clock: windows around its time admit and count, in whichever of the
// three holds it, as Step does at one of the microseconds the call
// lasted; windows that do not hold it (in 2001, in 2100) are refused with
// ErrTimeOutOfRange, naming the server's time, and leave the key as it
// was.
func TestServerClockCalendarWindow(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c)
	ctx := t.Context()
	now := serverTime(t, c)
	for _, tt := range []struct {
		name    string
		offsets [4]int64
		end     int64 // the offset of the end of the window that holds now
	}{
		{"middle", [4]int64{-2 * hour, -hour, hour, 2 * hour}, hour},
		{"first", [4]int64{-hour, hour + 3, 2 * hour, 3 * hour}, hour + 3},
		{"third", [4]int64{-3 * hour, -2 * hour, -hour, hour - 7}, hour - 7},
		{"year", [4]int64{-400 * day, -200 * day, 166 * day, 531 * day}, 166 * day},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := serverCalendar(now, tt.offsets)
			k := newTwin(t, c, st, p, tt.name)
			before := serverTime(t, c)
			for i := range 3 {
				d := k.applyOnServerClock(engine.Op{Verb: engine.VerbAllow, Cost: 1}, "within the limit")
				require.True(t, d.Allowed)
				require.Equal(t, float64(i+1), d.Used)
			}
			d := k.applyOnServerClock(engine.Op{Verb: engine.VerbAllow, Cost: 1}, "over the limit")
			after := serverTime(t, c)
			require.False(t, d.Allowed)
			end := now + tt.end
			require.LessOrEqual(t, d.RetryAfter, time.Duration(end-before))
			require.GreaterOrEqual(t, d.RetryAfter, time.Duration(end-after))
			require.Equal(t, d.RetryAfter, d.ResetAfter)
			require.Equal(t, engine.State{Time: end, A: 3}, storedState(t, c, st, tt.name), "the end of the window that holds now")
			k.applyOnServerClock(engine.Op{Verb: engine.VerbAtMost, Cost: 2}, "a partial grant")
			k.applyOnServerClock(engine.Op{Verb: engine.VerbCheck, Cost: 0}, "a check")
		})
	}

	for _, tt := range []struct {
		name string
		p    engine.Params
		date string
	}{
		{"2001", calendar(3, utc(2001, 1, 1, 0, 0), utc(2001, 1, 2, 0, 0), utc(2001, 1, 3, 0, 0), utc(2001, 1, 4, 0, 0)), "2001-01-01 00:00:00 +0000 UTC"},
		{"2100", calendar(3, utc(2100, 1, 1, 0, 0), utc(2100, 2, 1, 0, 0), utc(2100, 3, 1, 0, 0), utc(2100, 4, 1, 0, 0)), "2100-01-01 00:00:00 +0000 UTC"},
		{"justEnded", serverCalendar(now, [4]int64{-3 * hour, -2 * hour, -hour, -1}), ""},
	} {
		t.Run("refused/"+tt.name, func(t *testing.T) {
			// A key that holds a count, as windows around now left it.
			key := "refused" + tt.name
			held := serverCalendar(now, [4]int64{-hour, 0, hour, 2 * hour})
			_, err := st.Apply(ctx, key, &held, allow(1, 0))
			require.NoError(t, err)
			value := c.Get(ctx, st.Key(key)).Val()
			expiry := c.PExpireTime(ctx, st.Key(key)).Val()
			for _, verb := range []engine.Verb{engine.VerbAllow, engine.VerbCheck, engine.VerbAtMost} {
				// The caller's time lies in the windows: only the server's
				// does not.
				op := engine.Op{Verb: verb, Cost: 1, Now: tt.p.Windows[1]}
				d, err := st.Apply(ctx, key, &tt.p, op)
				require.ErrorIs(t, err, sluice.ErrTimeOutOfRange, "%v", verb)
				require.False(t, d.Allowed)
				require.Contains(t, err.Error(), "the server's time")
				require.Contains(t, err.Error(), tt.date)
				require.Equal(t, value, c.Get(ctx, st.Key(key)).Val(), "the key is untouched")
				require.Equal(t, expiry, c.PExpireTime(ctx, st.Key(key)).Val(), "the key's expiry is untouched")
				_, err = st.Apply(ctx, key+":fresh", &tt.p, op)
				require.ErrorIs(t, err, sluice.ErrTimeOutOfRange)
				require.Zero(t, c.Exists(ctx, st.Key(key+":fresh")).Val(), "no key is written")
			}
			results := st.ApplyBatch(ctx, []redisstore.Request{{Key: key, Params: &tt.p, Op: allow(1, 0)}})
			require.ErrorIs(t, results[0].Err, sluice.ErrTimeOutOfRange)
			require.Equal(t, value, c.Get(ctx, st.Key(key)).Val())
		})
	}
}

// TestServerClockCalendarSuite runs storetest's server-clock calendar
// checks on a store on the server's clock (one node: the suite's group
// keys share no hash tag).
func TestServerClockCalendarSuite(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	storetest.RunServerClockCalendar(t, newStore(t, c))
}

// TestServerClockCalendarGroup decides a group with calendar windows on
// the server's clock: windows that hold its time decide, as DecideGroup
// does at a microsecond of the call, and one limit whose windows do not
// hold it refuses the whole group, writing nothing on any key.
func TestServerClockCalendarGroup(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	st := newStore(t, c)
	ctx := t.Context()
	now := serverTime(t, c)
	gcra := engine.Params{Kind: engine.KindGCRA, Limit: 4, Interval: hour}
	third := serverCalendar(now, [4]int64{-3 * hour, -2 * hour, -hour, hour + 11})
	middle := serverCalendar(now, [4]int64{-day, -hour, hour, day})
	middle.Limit = 2
	limits := []engine.Params{gcra, third, middle}
	keys := []string{"{s}:gcra", "{s}:third", "{s}:middle"}
	spec := make([]engine.State, len(limits))
	decide := func(verb engine.Verb, what string) engine.Decision {
		t.Helper()
		ops := make([]engine.GroupOp, len(limits))
		for i := range limits {
			ops[i] = engine.GroupOp{Key: keys[i], Params: &limits[i], Op: engine.Op{Verb: verb, Cost: 1}}
		}
		before := serverTime(t, c)
		got := make([]engine.Decision, len(ops))
		gotD, err := st.ApplyGroup(ctx, ops, got)
		require.NoError(t, err, what)
		after := serverTime(t, c)
		stored := make([]engine.State, len(keys))
		for i, key := range keys {
			stored[i] = storedState(t, c, st, key)
		}
		if decidedAtAnInstant(t, limits, spec, ops, gotD, got, stored, before, after) {
			return gotD
		}
		t.Fatalf("%s: no instant between %v and %v gives DecideGroup's decisions and states\ngot %+v %+v", what, before, after, gotD, got)
		return gotD
	}
	require.True(t, decide(engine.VerbAllow, "an allow").Allowed)
	require.True(t, decide(engine.VerbAllow, "a second allow").Allowed)
	d := decide(engine.VerbAllow, "a third allow, over the middle window's limit")
	require.False(t, d.Allowed)
	decide(engine.VerbCheck, "a check")
	require.Equal(t, now+hour+11, storedState(t, c, st, keys[1]).Time, "the third window's end")
	require.Equal(t, now+hour, storedState(t, c, st, keys[2]).Time, "the middle window's end")

	values := make([]string, len(keys))
	for i, key := range keys {
		values[i] = c.Get(ctx, st.Key(key)).Val()
	}
	old := calendar(3, utc(2001, 1, 1, 0, 0), utc(2001, 1, 2, 0, 0), utc(2001, 1, 3, 0, 0), utc(2001, 1, 4, 0, 0))
	for _, verb := range []engine.Verb{engine.VerbAllow, engine.VerbCheck} {
		// The limit out of range last, after the others were read.
		ops := []engine.GroupOp{
			{Key: keys[0], Params: &gcra, Op: engine.Op{Verb: verb, Cost: 1}},
			{Key: keys[1], Params: &third, Op: engine.Op{Verb: verb, Cost: 1}},
			{Key: "{s}:old", Params: &old, Op: engine.Op{Verb: verb, Cost: 1}},
		}
		each := []engine.Decision{{Used: 7}, {Used: 7}, {Used: 7}}
		_, err := st.ApplyGroup(ctx, ops, each)
		require.ErrorIs(t, err, sluice.ErrTimeOutOfRange, "%v", verb)
		require.Contains(t, err.Error(), "the server's time")
		require.Contains(t, err.Error(), "limit 3")
		require.Equal(t, []engine.Decision{{Used: 7}, {Used: 7}, {Used: 7}}, each, "each is left as it was")
		for i, key := range keys {
			require.Equal(t, values[i], c.Get(ctx, st.Key(key)).Val(), "%s is untouched", key)
		}
		require.Zero(t, c.Exists(ctx, st.Key("{s}:old")).Val())
	}
}
