package pgstore_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
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

// newPool connects to url with at most maxConns connections, and closes
// the pool when t ends.
func newPool(t testing.TB, url string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// newTable returns a table name no other test uses, so that tests may
// share a database given by SLUICE_PG_URL.
func newTable() string { return fmt.Sprintf("sluice_test_%x", rand.Uint64()) }

// newStore returns a store on a new table of its own, created, and
// dropped when t ends, after the store is closed.
func newStore(t testing.TB, pool *pgxpool.Pool, opts ...pgstore.Option) (*pgstore.Store, string) {
	t.Helper()
	table := newTable()
	st, err := pgstore.New(pool, append([]pgstore.Option{pgstore.WithTable(table)}, opts...)...)
	require.NoError(t, err)
	require.NoError(t, st.CreateSchema(context.Background()))
	dropAfter(t, pool, "TABLE "+pgx.Identifier{table}.Sanitize())
	closeAfter(t, st)
	return st, table
}

// closeAfter closes st when t ends, before the pools made before it.
func closeAfter(t testing.TB, st *pgstore.Store) {
	t.Cleanup(func() { require.NoError(t, st.Close()) })
}

// dropAfter drops what (say, "TABLE x") when t ends, so that a database
// given by SLUICE_PG_URL keeps nothing of the tests.
func dropAfter(t testing.TB, pool *pgxpool.Pool, what string) {
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP "+what)
		require.NoError(t, err)
	})
}

// base is a realistic time since the epoch for simulated clocks.
var base = time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC).UnixNano()

// allow is a VerbAllow of cost at now.
func allow(cost float64, now int64) engine.Op {
	return engine.Op{Verb: engine.VerbAllow, Cost: cost, Now: now}
}

func TestConformance(t *testing.T) {
	pool := newPool(t, testserver.StartPostgres(t).URL, 8)
	storetest.Run(t, func(t *testing.T) engine.Store {
		st, _ := newStore(t, pool, pgstore.WithCallerClock())
		return st
	}, storetest.Exact())
}

func TestConcurrentCallersOnOneKeyAdmitExactlyTheBurst(t *testing.T) {
	pool := newPool(t, testserver.StartPostgres(t).URL, 32)
	st, _ := newStore(t, pool, pgstore.WithCallerClock())
	storetest.RunConcurrent(t, st, 32)
}

