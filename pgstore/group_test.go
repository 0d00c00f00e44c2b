package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/pgstore"
	"github.com/sluice-go/sluice/storetest"
)

// groupSpec keeps the specification's state of the keys of group
// decisions.
type groupSpec map[string]engine.State

// decide returns the group's decisions on ops by engine.DecideGroup over
// Params.Step, and records the states they leave.
func (spec groupSpec) decide(t *testing.T, ops []engine.GroupOp) (engine.Decision, []engine.Decision) {
	t.Helper()
	require.NoError(t, engine.CheckGroup(ops, true))
	each := make([]engine.Decision, len(ops))
	next := map[string]engine.State{}
	d, err := engine.DecideGroup(ops, func(i int, op engine.Op) (engine.Decision, error) {
		key := ops[i].Key
		s, ok := next[key]
		if !ok {
			s = spec[key]
			s.Log = slices.Clone(s.Log)
		}
		s2, d, err := ops[i].Params.Step(s, op)
		if ops[i].Params.Records(op.Verb, &d) {
			s = s2
		}
		next[key] = s
		return d, err
	}, each)
	require.NoError(t, err)
	for key, s := range next {
		spec[key] = s
	}
	return d, each
}

// requireGroup fails t unless the group's decision and each limit's are
// want's bit for bit.
func requireGroup(t *testing.T, want, got engine.Decision, wantEach, gotEach []engine.Decision, where string) {
	t.Helper()
	storetest.RequireIdenticalDecision(t, want, got, where+" (the group's)")
	for i := range wantEach {
		storetest.RequireIdenticalDecision(t, wantEach[i], gotEach[i], fmt.Sprintf("%s (limit %d)", where, i))
	}
}

// rowCount returns how many rows of table hold key.
func rowCount(t *testing.T, st interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, table, key string) int {
	t.Helper()
	var n int
	require.NoError(t, st.QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize()+" WHERE key = $1", key).Scan(&n))
	return n
}

// TestGroups decides groups against one server, each case on a table of
// its own.
func TestGroups(t *testing.T) {
	url := testserver.StartPostgres(t).URL
	t.Run("FailingOnItsLastKeyRecordsNothing", func(t *testing.T) { groupFailingOnItsLastKeyRecordsNothing(t, url) })
	t.Run("LeavesNoRowForKeysItDidNotRecord", func(t *testing.T) { groupLeavesNoRowForKeysItDidNotRecord(t, url) })
	t.Run("ByTheDatabasesClockAreBitIdenticalToDecideGroup", func(t *testing.T) { groupByTheDatabasesClockAreBitIdenticalToDecideGroup(t, url) })
	t.Run("WaitForALockedRowWithinTheirContext", func(t *testing.T) { groupWaitForALockedRowWithinTheirContext(t, url) })
	t.Run("ConcurrentWithDecisionsNeverDeadlock", func(t *testing.T) { groupConcurrentWithDecisionsNeverDeadlock(t, url) })
	t.Run("OfLimitersAdmitAllOrNothing", func(t *testing.T) { groupOfLimitersAdmitAllOrNothing(t, url) })
}

