package pgstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/pgstore"
	"github.com/sluice-go/sluice/storetest"
)

// calendarWindow is a calendar window of limit over the windows w.
func calendarWindow(limit float64, w [4]int64) engine.Params {
	return engine.Params{Kind: engine.KindFixedWindow, Limit: limit, Interval: w[2] - w[1], Windows: w}
}

// days returns the windows of the UTC days before t's, of t's and after,
// as a caller computes them at t.
func days(t time.Time) [4]int64 {
	d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	return [4]int64{d.AddDate(0, 0, -1).UnixNano(), d.UnixNano(), d.AddDate(0, 0, 1).UnixNano(), d.AddDate(0, 0, 2).UnixNano()}
}

// around returns windows whose boundaries lie at the offsets from now.
func around(now time.Time, offsets [4]time.Duration) [4]int64 {
	var w [4]int64
	for i, o := range offsets {
		w[i] = now.Add(o).UnixNano()
	}
	return w
}

// keySpec replays Params.Step on one key as a store keeps it: fresh
// again from its expiry on.
type keySpec struct {
	s       engine.State
	expires int64
}

func (k *keySpec) step(t *testing.T, p engine.Params, op engine.Op) engine.Decision {
	t.Helper()
	from := k.s
	if op.Now >= k.expires {
		from = engine.State{}
	}
	next, d, err := p.Step(from, op)
	require.NoError(t, err)
	if p.Records(op.Verb, &d) {
		k.s, k.expires = next, op.Now+int64(d.ResetAfter)
		if d.ResetAfter == 0 {
			k.s, k.expires = engine.State{}, 0
		}
	}
	return d
}

// storedRow is a key's row as stored, with its tuple's version: a rewrite
// of the same values changes xmin.
type storedRow struct {
	Kind    int16
	Time    int64
	A       float64
	Expires int64
	Version string
}

// readRow returns key's row in table, and whether there is one.
func readRow(t *testing.T, pool *pgxpool.Pool, table, key string) (storedRow, bool) {
	t.Helper()
	var r storedRow
	err := pool.QueryRow(context.Background(), "SELECT kind, time_ns, a, expires_at, xmin::text FROM "+pgx.Identifier{table}.Sanitize()+" WHERE key = $1", key).
		Scan(&r.Kind, &r.Time, &r.A, &r.Expires, &r.Version)
	if err == pgx.ErrNoRows {
		return r, false
	}
	require.NoError(t, err)
	return r, true
}