// TestStepsMatchSpecificationAtTheEndsOfTime pins the arithmetic at the
// first times sluice accepts, where a fresh state's zero time is now, and
// at the last, where PostgreSQL's bigint would overflow before Go's int64
// wraps, which the conformance traces never reach: with every verb,
// reservations booked up to 2^60 ns ahead, no earlier than the latest
// instant accepted, and their cancels, keys exhausted for up to 2^60 ns,
// charged up to 2^60 ns ahead and refunded, leases extended and
// released, and blocks of up to 2^60 ns.
func TestStepsMatchSpecificationAtTheEndsOfTime(t *testing.T) {
	pool := newPool(t, testserver.StartPostgres(t).URL, 4)
	st, _ := newStore(t, pool, pgstore.WithCallerClock())
	ctx := context.Background()
	const maxTime = 1 << 62
	const latest = -1 // Op.At naming the latest lease when the op runs
	strict := storetest.Strict()
	strict[0].Penalty = 1 << 60
	for ai, p := range append(storetest.Algorithms(), strict...) {
		for _, start := range []int64{0, maxTime - 3*p.Interval} {
			t.Run(fmt.Sprintf("%d_%v_from_%d", ai, p.Kind, start), func(t *testing.T) {
				key := fmt.Sprintf("ends%d.%d", ai, start)
				var s engine.State
				var booked int64 // the latest booking's instant, or lease's
				for now := start; now <= start+3*p.Interval; now += p.Interval / 3 {
					ops := []engine.Op{
						{Verb: engine.VerbCheck, Cost: 1, Now: now},
						{Verb: engine.VerbAllow, Cost: 1, Now: now},
					}
					if p.Kind == engine.KindConcurrency {
						// No partial grant: the lease just taken extended,
						// the rest of the limit taken and released, and the
						// latest lease instant accepted extended.
						ops = append(ops,
							engine.Op{Verb: engine.VerbExtend, Cost: 1, Now: now, At: latest},
							engine.Op{Verb: engine.VerbAllow, Cost: p.Limit - 1, Now: now},
							engine.Op{Verb: engine.VerbCancel, Cost: 1, Now: now, At: latest},
							engine.Op{Verb: engine.VerbExtend, Cost: 1, Now: now, At: maxTime + 1<<60})
					} else {
						ops = append(ops, engine.Op{Verb: engine.VerbAtMost, Cost: 2 * p.Limit, Now: now})
					}
					if p.Reservable() {
						ops = append(ops,
							engine.Op{Verb: engine.VerbReserve, Cost: p.Limit, Now: now, MaxDelay: 1 << 60},
							engine.Op{Verb: engine.VerbCancel, Cost: p.Limit, Now: now, At: booked},
							engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: now, MaxDelay: 1 << 60, At: maxTime + 1<<60},
							engine.Op{Verb: engine.VerbCancel, Cost: 1, Now: now, At: booked},
							// Full for the longest delay, and then at once.
							engine.Op{Verb: engine.VerbExhaust, Cost: p.Limit, Now: now, MaxDelay: 1 << 60},
							engine.Op{Verb: engine.VerbExhaust, Cost: 1, Now: now},
							// In debt for as long as a key may be, given
							// part of it back, and all of it.
							engine.Op{Verb: engine.VerbCharge, Cost: 0x1p1000, Now: now},
							engine.Op{Verb: engine.VerbRefund, Cost: p.Limit, Now: now},
							engine.Op{Verb: engine.VerbCharge, Cost: 3 * p.Limit, Now: now},
							engine.Op{Verb: engine.VerbRefund, Cost: 0x1p1000, Now: now})
					}
					for _, op := range ops {
						if op.At == latest {
							op.At = booked
						}
						next, want, err := p.Step(s, op)
						require.NoError(t, err)
						got, err := st.Apply(ctx, key, &p, op)
						require.NoError(t, err)
						storetest.RequireIdenticalDecision(t, want, got, fmt.Sprintf("now %d op %+v", now, op))
						if p.Records(op.Verb, &want) {
							s = next
						}
						if want.At != 0 {
							booked = want.At
						}
					}
				}
			})
		}
	}
}

func TestCheckWritesNothing(t *testing.T) {
	pool := newPool(t, testserver.StartPostgres(t).URL, 4)
	st, table := newStore(t, pool, pgstore.WithCallerClock())
	ctx := context.Background()
	// The row as stored, with the version of the tuple: a rewrite of the
	// same values would change xmin.
	row := func(key string) string {
		var s string
		err := pool.QueryRow(ctx, "SELECT xmin::text || ' ' || t::text FROM "+pgx.Identifier{table}.Sanitize()+" t WHERE key = $1", key).Scan(&s)
		require.NoError(t, err)
		return s
	}
	for ai, p := range append(storetest.Algorithms(), storetest.Strict()...) {
		t.Run(fmt.Sprintf("%d_%v", ai, p.Kind), func(t *testing.T) {
			key := fmt.Sprintf("check%d", ai)
			_, err := st.Apply(ctx, key, &p, allow(1, base))
			require.NoError(t, err)
			before := row(key)
			for _, cost := range []float64{0, 1, p.Limit} {
				_, err := st.Apply(ctx, key, &p, engine.Op{Verb: engine.VerbCheck, Cost: cost, Now: base + 1})
				require.NoError(t, err)
			}
			require.Equal(t, before, row(key))

			_, err = st.Apply(ctx, key+"-absent", &p, engine.Op{Verb: engine.VerbCheck, Cost: 1, Now: base})
			require.NoError(t, err)
			var n int
			require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize()+" WHERE key = $1", key+"-absent").Scan(&n))
			require.Zero(t, n, "a check on an absent key creates no row")
		})
	}
}