// groupFailingOnItsLastKeyRecordsNothing decides groups whose last
// limit's key holds another algorithm's live state: the group fails with
// ErrKeyConflict, and what its statements recorded before (a cancel that
// gave its cost back) is rolled back, as are the rows it inserted for keys
// that had none.
func groupFailingOnItsLastKeyRecordsNothing(t *testing.T, url string) {
	pool := newPool(t, url, 4)
	st, table := newStore(t, pool, pgstore.WithCallerClock())
	ctx := context.Background()
	s := int64(time.Second)
	gcra := engine.Params{Kind: engine.KindGCRA, Limit: 1, Interval: s}
	window := engine.Params{Kind: engine.KindFixedWindow, Limit: 5, Interval: time.Hour.Nanoseconds()}
	// "booked" holds two bookings, the latest a second ahead; "window"
	// holds a fixed window's count for the hour.
	reserve := engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: base, MaxDelay: 10 * s}
	_, err := st.Apply(ctx, "booked", &gcra, reserve)
	require.NoError(t, err)
	booking, err := st.Apply(ctx, "booked", &gcra, reserve)
	require.NoError(t, err)
	require.Equal(t, base+s, booking.At)
	_, err = st.Apply(ctx, "window", &window, allow(1, base))
	require.NoError(t, err)

	cancel := engine.Op{Verb: engine.VerbCancel, Cost: 1, Now: base + 1, At: booking.At}
	for _, tc := range []struct {
		name string
		ops  []engine.GroupOp
	}{
		{"cancels", []engine.GroupOp{
			{Key: "booked", Params: &gcra, Op: cancel},
			{Key: "fresh", Params: &gcra, Op: cancel},
			{Key: "window", Params: &gcra, Op: cancel},
		}},
		{"admissions", []engine.GroupOp{
			{Key: "fresh", Params: &gcra, Op: allow(1, base+1)},
			{Key: "booked", Params: &gcra, Op: allow(0, base+1)},
			{Key: "window", Params: &gcra, Op: allow(0, base+1)},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			each := make([]engine.Decision, len(tc.ops))
			_, err := st.ApplyGroup(ctx, tc.ops, each)
			require.ErrorIs(t, err, sluice.ErrKeyConflict)
			require.Equal(t, make([]engine.Decision, len(tc.ops)), each, "no decision is reported")
			require.Zero(t, rowCount(t, pool, table, "fresh"), "the row inserted to lock a key is gone")
		})
	}
	// The cancel the first group gave back is not: the booking is still
	// the key's latest, and the cancel, alone, gives it back.
	d, err := st.Apply(ctx, "booked", &gcra, cancel)
	require.NoError(t, err)
	require.True(t, d.Allowed, "the group's cancel was rolled back")
	d, err = st.Apply(ctx, "window", &window, engine.Op{Verb: engine.VerbCheck, Now: base + 1})
	require.NoError(t, err)
	require.Equal(t, 1.0, d.Used)
}

// groupLeavesNoRowForKeysItDidNotRecord pins that the rows a group
// inserts only to lock its keys do not stay: a group of checks on new
// keys, and a denied group, whose other limits check a zero cost, leave
// none, while an admitted group's keys keep the rows that record it.
func groupLeavesNoRowForKeysItDidNotRecord(t *testing.T, url string) {
	pool := newPool(t, url, 4)
	st, table := newStore(t, pool, pgstore.WithCallerClock())
	ctx := context.Background()
	small := engine.Params{Kind: engine.KindFixedWindow, Limit: 1, Interval: time.Hour.Nanoseconds()}
	large := engine.Params{Kind: engine.KindGCRA, Limit: 10, Interval: time.Second.Nanoseconds()}
	group := func(verb engine.Verb, cost float64, keys ...string) engine.Decision {
		ops := []engine.GroupOp{
			{Key: keys[0], Params: &large, Op: engine.Op{Verb: verb, Cost: cost, Now: base}},
			{Key: keys[1], Params: &small, Op: engine.Op{Verb: verb, Cost: cost, Now: base}},
		}
		d, err := st.ApplyGroup(ctx, ops, make([]engine.Decision, 2))
		require.NoError(t, err)
		return d
	}
	require.True(t, group(engine.VerbCheck, 1, "c1", "c2").Allowed)
	require.Zero(t, rowCount(t, pool, table, "c1")+rowCount(t, pool, table, "c2"), "checks record nothing")

	_, err := st.Apply(ctx, "full", &small, allow(1, base))
	require.NoError(t, err)
	require.False(t, group(engine.VerbAllow, 1, "new", "full").Allowed)
	require.Zero(t, rowCount(t, pool, table, "new"), "a denied group records nothing on its other keys")

	require.True(t, group(engine.VerbAllow, 1, "a1", "a2").Allowed)
	require.Equal(t, 2, rowCount(t, pool, table, "a1")+rowCount(t, pool, table, "a2"))
}