// TestCalendarWindowByTheCallersClock counts a calendar window of 3 by
// the caller's clock across the end of a day, to the nanosecond, with the
// window's end as the row's time; a clock that steps back stays in the
// window stored; a yearly window of a leap year. Every decision is also
// Step's, bit for bit.
func TestCalendarWindowByTheCallersClock(t *testing.T) {
	pool := newPool(t, testserver.StartPostgres(t).URL, 4)
	st, table := newStore(t, pool, pgstore.WithCallerClock())
	ctx := context.Background()
	var spec keySpec
	apply := func(p engine.Params, op engine.Op) engine.Decision {
		t.Helper()
		got, err := st.Apply(ctx, "day", &p, op)
		require.NoError(t, err)
		storetest.RequireIdenticalDecision(t, spec.step(t, p, op), got, fmt.Sprintf("%+v", op))
		return got
	}
	row := func() storedRow {
		t.Helper()
		r, ok := readRow(t, pool, table, "day")
		require.True(t, ok)
		return r
	}

	t1 := time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.UTC)
	p1 := calendarWindow(3, days(t1)) // the caller's windows on the 21st
	end1, end2 := p1.Windows[2], p1.Windows[3]
	now := t1.UnixNano()
	for i := range 3 {
		d := apply(p1, allow(1, now))
		require.True(t, d.Allowed)
		require.Equal(t, float64(i+1), d.Used)
		require.Equal(t, time.Duration(end1-now), d.ResetAfter, "until the day's end")
	}
	d := apply(p1, allow(1, now))
	require.False(t, d.Allowed)
	require.Equal(t, time.Duration(end1-now), d.RetryAfter)
	require.Equal(t, storedRow{Kind: int16(engine.KindFixedWindow), Time: end1, A: 3, Expires: end1}, func() storedRow { r := row(); r.Version = ""; return r }(),
		"the row keeps the window's end")

	d = apply(p1, allow(1, end1-1))
	require.False(t, d.Allowed, "the last nanosecond of the day")
	require.Equal(t, time.Duration(1), d.RetryAfter)
	require.Equal(t, time.Duration(1), d.ResetAfter)

	// The windows computed on the 21st hold the 22nd: the third.
	d = apply(p1, allow(1, end1))
	require.True(t, d.Allowed, "the next day's first nanosecond")
	require.Equal(t, 1.0, d.Used)
	require.Equal(t, 24*time.Hour, d.ResetAfter)
	require.Equal(t, end2, row().Time)

	// On the 22nd, by the windows computed then.
	t2 := time.Date(2026, 11, 22, 9, 0, 0, 987654321, time.UTC)
	p2 := calendarWindow(3, days(t2))
	require.Equal(t, end1, p2.Windows[1])
	for range 2 {
		d = apply(p2, allow(1, t2.UnixNano()))
		require.True(t, d.Allowed)
	}
	require.Equal(t, 3.0, d.Used)
	require.Equal(t, time.Duration(end2-t2.UnixNano()), d.ResetAfter)

	// The clock steps back to the 21st, under the windows it computes
	// there: the count stays in the window stored, the 22nd, until its end.
	back := end1 - int64(time.Hour)
	d = apply(calendarWindow(3, days(time.Unix(0, back))), allow(1, back))
	require.False(t, d.Allowed)
	require.Equal(t, 3.0, d.Used)
	require.Equal(t, 25*time.Hour, d.RetryAfter)
	require.Equal(t, 25*time.Hour, d.ResetAfter)
	d = apply(p1, engine.Op{Verb: engine.VerbAtMost, Cost: 2, Now: back})
	require.Zero(t, d.Granted)
	r := row()
	require.Equal(t, end2, r.Time)
	require.Equal(t, 3.0, r.A)

	// A year, 2028, a leap year, between 2027 and 2029.
	year := func(y int) int64 { return time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano() }
	yearly := calendarWindow(3, [4]int64{year(2027), year(2028), year(2029), year(2030)})
	require.Equal(t, int64(366*24*time.Hour), yearly.Interval)
	require.NoError(t, st.Reset(ctx, "day"))
	spec = keySpec{}
	mid := time.Date(2028, 7, 4, 12, 0, 0, 500, time.UTC).UnixNano()
	for range 3 {
		d = apply(yearly, allow(1, mid))
		require.True(t, d.Allowed)
	}
	d = apply(yearly, allow(1, mid))
	require.False(t, d.Allowed)
	require.Equal(t, time.Duration(year(2029)-mid), d.RetryAfter, "until the new year")
	require.Equal(t, year(2029), row().Time)
}

// TestCalendarWindowOutsideTheCallersTimeFailsBeforeTheDatabase uses a
// pool that cannot connect: a time outside the windows, by the caller's
// clock, is refused by validation, for a key and for a group.
func TestCalendarWindowOutsideTheCallersTimeFailsBeforeTheDatabase(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:1/none")
	require.NoError(t, err)
	defer pool.Close()
	st, err := pgstore.New(pool, pgstore.WithCallerClock())
	require.NoError(t, err)
	p := calendarWindow(3, days(time.Unix(0, base)))
	other := engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: int64(time.Second)}
	for _, now := range []int64{p.Windows[0] - 1, p.Windows[3], p.Windows[3] + int64(time.Hour)} {
		for _, verb := range []engine.Verb{engine.VerbAllow, engine.VerbCheck, engine.VerbAtMost} {
			_, err := st.Apply(context.Background(), "k", &p, engine.Op{Verb: verb, Cost: 1, Now: now})
			require.ErrorIs(t, err, sluice.ErrTimeOutOfRange)
			require.ErrorContains(t, err, time.Unix(0, now).UTC().String())
		}
		ops := []engine.GroupOp{
			{Key: "a", Params: &other, Op: allow(1, now)},
			{Key: "b", Params: &p, Op: allow(1, now)},
		}
		_, err := st.ApplyGroup(context.Background(), ops, make([]engine.Decision, 2))
		require.ErrorIs(t, err, sluice.ErrTimeOutOfRange)
	}
}

