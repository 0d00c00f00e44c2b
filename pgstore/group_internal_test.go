package pgstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
)

// chained is a group decision of another shape than engine.DecideGroup's:
// it admits the cost in each limit in turn while the previous one
// admitted it, and then only checks. Which decision it asks for next
// depends on the answer to the previous one, which the first pass of a
// speculative group answers with nothing.
func chained(ops []engine.GroupOp, decide func(i int, op engine.Op) (engine.Decision, error), each []engine.Decision) (engine.Decision, error) {
	admitted := true
	for i, g := range ops {
		op := g.Op
		if !admitted {
			op.Verb = engine.VerbCheck
		}
		d, err := decide(i, op)
		if err != nil {
			return engine.Decision{}, err
		}
		each[i] = d
		admitted = admitted && d.Allowed
	}
	return each[len(each)-1], nil
}

// TestGroupOfAnotherShapeIsDecidedAgainOneStatementAtATime pins the
// fallback of the speculative group: when DecideGroup, answered the
// results of the statements run, asks for others, the transaction is
// rolled back and the group decided again, one statement at a time, so
// that each limit records the request once, as decided.
func TestGroupOfAnotherShapeIsDecidedAgainOneStatementAtATime(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(testserver.StartPostgres(t).URL)
	require.NoError(t, err)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	table := fmt.Sprintf("sluice_test_fallback_%d", time.Now().UnixNano())
	st, err := New(pool, WithTable(table), WithCallerClock())
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, st.CreateSchema(ctx))
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP TABLE "+pgx.Identifier{table}.Sanitize())
		require.NoError(t, err)
	})

	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC).UnixNano()
	p := engine.Params{Kind: engine.KindFixedWindow, Limit: 10, Interval: time.Hour.Nanoseconds()}
	ops := []engine.GroupOp{
		{Key: "a", Params: &p, Op: engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now}},
		{Key: "b", Params: &p, Op: engine.Op{Verb: engine.VerbAllow, Cost: 2, Now: now}},
		{Key: "c", Params: &p, Op: engine.Op{Verb: engine.VerbAllow, Cost: 3, Now: now}},
	}
	each := make([]engine.Decision, len(ops))
	d, err := st.applyGroup(ctx, ops, []string{"a", "b", "c"}, each, chained)
	require.NoError(t, err)
	require.True(t, d.Allowed)
	for i, key := range []string{"a", "b", "c"} {
		require.True(t, each[i].Allowed)
		got, err := st.Apply(ctx, key, &p, engine.Op{Verb: engine.VerbCheck, Now: now})
		require.NoError(t, err)
		require.Equal(t, ops[i].Op.Cost, got.Used, "key %s records the request once", key)
	}
}