// groupByTheDatabasesClockAreBitIdenticalToDecideGroup replays random
// groups through a store deciding by the database's clock, which the
// test moves: each group is decided at that time, read once (the
// statements the group runs read no clock of their own), bit for bit as
// DecideGroup over Step; reservations book instants on that clock, and
// cancels give them back by it.
func groupByTheDatabasesClockAreBitIdenticalToDecideGroup(t *testing.T, url string) {
	clock := newDBClock(t, url, 0)
	st, _ := newStore(t, clock.pool)
	ctx := context.Background()
	s := int64(time.Second)
	limits := []engine.Params{
		{Kind: engine.KindGCRA, Limit: 3, Interval: s / 4, Penalty: 2 * s},
		{Kind: engine.KindLeakyBucket, Limit: 4, Interval: s, Amount: 2, CountDenied: true},
		{Kind: engine.KindTokenBucket, Limit: 5, Interval: s, Amount: 2, IntervalRefill: true},
		{Kind: engine.KindGCRA, Limit: 5, Interval: s / 10},
	}
	rng := rand.New(rand.NewPCG(3, 0x9409))
	spec := groupSpec{}
	var booked [][]engine.GroupOp
	now := base / 1000 * 1000
	for step := range 120 {
		now += rng.Int64N(s) / 1000 * 1000
		op := engine.Op{Verb: engine.VerbAllow, Now: now}
		switch r := rng.IntN(10); {
		case r < 2:
			op.Verb = engine.VerbCheck
		case r < 6:
			op.Verb, op.MaxDelay = engine.VerbReserve, rng.Int64N(3*s)
		}
		var ops []engine.GroupOp
		for _, i := range rng.Perm(len(limits))[:2+rng.IntN(len(limits)-1)] {
			c := op
			c.Cost = float64(1 + rng.IntN(2))
			ops = append(ops, engine.GroupOp{Key: fmt.Sprintf("k%d", i), Params: &limits[i], Op: c})
		}
		if len(booked) > 0 && rng.IntN(5) == 0 {
			ops = slices.Clone(booked[rng.IntN(len(booked))])
			for i := range ops {
				ops[i].Op.Now = now
			}
		}
		where := fmt.Sprintf("step %d ops %+v", step, ops)
		wantD, want := spec.decide(t, ops)

		clock.set(t, now)
		sent, ignored := slices.Clone(ops), rng.Int64()
		for i := range sent {
			sent[i].Op.Now = ignored // the database's clock decides
		}
		reads := clock.reads(t)
		got := make([]engine.Decision, len(ops))
		gotD, err := st.ApplyGroup(ctx, sent, got)
		require.NoError(t, err, where)
		require.Equal(t, reads+1, clock.reads(t), "the group reads the clock once: %s", where)
		requireGroup(t, wantD, gotD, want, got, where)
		if op.Verb == engine.VerbReserve && wantD.Allowed && wantD.Delay > 0 {
			cancels := slices.Clone(ops)
			for i := range cancels {
				cancels[i].Op = engine.Op{Verb: engine.VerbCancel, Cost: ops[i].Op.Cost, At: want[i].At}
			}
			booked = append(booked, cancels)
		}
	}
}