// TestCalendarWindowByTheDatabasesClock replays traces of calendar
// windows, with and without a penalty and counted denials, by the
// database's clock, which the test moves within the windows and outside
// them: within, each decision is Step's at the database's time, bit for
// bit (the op's own time is ignored); outside, the decision fails with
// an error wrapping ErrTimeOutOfRange that names the database's time, and
// the row is as it was, or absent. Each statement reads the clock once.
// A key holding another algorithm's live state still conflicts.
func TestCalendarWindowByTheDatabasesClock(t *testing.T) {
	clock := newDBClock(t, testserver.StartPostgres(t).URL, base/1000*1000)
	st, table := newStore(t, clock.pool)
	ctx := context.Background()
	w := days(time.Unix(0, base))
	for si, strict := range []func(*engine.Params){
		func(*engine.Params) {},
		func(p *engine.Params) { p.Penalty = int64(2 * time.Hour) },
		func(p *engine.Params) { p.CountDenied = true },
	} {
		t.Run(fmt.Sprint(si), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(si), 0xca1))
			p := calendarWindow(3, w)
			strict(&p)
			key := fmt.Sprintf("cal%d", si)
			var spec keySpec
			now := w[0] - int64(time.Hour)
			for step := range 80 {
				switch r := rng.IntN(10); {
				case r < 6:
					now += rng.Int64N(int64(6 * time.Hour))
				case r < 8:
					now -= rng.Int64N(int64(12 * time.Hour)) // the clock steps back
				default:
					now = w[0] + rng.Int64N(w[3]-w[0]+int64(4*time.Hour)) - int64(2*time.Hour)
				}
				now = now / 1000 * 1000
				if step == 0 {
					now = w[0] - 1000 // a fresh key, outside the windows
				}
				clock.set(t, now)
				op := engine.Op{Verb: engine.VerbAllow, Cost: float64(rng.IntN(3)), Now: now}
				switch rng.IntN(5) {
				case 0:
					op.Verb = engine.VerbCheck
				case 1:
					op.Verb, op.Cost = engine.VerbAtMost, float64(rng.IntN(5))
				}
				sent := op
				sent.Now = rng.Int64N(1 << 62) // the database's clock decides
				before, existed := readRow(t, clock.pool, table, key)
				reads := clock.reads(t)
				got, err := st.Apply(ctx, key, &p, sent)
				require.Equal(t, reads+1, clock.reads(t), "one read of the clock")
				where := fmt.Sprintf("step %d op %+v at %v", step, op, time.Unix(0, now).UTC())
				if now < w[0] || now >= w[3] {
					require.ErrorIs(t, err, sluice.ErrTimeOutOfRange, where)
					require.ErrorContains(t, err, time.Unix(0, now).UTC().String(), "names the database's time")
					require.ErrorContains(t, err, "by the database's clock")
					after, exists := readRow(t, clock.pool, table, key)
					require.Equal(t, existed, exists, where)
					require.Equal(t, before, after, "%s: the row is untouched", where)
					continue
				}
				require.NoError(t, err, where)
				want := spec.step(t, p, op)
				storetest.RequireIdenticalDecision(t, want, got, where)
				if r, ok := readRow(t, clock.pool, table, key); ok && r.Expires > now && r.A > 0 {
					require.Contains(t, w[1:], r.Time, "%s: the row's time is a window's end", where)
				}
			}
		})
	}

	t.Run("conflict", func(t *testing.T) {
		now := base / 1000 * 1000
		clock.set(t, now)
		gcra := engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: int64(time.Minute)}
		_, err := st.Apply(ctx, "held", &gcra, allow(5, 0))
		require.NoError(t, err)
		before, _ := readRow(t, clock.pool, table, "held")
		p := calendarWindow(3, w)
		for _, verb := range []engine.Verb{engine.VerbAllow, engine.VerbCheck, engine.VerbAtMost} {
			_, err = st.Apply(ctx, "held", &p, engine.Op{Verb: verb, Cost: 1})
			require.ErrorIs(t, err, sluice.ErrKeyConflict)
			require.NotErrorIs(t, err, sluice.ErrTimeOutOfRange)
		}
		after, _ := readRow(t, clock.pool, table, "held")
		require.Equal(t, before, after)
	})
}