func TestKilledConnectionGivesErrorAndPoolRecovers(t *testing.T) {
	url := testserver.StartPostgres(t).URL
	pool := newPool(t, url, 2)
	st, table := newStore(t, pool, pgstore.WithCallerClock())
	ctx := context.Background()
	p := engine.Params{Kind: engine.KindGCRA, Limit: 100, Interval: int64(time.Second)}
	_, err := st.Apply(ctx, "k", &p, allow(1, base))
	require.NoError(t, err)

	// Hold the key's row lock from another connection, so that the next
	// decision is in flight, waiting, when its connection is killed.
	holder, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "SELECT 1 FROM "+pgx.Identifier{table}.Sanitize()+" WHERE key = 'k' FOR UPDATE")
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		_, err := st.Apply(ctx, "k", &p, allow(1, base))
		done <- err
	}()
	killer, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer killer.Close(ctx)
	waiter := blockedBy(t, killer, holder.PgConn().PID())
	var killed bool
	require.NoError(t, killer.QueryRow(ctx, "SELECT pg_terminate_backend($1)", waiter).Scan(&killed))
	require.True(t, killed)
	require.Error(t, <-done, "the decision whose connection was killed fails")
	require.NoError(t, tx.Rollback(ctx))

	for range 3 {
		d, err := st.Apply(ctx, "k", &p, allow(1, base))
		require.NoError(t, err, "the pool replaces the killed connection")
		require.True(t, d.Allowed)
	}
}

// blockedBy returns the process ID of the backend waiting for a lock that
// the backend holder holds, polling until there is one.
func blockedBy(t *testing.T, conn *pgx.Conn, holder uint32) int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var pid int32
		err := conn.QueryRow(ctx, "SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))", int32(holder)).Scan(&pid)
		if err == nil {
			return pid
		}
		require.ErrorIs(t, err, pgx.ErrNoRows)
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("no backend waited for the lock")
		}
	}
}

func TestReconnectsAfterServerRestart(t *testing.T) {
	pg := testserver.StartPostgres(t)
	const conns = 4
	pool := newPool(t, pg.URL, conns)
	st, _ := newStore(t, pool, pgstore.WithCallerClock())
	ctx := context.Background()
	p := engine.Params{Kind: engine.KindFixedWindow, Limit: 100, Interval: int64(time.Hour)}

	d, err := st.Apply(ctx, "k", &p, allow(1, base))
	require.NoError(t, err)
	require.Equal(t, 1.0, d.Used)

	pg.Stop(t)
	_, err = st.Apply(ctx, "k", &p, allow(1, base))
	require.Error(t, err, "no server, no decision")
	pg.Start(t)

	// Each pooled connection to the old server fails at most once before
	// the pool replaces it.
	for attempt := 0; ; attempt++ {
		d, err = st.Apply(ctx, "k", &p, allow(1, base))
		if err == nil {
			break
		}
		require.Less(t, attempt, conns, "still failing after the server restarted: %v", err)
	}
	require.Equal(t, 2.0, d.Used, "the state written before the restart was kept")
	for range 2 * conns {
		_, err := st.Apply(ctx, "k", &p, allow(1, base))
		require.NoError(t, err)
	}
}

// pruneCounter is a pgx tracer recording how many rows each statement
// deleted.
type pruneCounter struct {
	mu      sync.Mutex
	deleted []int64
}