// groupWaitForALockedRowWithinTheirContext holds one of a group's rows
// locked from another transaction: the group waits for it, and fails when
// its context ends, recording nothing; it is decided once the row is free.
func groupWaitForALockedRowWithinTheirContext(t *testing.T, url string) {
	pool := newPool(t, url, 4)
	st, table := newStore(t, pool, pgstore.WithCallerClock())
	ctx := context.Background()
	p := engine.Params{Kind: engine.KindFixedWindow, Limit: 5, Interval: time.Hour.Nanoseconds()}
	_, err := st.Apply(ctx, "b", &p, allow(1, base))
	require.NoError(t, err)

	tx, _ := lockRow(t, url, table, "b")

	ops := []engine.GroupOp{{Key: "a", Params: &p, Op: allow(1, base)}, {Key: "b", Params: &p, Op: allow(1, base)}}
	short, cancel := context.WithTimeout(ctx, lockTimeout)
	defer cancel()
	_, err = st.ApplyGroup(short, ops, make([]engine.Decision, 2))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Zero(t, rowCount(t, pool, table, "a"), "nothing is recorded")

	require.NoError(t, tx.Rollback(ctx))
	d, err := st.ApplyGroup(ctx, ops, make([]engine.Decision, 2))
	require.NoError(t, err, "the store recovers by itself")
	require.True(t, d.Allowed)
	require.Equal(t, 2.0, d.Used)
}

// groupConcurrentWithDecisionsNeverDeadlock has 64 callers, each on
// a connection of its own, decide groups of two or three of six keys, in
// random orders, among single decisions and checks on the same keys:
// none fails (PostgreSQL would report a deadlock as an error), and each
// key records exactly the cost of the requests reported admitted on it.
func groupConcurrentWithDecisionsNeverDeadlock(t *testing.T, url string) {
	const callers = 64
	pool := newPool(t, url, callers)
	st, _ := newStore(t, pool, pgstore.WithCallerClock())
	ctx := context.Background()
	p := engine.Params{Kind: engine.KindFixedWindow, Limit: 100, Interval: time.Hour.Nanoseconds()}
	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5"}
	var mu sync.Mutex
	admitted := map[string]float64{}
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for c := range callers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 11))
			for range 8 {
				var ops []engine.GroupOp
				for _, i := range rng.Perm(len(keys))[:2+rng.IntN(2)] {
					ops = append(ops, engine.GroupOp{Key: keys[i], Params: &p, Op: allow(1, base)})
				}
				d, err := st.ApplyGroup(ctx, ops, make([]engine.Decision, len(ops)))
				if err != nil {
					errs <- err
					return
				}
				key := keys[rng.IntN(len(keys))]
				single, err := st.Apply(ctx, key, &p, allow(1, base))
				if err != nil {
					errs <- err
					return
				}
				if _, err := st.Apply(ctx, key, &p, engine.Op{Verb: engine.VerbCheck, Cost: 1, Now: base}); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if d.Allowed {
					for _, g := range ops {
						admitted[g.Key]++
					}
				}
				if single.Allowed {
					admitted[key]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			t.Errorf("SQLSTATE %s: %v", pgErr.Code, err)
		}
		require.NoError(t, err)
	}
	full := 0
	for _, key := range keys {
		d, err := st.Apply(ctx, key, &p, engine.Op{Verb: engine.VerbCheck, Now: base})
		require.NoError(t, err)
		require.Equal(t, admitted[key], d.Used, "key %s records exactly the requests admitted", key)
		if d.Remaining == 0 {
			full++
		}
	}
	require.Positive(t, full, "some keys filled up, so that groups were denied too")
}

