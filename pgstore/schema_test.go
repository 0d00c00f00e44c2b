package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/pgstore"
	"github.com/sluice-go/sluice/storetest"
)

// earlierSchemas are the DDL of the table (%[1]s) and its index (%[2]s)
// as earlier releases created them, and the columns that their rows hold
// after those of the first: the first release, and the one that added
// reservations and partial grants.
var earlierSchemas = []struct{ name, ddl, columns string }{
	{"first release", `CREATE TABLE %[1]s (
    key              text COLLATE "C" PRIMARY KEY,
    kind             smallint NOT NULL,
    time_ns          bigint NOT NULL,
    a                float8 NOT NULL,
    b                float8 NOT NULL,
    log_times        bigint[],
    log_costs        float8[],
    expires_at       bigint NOT NULL,
    last_allowed     boolean NOT NULL,
    last_used        float8 NOT NULL,
    last_remaining   float8 NOT NULL,
    last_retry_after bigint NOT NULL,
    last_reset_after bigint NOT NULL
);
CREATE INDEX %[2]s ON %[1]s (expires_at);`, ""},
	{"reservations release", `CREATE TABLE %[1]s (
    key              text COLLATE "C" PRIMARY KEY,
    kind             smallint NOT NULL,
    time_ns          bigint NOT NULL,
    a                float8 NOT NULL,
    b                float8 NOT NULL,
    log_times        bigint[],
    log_costs        float8[],
    expires_at       bigint NOT NULL,
    last_allowed     boolean NOT NULL,
    last_used        float8 NOT NULL,
    last_remaining   float8 NOT NULL,
    last_retry_after bigint NOT NULL,
    last_reset_after bigint NOT NULL,
    last_delay       bigint NOT NULL,
    last_at          bigint NOT NULL,
    last_granted     float8 NOT NULL
);
CREATE INDEX %[2]s ON %[1]s (expires_at);`, ", last_delay, last_at, last_granted"},
}

// TestCreateSchemaUpgradesAnEarlierTableKeepingItsRows creates the table
// as each earlier release did, with rows in it as that release wrote
// them, and upgrades it as a user would, by calling CreateSchema: the
// rows' states then decide as Step does from them, penalties are kept in
// them, and CreateSchema called again runs no DDL, so it does not wait
// for a transaction writing the table.
func TestCreateSchemaUpgradesAnEarlierTableKeepingItsRows(t *testing.T) {
	pool := newPool(t, testserver.StartPostgres(t).URL, 4)
	t.Run("ANewTableHasTheColumnsOfAnUpgradedOne", func(t *testing.T) { newTableHasTheColumnsOfAnUpgradedOne(t, pool) })
	ctx := context.Background()
	s := int64(time.Second)
	gcra := engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: s}
	window := engine.Params{Kind: engine.KindFixedWindow, Limit: 5, Interval: s}
	log := engine.Params{Kind: engine.KindSlidingLog, Limit: 5, Interval: s, MaxEntries: 5}
	now := base / s * s // a window's start
	rows := []struct {
		key   string
		p     engine.Params
		state engine.State
	}{
		{"gcra", gcra, engine.State{Time: now + 4*s}},
		{"window", window, engine.State{Time: now, A: 3}},
		{"log", log, engine.State{Log: []engine.Entry{{Time: now - s/2, Cost: 1}, {Time: now - s/10, Cost: 2.5}}}},
	}
	for _, earlier := range earlierSchemas {
		t.Run(earlier.name, func(t *testing.T) {
			table := newTable()
			quoted := pgx.Identifier{table}.Sanitize()
			_, err := pool.Exec(ctx, fmt.Sprintf(earlier.ddl, quoted, pgx.Identifier{table + "_expires_at_idx"}.Sanitize()))
			require.NoError(t, err)
			dropAfter(t, pool, "TABLE "+quoted)
			for _, r := range rows {
				var times []int64
				var costs []float64
				for _, e := range r.state.Log {
					times, costs = append(times, e.Time), append(costs, e.Cost)
				}
				values := strings.Repeat(", 0", strings.Count(earlier.columns, ","))
				_, err := pool.Exec(ctx, "INSERT INTO "+quoted+` (key, kind, time_ns, a, b, log_times, log_costs, expires_at,
					last_allowed, last_used, last_remaining, last_retry_after, last_reset_after`+earlier.columns+`)
					VALUES ($1, $2, $3, $4, 0, $5, $6, $7, true, 1, 1, 0, 1`+values+`)`,
					r.key, int16(r.p.Kind), r.state.Time, r.state.A, times, costs, now+5*s)
				require.NoError(t, err)
			}

			st, err := pgstore.New(pool, pgstore.WithTable(table), pgstore.WithCallerClock())
			require.NoError(t, err)
			require.NoError(t, st.CreateSchema(ctx), "upgrading is calling CreateSchema")

			at := now + s/4
			for _, r := range rows {
				op := engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: at}
				_, want, err := r.p.Step(r.state, op)
				require.NoError(t, err)
				got, err := st.Apply(ctx, r.key, &r.p, op)
				require.NoError(t, err)
				storetest.RequireIdenticalDecision(t, want, got, "the earlier release's row of "+r.key)
			}

			// A penalty on a key the earlier release wrote: its block is
			// kept in the new column.
			strict := gcra
			strict.Penalty = 10 * s
			state := engine.State{Time: now + 5*s} // after the Allow above
			for i, op := range []engine.Op{allow(5, at), allow(1, at+s), allow(1, at+9*s), allow(1, at+11*s)} {
				next, want, err := strict.Step(state, op)
				require.NoError(t, err)
				got, err := st.Apply(ctx, "gcra", &strict, op)
				require.NoError(t, err)
				storetest.RequireIdenticalDecision(t, want, got, fmt.Sprintf("request %d under a penalty", i))
				if strict.Records(op.Verb, &want) {
					state = next
				}
			}
			require.Zero(t, state.Until, "the block ended")

			// Up to date, CreateSchema takes no lock on the table: it does
			// not wait for a transaction that writes it, which CREATE INDEX
			// and ALTER TABLE would.
			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer tx.Rollback(ctx)
			_, err = tx.Exec(ctx, "LOCK TABLE "+quoted+" IN ROW EXCLUSIVE MODE")
			require.NoError(t, err)
			quick, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			require.NoError(t, st.CreateSchema(quick))
		})
	}
}

// newTableHasTheColumnsOfAnUpgradedOne pins the columns of a new table,
// and their order: those of a table upgraded from the first release.
func newTableHasTheColumnsOfAnUpgradedOne(t *testing.T, pool *pgxpool.Pool) {
	ctx := context.Background()
	_, table := newStore(t, pool)
	var got []string
	rows, err := pool.Query(ctx, "SELECT column_name FROM information_schema.columns WHERE table_name = $1 ORDER BY ordinal_position", table)
	require.NoError(t, err)
	got, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"key", "kind", "time_ns", "a", "b", "log_times", "log_costs", "expires_at",
		"last_allowed", "last_used", "last_remaining", "last_retry_after", "last_reset_after",
		"last_delay", "last_at", "last_granted", "until_ns", "last_blocked"}, got,
		"a new table has the columns an upgraded one has, in the same order")
}