func (c *pruneCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (c *pruneCounter) TraceQueryEnd(_ context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	if data.CommandTag.Delete() {
		c.mu.Lock()
		c.deleted = append(c.deleted, data.CommandTag.RowsAffected())
		c.mu.Unlock()
	}
}

func TestPruneDeletesOnlyExpiredRowsInBatches(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(testserver.StartPostgres(t).URL)
	require.NoError(t, err)
	counter := &pruneCounter{}
	cfg.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st, table := newStore(t, pool, pgstore.WithCallerClock(), pgstore.WithPruneBatch(3))
	ctx := context.Background()

	// With the caller's clock, Prune expires rows by this process's
	// clock: a day is far from the edge either way.
	now := time.Now().UnixNano()
	day := int64(24 * time.Hour)
	window := engine.Params{Kind: engine.KindFixedWindow, Limit: 5, Interval: int64(time.Second)}
	gcra := engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: int64(time.Second)}
	var live []string
	for i := range 10 {
		_, err := st.Apply(ctx, fmt.Sprintf("expired%d", i), &window, allow(1, now-day))
		require.NoError(t, err)
	}
	for i := range 2 {
		// A request of no cost on a fresh key leaves it fresh: its row
		// stands for an absent key.
		_, err := st.Apply(ctx, fmt.Sprintf("fresh%d", i), &gcra, allow(0, now))
		require.NoError(t, err)
	}
	for i := range 4 {
		key := fmt.Sprintf("live%d", i)
		_, err := st.Apply(ctx, key, &window, allow(1, now+day))
		require.NoError(t, err)
		live = append(live, key)
	}

	counter.mu.Lock()
	counter.deleted = nil
	counter.mu.Unlock()
	n, err := st.Prune(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(12), n)
	require.Equal(t, []int64{3, 3, 3, 3, 0}, counter.deleted, "one statement per batch of at most 3 rows")

	var kept []string
	rows, err := pool.Query(ctx, "SELECT key FROM "+pgx.Identifier{table}.Sanitize()+" ORDER BY key")
	require.NoError(t, err)
	kept, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, live, kept)

	n, err = st.Prune(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestCreateSchemaIsIdempotentAndSafeConcurrently(t *testing.T) {
	pool := newPool(t, testserver.StartPostgres(t).URL, 8)
	ctx := context.Background()
	table := newTable()
	st, err := pgstore.New(pool, pgstore.WithTable(table))
	require.NoError(t, err)
	dropAfter(t, pool, "TABLE "+table)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- st.CreateSchema(ctx) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, st.CreateSchema(ctx))
	p := engine.Params{Kind: engine.KindGCRA, Limit: 1, Interval: int64(time.Second)}
	_, err = st.Apply(ctx, "k", &p, engine.Op{Verb: engine.VerbAllow, Cost: 1})
	require.NoError(t, err)
}

func TestServerClockGivesSaneDecisions(t *testing.T) {
	pool := newPool(t, testserver.StartPostgres(t).URL, 4)
	st, table := newStore(t, pool)
	ctx := context.Background()
	// An hour per unit: the test's own duration is noise.
	const T = time.Hour
	p := engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: int64(T)}
	var last engine.Decision
	for i := range 5 {
		d, err := st.Apply(ctx, "k", &p, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: 1})
		require.NoError(t, err)
		require.True(t, d.Allowed, "request %d of the burst", i)
		last = d
	}
	d, err := st.Apply(ctx, "k", &p, engine.Op{Verb: engine.VerbAllow, Cost: 1})
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.Greater(t, d.RetryAfter, time.Duration(0))
	require.LessOrEqual(t, d.RetryAfter, T)
	require.Less(t, d.Remaining, 1.0, "less than a unit left")

	// Times are nanoseconds since the epoch by the database's clock,
	// which is this machine's.
	var expires int64
	require.NoError(t, pool.QueryRow(ctx, "SELECT expires_at FROM "+pgx.Identifier{table}.Sanitize()+" WHERE key = 'k'").Scan(&expires))
	require.InDelta(t, time.Now().Add(last.ResetAfter).UnixNano(), expires, float64(time.Minute))
}