// TestInvalidGroupsFailBeforeTheDatabase uses a pool that cannot connect:
// each error must come from validation.
func TestInvalidGroupsFailBeforeTheDatabase(t *testing.T) {
	pool := newPool(t, "postgres://127.0.0.1:1/none", 1)
	st, err := pgstore.New(pool, pgstore.WithCallerClock())
	require.NoError(t, err)
	gcra := engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: time.Second.Nanoseconds()}
	window := engine.Params{Kind: engine.KindFixedWindow, Limit: 5, Interval: time.Second.Nanoseconds()}
	limit := func(key string, p *engine.Params, op engine.Op) engine.GroupOp {
		return engine.GroupOp{Key: key, Params: p, Op: op}
	}
	for _, tc := range []struct {
		name string
		ops  []engine.GroupOp
		each int
		want error
	}{
		{"no limits", nil, 0, sluice.ErrInvalidConfig},
		{"too many limits", slices.Repeat([]engine.GroupOp{limit("k", &gcra, allow(1, base))}, engine.MaxGroup+1), engine.MaxGroup + 1, sluice.ErrInvalidConfig},
		{"decisions missing", []engine.GroupOp{limit("a", &gcra, allow(1, base)), limit("b", &gcra, allow(1, base))}, 1, sluice.ErrInvalidConfig},
		{"key twice", []engine.GroupOp{limit("a", &gcra, allow(1, base)), limit("a", &window, allow(1, base))}, 2, sluice.ErrInvalidKey},
		{"key not UTF-8", []engine.GroupOp{limit("a", &gcra, allow(1, base)), limit("\xff", &gcra, allow(1, base))}, 2, sluice.ErrInvalidKey},
		{"times differ", []engine.GroupOp{limit("a", &gcra, allow(1, base)), limit("b", &gcra, allow(1, base+1))}, 2, sluice.ErrInvalidConfig},
		{"time out of range", []engine.GroupOp{limit("a", &gcra, allow(1, -1))}, 1, sluice.ErrTimeOutOfRange},
		{"reservation of a window", []engine.GroupOp{limit("a", &gcra, engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: base}),
			limit("b", &window, engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: base})}, 2, sluice.ErrUnsupported},
		{"fill-up", []engine.GroupOp{limit("a", &gcra, engine.Op{Verb: engine.VerbFill, Cost: 1, Now: base})}, 1, sluice.ErrUnsupported},
		{"cost above a limit", []engine.GroupOp{limit("a", &gcra, allow(6, base))}, 1, sluice.ErrCostExceedsLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := st.ApplyGroup(context.Background(), tc.ops, make([]engine.Decision, tc.each))
			require.ErrorIs(t, err, tc.want)
		})
	}
}

// groupOfLimitersAdmitAllOrNothing is the user's view: a sluice.Group
// of three limiters on one store, "2 per second and 5 per day per API
// key, and 3 per second for everyone", decided by PostgreSQL.
func groupOfLimitersAdmitAllOrNothing(t *testing.T, url string) {
	pool := newPool(t, url, 4)
	st, _ := newStore(t, pool, pgstore.WithCallerClock())
	ctx := context.Background()
	fake := clock.NewMock()
	fake.Set(time.Unix(0, base))
	opts := []sluice.Option{sluice.WithStore(st), sluice.WithClock(fake)}
	perSecond, err := sluice.NewGCRA(sluice.PerSecond(2), 2, opts...)
	require.NoError(t, err)
	perDay, err := sluice.NewFixedWindow(5, 24*time.Hour, opts...)
	require.NoError(t, err)
	global, err := sluice.NewTokenBucket(sluice.PerSecond(3), 3, opts...)
	require.NoError(t, err)
	api, err := sluice.NewGroup(perSecond, perDay, global)
	require.NoError(t, err)
	keys := func(apiKey string) []string { return []string{"second:" + apiKey, "day:" + apiKey, "global"} }

	var admitted []string
	for _, apiKey := range []string{"a", "a", "a", "b", "b"} {
		d, err := api.Allow(ctx, keys(apiKey), 1)
		require.NoError(t, err)
		if d.Allowed {
			admitted = append(admitted, apiKey)
		}
	}
	// "a" has its 2 per second; "b" gets 1 of the global 3.
	require.Equal(t, []string{"a", "a", "b"}, admitted)
	d, err := api.CanAccept(ctx, keys("a"), 1)
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.Equal(t, 3.0, d.Limits()[1].Remaining, "the day's limit was charged only what the group admitted")
	require.Zero(t, d.Limits()[2].Remaining)
}