// TestCalendarGroupByTheDatabasesClock decides groups holding a calendar
// window by the database's clock: with windows that hold its time, as
// DecideGroup over Step at that time; with windows that do not, the group
// is refused whole, naming the time, and writes nothing: a row is as it
// was, and no row is left for a new key.
func TestCalendarGroupByTheDatabasesClock(t *testing.T) {
	now := base / 1000 * 1000
	clock := newDBClock(t, testserver.StartPostgres(t).URL, now)
	st, table := newStore(t, clock.pool)
	ctx := context.Background()
	gcra := engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: int64(time.Minute)}
	in := calendarWindow(3, days(time.Unix(0, now)))
	past := calendarWindow(3, days(time.Date(2001, 3, 4, 5, 6, 7, 8, time.UTC)))

	ops := []engine.GroupOp{
		{Key: "g", Params: &gcra, Op: allow(1, now)},
		{Key: "w", Params: &in, Op: allow(2, now)},
	}
	spec := groupSpec{}
	want, wantEach := spec.decide(t, ops)
	each := make([]engine.Decision, len(ops))
	got, err := st.ApplyGroup(ctx, ops, each)
	require.NoError(t, err)
	requireGroup(t, want, got, wantEach, each, "windows that hold the time")
	r, ok := readRow(t, clock.pool, table, "w")
	require.True(t, ok)
	require.Equal(t, in.Windows[2], r.Time)

	before, _ := readRow(t, clock.pool, table, "g")
	for _, verb := range []engine.Verb{engine.VerbAllow, engine.VerbCheck} {
		refused := []engine.GroupOp{
			{Key: "g", Params: &gcra, Op: engine.Op{Verb: verb, Cost: 1}},
			{Key: "new", Params: &past, Op: engine.Op{Verb: verb, Cost: 1}},
		}
		_, err = st.ApplyGroup(ctx, refused, make([]engine.Decision, 2))
		require.ErrorIs(t, err, sluice.ErrTimeOutOfRange)
		require.ErrorContains(t, err, time.Unix(0, now).UTC().String())
		after, _ := readRow(t, clock.pool, table, "g")
		require.Equal(t, before, after, "the group wrote nothing")
		_, exists := readRow(t, clock.pool, table, "new")
		require.False(t, exists, "the group left no row")
	}
}

// TestCalendarWindowByTheDatabasesRealClock decides by the database's
// own clock, this machine's: windows around now admit and count; windows
// of 2001 are refused and change nothing; a time in the third window
// counts there, until its end.
func TestCalendarWindowByTheDatabasesRealClock(t *testing.T) {
	pool := newPool(t, testserver.StartPostgres(t).URL, 4)
	st, table := newStore(t, pool)
	ctx := context.Background()
	const hour = time.Hour
	middle := calendarWindow(3, around(time.Now(), [4]time.Duration{-2 * hour, -hour, hour, 2 * hour}))
	var d engine.Decision
	var err error
	for i := range 3 {
		d, err = st.Apply(ctx, "now", &middle, allow(1, 0))
		require.NoError(t, err)
		require.True(t, d.Allowed)
		require.Equal(t, float64(i+1), d.Used)
	}
	d, err = st.Apply(ctx, "now", &middle, allow(1, 0))
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.InDelta(t, float64(hour), float64(d.RetryAfter), float64(time.Minute))
	before, ok := readRow(t, pool, table, "now")
	require.True(t, ok)
	require.Equal(t, middle.Windows[2], before.Time)

	past := calendarWindow(3, days(time.Date(2001, 3, 4, 5, 6, 7, 8, time.UTC)))
	for _, verb := range []engine.Verb{engine.VerbAllow, engine.VerbCheck, engine.VerbAtMost} {
		for _, key := range []string{"now", "absent"} {
			_, err = st.Apply(ctx, key, &past, engine.Op{Verb: verb, Cost: 1, Now: past.Windows[1]})
			require.ErrorIs(t, err, sluice.ErrTimeOutOfRange, "%v on %s", verb, key)
			require.ErrorContains(t, err, fmt.Sprint(time.Now().UTC().Year()), "names the database's time")
		}
	}
	after, _ := readRow(t, pool, table, "now")
	require.Equal(t, before, after, "the row is untouched")
	_, exists := readRow(t, pool, table, "absent")
	require.False(t, exists)

	third := calendarWindow(3, around(time.Now(), [4]time.Duration{-3 * hour, -2 * hour, -hour, hour}))
	d, err = st.Apply(ctx, "third", &third, allow(2, 0))
	require.NoError(t, err)
	require.True(t, d.Allowed)
	require.Equal(t, 2.0, d.Used)
	require.InDelta(t, float64(hour), float64(d.ResetAfter), float64(time.Minute))
	r, ok := readRow(t, pool, table, "third")
	require.True(t, ok)
	require.Equal(t, third.Windows[3], r.Time, "counted in the third window")
}