func TestKeyHoldingAnotherAlgorithmsLiveStateConflicts(t *testing.T) {
	pool := newPool(t, testserver.StartPostgres(t).URL, 4)
	st, _ := newStore(t, pool, pgstore.WithCallerClock())
	ctx := context.Background()
	gcra := engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: int64(time.Second)}
	window := engine.Params{Kind: engine.KindFixedWindow, Limit: 5, Interval: int64(time.Minute)}

	_, err := st.Apply(ctx, "k", &gcra, allow(2, base)) // live for 2 s
	require.NoError(t, err)
	for _, verb := range []engine.Verb{engine.VerbAllow, engine.VerbCheck} {
		_, err = st.Apply(ctx, "k", &window, engine.Op{Verb: verb, Cost: 1, Now: base + 1})
		require.ErrorIs(t, err, sluice.ErrKeyConflict, verb.String())
	}
	d, err := st.Apply(ctx, "k", &gcra, engine.Op{Verb: engine.VerbCheck, Cost: 3, Now: base + 1})
	require.NoError(t, err)
	require.True(t, d.Allowed, "the conflicting requests changed nothing")

	// Once expired, another algorithm's state is as good as absent.
	later := base + int64(time.Hour)
	d, err = st.Apply(ctx, "k", &window, allow(5, later))
	require.NoError(t, err)
	require.True(t, d.Allowed)
	_, err = st.Apply(ctx, "k", &gcra, allow(1, later))
	require.ErrorIs(t, err, sluice.ErrKeyConflict)
}

func TestTableOptionNamesTheTable(t *testing.T) {
	pool := newPool(t, testserver.StartPostgres(t).URL, 4)
	ctx := context.Background()
	suffix := fmt.Sprintf("%x", rand.Uint32())
	_, err := pool.Exec(ctx, "CREATE SCHEMA limits_"+suffix)
	require.NoError(t, err)
	dropAfter(t, pool, "SCHEMA limits_"+suffix+" CASCADE")
	p := engine.Params{Kind: engine.KindSlidingLog, Limit: 2, Interval: int64(time.Second), MaxEntries: 2}
	for _, name := range []string{"Mixed_Case_" + suffix, "limits_" + suffix + ".buckets", "select_" + suffix} {
		t.Run(name, func(t *testing.T) {
			st, err := pgstore.New(pool, pgstore.WithTable(name), pgstore.WithCallerClock())
			require.NoError(t, err)
			require.NoError(t, st.CreateSchema(ctx))
			table := pgx.Identifier(strings.Split(name, ".")).Sanitize()
			dropAfter(t, pool, "TABLE "+table)
			_, err = st.Apply(ctx, "k", &p, allow(1, base))
			require.NoError(t, err)
			var n int
			require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE key = 'k'").Scan(&n))
			require.Equal(t, 1, n)
		})
	}
}

func TestNewRejectsInvalidOptions(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:1/none")
	require.NoError(t, err) // connects lazily
	defer pool.Close()
	for name, opt := range map[string]pgstore.Option{
		"empty table":      pgstore.WithTable(""),
		"leading digit":    pgstore.WithTable("1abc"),
		"hyphen":           pgstore.WithTable("a-b"),
		"quote":            pgstore.WithTable(`a"; DROP TABLE x; --`),
		"three parts":      pgstore.WithTable("a.b.c"),
		"empty schema":     pgstore.WithTable(".b"),
		"name of 49 bytes": pgstore.WithTable(strings.Repeat("a", 49)),
		"batch of zero":    pgstore.WithPruneBatch(0),
		"negative batch":   pgstore.WithPruneBatch(-1),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := pgstore.New(pool, opt)
			require.ErrorIs(t, err, sluice.ErrInvalidConfig)
		})
	}
	_, err = pgstore.New(nil)
	require.ErrorIs(t, err, sluice.ErrInvalidConfig)
}

// TestInvalidRequestsFailBeforeTheDatabase uses a pool that cannot
// connect: each error must come from validation.
func TestInvalidRequestsFailBeforeTheDatabase(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:1/none")
	require.NoError(t, err)
	defer pool.Close()
	st, err := pgstore.New(pool, pgstore.WithCallerClock())
	require.NoError(t, err)
	gcra := engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: int64(time.Second)}
	window := engine.Params{Kind: engine.KindFixedWindow, Limit: 5, Interval: int64(time.Second)}
	leases := engine.Params{Kind: engine.KindConcurrency, Limit: 5, Interval: int64(time.Second), MaxEntries: 5}
	for _, tc := range []struct {
		name string
		key  string
		p    engine.Params
		op   engine.Op
		want error
	}{
		{"invalid params", "k", engine.Params{Kind: engine.KindGCRA}, allow(1, base), sluice.ErrInvalidConfig},
		{"negative cost", "k", gcra, allow(-1, base), sluice.ErrInvalidCost},
		{"cost above limit", "k", gcra, allow(6, base), sluice.ErrCostExceedsLimit},
		{"check above limit", "k", gcra, engine.Op{Verb: engine.VerbCheck, Cost: 6}, sluice.ErrCostExceedsLimit},
		{"fill-up of GCRA", "k", gcra, engine.Op{Verb: engine.VerbFill, Cost: 1}, sluice.ErrUnsupported},
		{"unknown verb", "k", gcra, engine.Op{Verb: engine.VerbRefund + 1, Cost: 1}, sluice.ErrUnsupported},
		{"reservation of a window", "k", window, engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: base}, sluice.ErrUnsupported},
		{"cancel of a window", "k", window, engine.Op{Verb: engine.VerbCancel, Cost: 1, Now: base, At: base + 1}, sluice.ErrUnsupported},
		{"reservation above limit", "k", gcra, engine.Op{Verb: engine.VerbReserve, Cost: 6, Now: base}, sluice.ErrCostExceedsLimit},
		{"negative max delay", "k", gcra, engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: base, MaxDelay: -1}, sluice.ErrInvalidDelay},
		{"max delay above 2^60 ns", "k", gcra, engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: base, MaxDelay: 1<<60 + 1}, sluice.ErrInvalidDelay},
		{"cancel before the epoch", "k", gcra, engine.Op{Verb: engine.VerbCancel, Cost: 1, Now: base, At: -1}, sluice.ErrTimeOutOfRange},
		{"cancel after 2^62 + 2^60 ns", "k", gcra, engine.Op{Verb: engine.VerbCancel, Cost: 1, Now: base, At: 1<<62 + 1<<60 + 1}, sluice.ErrTimeOutOfRange},
		{"exhaust of a window", "k", window, engine.Op{Verb: engine.VerbExhaust, Cost: 1, Now: base}, sluice.ErrUnsupported},
		{"exhaust of a lease", "k", leases, engine.Op{Verb: engine.VerbExhaust, Cost: 1, Now: base}, sluice.ErrUnsupported},
		{"exhaust above limit", "k", gcra, engine.Op{Verb: engine.VerbExhaust, Cost: 6, Now: base}, sluice.ErrCostExceedsLimit},
		{"negative exhaust delay", "k", gcra, engine.Op{Verb: engine.VerbExhaust, Cost: 1, Now: base, MaxDelay: -1}, sluice.ErrInvalidDelay},
		{"exhaust delay above 2^60 ns", "k", gcra, engine.Op{Verb: engine.VerbExhaust, Cost: 1, Now: base, MaxDelay: 1<<60 + 1}, sluice.ErrInvalidDelay},
		{"charge of a window", "k", window, engine.Op{Verb: engine.VerbCharge, Cost: 1, Now: base}, sluice.ErrUnsupported},
		{"refund of a lease", "k", leases, engine.Op{Verb: engine.VerbRefund, Cost: 1, Now: base}, sluice.ErrUnsupported},
		{"charge of an infinite cost", "k", gcra, engine.Op{Verb: engine.VerbCharge, Cost: math.Inf(1), Now: base}, sluice.ErrInvalidCost},
		{"refund of NaN", "k", gcra, engine.Op{Verb: engine.VerbRefund, Cost: math.NaN(), Now: base}, sluice.ErrInvalidCost},
		{"partial grant of NaN", "k", gcra, engine.Op{Verb: engine.VerbAtMost, Cost: math.NaN(), Now: base}, sluice.ErrInvalidCost},
		{"partial grant above a limit below one", "k", engine.Params{Kind: engine.KindGCRA, Limit: 0.5, Interval: int64(time.Second)},
			engine.Op{Verb: engine.VerbAtMost, Cost: 1, Now: base}, sluice.ErrCostExceedsLimit},
		{"partial grant of a lease", "k", leases, engine.Op{Verb: engine.VerbAtMost, Cost: 1, Now: base}, sluice.ErrUnsupported},
		{"reservation of a lease", "k", leases, engine.Op{Verb: engine.VerbReserve, Cost: 1, Now: base}, sluice.ErrUnsupported},
		{"fill-up of a concurrency limit", "k", leases, engine.Op{Verb: engine.VerbFill, Cost: 1, Now: base}, sluice.ErrUnsupported},
		{"extension of a GCRA", "k", gcra, engine.Op{Verb: engine.VerbExtend, Cost: 1, Now: base, At: base + 1}, sluice.ErrUnsupported},
		{"concurrency limit under a penalty", "k", engine.Params{Kind: engine.KindConcurrency, Limit: 5, Interval: int64(time.Second), MaxEntries: 5, Penalty: 1},
			allow(1, base), sluice.ErrInvalidConfig},
		{"concurrency limit counting denials", "k", engine.Params{Kind: engine.KindConcurrency, Limit: 5, Interval: int64(time.Second), MaxEntries: 5, CountDenied: true},
			allow(1, base), sluice.ErrInvalidConfig},
		{"release before the epoch", "k", leases, engine.Op{Verb: engine.VerbCancel, Cost: 1, Now: base, At: -1}, sluice.ErrTimeOutOfRange},
		{"extension after 2^62 + 2^61 ns", "k", leases, engine.Op{Verb: engine.VerbExtend, Cost: 1, Now: base, At: 1<<62 + 1<<61 + 1}, sluice.ErrTimeOutOfRange},
		{"time before the epoch", "k", gcra, allow(1, -1), sluice.ErrTimeOutOfRange},
		{"time after 2116", "k", gcra, allow(1, 1<<62+1), sluice.ErrTimeOutOfRange},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := st.Apply(context.Background(), tc.key, &tc.p, tc.op)
			require.ErrorIs(t, err, tc.want)
		})
	}
	for _, key := range []string{"nul\x00", "\xff"} {
		_, err := st.Apply(context.Background(), key, &gcra, allow(1, base))
		require.ErrorIs(t, err, sluice.ErrInvalidKey)
		require.ErrorContains(t, err, "not valid UTF-8 without NUL")
		require.ErrorIs(t, st.Reset(context.Background(), key), sluice.ErrInvalidKey)
	}
}

func TestGuideShowsTheSchema(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:1/none")
	require.NoError(t, err)
	defer pool.Close()
	st, err := pgstore.New(pool)
	require.NoError(t, err)
	guide, err := os.ReadFile("../docs/postgresql.md")
	require.NoError(t, err)
	require.Contains(t, string(guide), st.Schema(), "docs/postgresql.md must show the DDL of the default table")
}

// TestDecisionsAreBitIdenticalToStepInEveryQueryMode replays the exact
// traces through each of pgx's query modes: the other modes plan every
// statement anew, and one trace each checks that their encodings of the
// parameters are exact too, with one limit under a penalty and counting
// its denials for the parameters those add, rather than all of
// storetest.Strict, whose statements take longest to plan. (TestConformance
// replays them all in pgx's default mode.)
func TestDecisionsAreBitIdenticalToStepInEveryQueryMode(t *testing.T) {
	url := testserver.StartPostgres(t).URL
	strict := engine.Params{Kind: engine.KindGCRA, Limit: 3, Interval: int64(time.Second) / 4, Penalty: int64(2 * time.Second), CountDenied: true}
	for _, mode := range []pgx.QueryExecMode{
		pgx.QueryExecModeCacheDescribe,
		pgx.QueryExecModeDescribeExec,
		pgx.QueryExecModeExec,
		pgx.QueryExecModeSimpleProtocol,
	} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			cfg, err := pgxpool.ParseConfig(url)
			require.NoError(t, err)
			cfg.ConnConfig.DefaultQueryExecMode = mode
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			require.NoError(t, err)
			t.Cleanup(pool.Close) // after newStore's cleanup, which uses it
			st, _ := newStore(t, pool, pgstore.WithCallerClock())
			storetest.RunTraces(t, st, storetest.Exact(), storetest.WithTraces(1), storetest.WithoutStrict(), storetest.WithAlgorithms(strict))
		})
	}
}
