package pgstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-go/sluice"
)

// ApplyGroup decides ops as one ([sluice.DecideGroup]) in one
// transaction, and fills each with the decision on each limit. It
// implements [sluice.GroupStore].
//
// The transaction first locks the rows of every key of the group, in the
// order of the keys (inserting the missing ones), so that groups sharing
// keys, in whatever order they list them, never wait on each other in a
// cycle; and reads the database's clock once, after the locks, unless
// the store decides by the caller's. Then each decision of the group is
// the statement Apply would run for it (on the time read), and the
// transaction commits, or rolls back on any error: nothing is recorded.
// A row inserted only to be locked reads as a fresh key, and is deleted
// before the commit unless the group recorded a decision in it.
func (st *Store) ApplyGroup(ctx context.Context, ops []sluice.GroupOp, each []sluice.Decision) (sluice.Decision, error) {
	if err := sluice.CheckGroup(ops, st.callerClock); err != nil {
		return sluice.Decision{}, err
	}
	if len(each) != len(ops) {
		return sluice.Decision{}, fmt.Errorf("%w: pgstore: %d decisions for %d limits", sluice.ErrInvalidConfig, len(each), len(ops))
	}
	keys := make([]string, len(ops))
	for i, g := range ops {
		if err := checkKey(g.Key); err != nil {
			return sluice.Decision{}, err
		}
		keys[i] = g.Key
	}
	slices.Sort(keys) // byte by byte, as COLLATE "C" orders them
	run := slices.Clone(ops)
	var d sluice.Decision
	err := pgx.BeginTxFunc(ctx, st.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		var now int64
		if err := tx.QueryRow(ctx, st.lock, keys).Scan(&now); err != nil {
			return fmt.Errorf("pgstore: locking the keys %q: %w", keys, err)
		}
		if !st.callerClock {
			for i := range run {
				run[i].Op.Now = now
			}
		}
		var err error
		d, err = sluice.DecideGroup(run, func(i int, op sluice.Op) (sluice.Decision, error) {
			return decide(ctx, tx, st.grouped, true, run[i].Key, run[i].Params, op)
		}, each)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, st.unlock, keys); err != nil {
			return fmt.Errorf("pgstore: deleting the unused rows of keys %q: %w", keys, err)
		}
		return nil
	})
	if err != nil {
		clear(each)
		return sluice.Decision{}, err
	}
	return d, nil
}

// lockStatement inserts a row for each of the keys $1, sorted, that has
// none, and locks the others, in the order of the keys, and then returns
// the database's time. ON CONFLICT DO UPDATE locks a row even when its
// WHERE leaves it unchanged. A row inserted here is of no algorithm (kind
// 0) and expired, as good as absent: the statements decide from a fresh
// state on it.
func lockStatement(table string) string {
	return fmt.Sprintf(`WITH locked AS (
	INSERT INTO %[1]s AS s (key, kind, time_ns, a, b, until_ns, expires_at, %[2]s)
	SELECT k, 0, 0, 0, 0, 0, %[3]s, false, 0, 0, 0, 0, 0, 0, 0, false FROM unnest($1::text[]) AS k ORDER BY k COLLATE "C"
	ON CONFLICT (key) DO UPDATE SET kind = s.kind WHERE false
	RETURNING 1)
SELECT %[4]s FROM (SELECT count(*) FROM locked) AS l`, table, decisionColumns, minTime, serverNow)
}

// unlockStatement deletes the rows of the keys $1 that lockStatement
// inserted and no decision wrote.
func unlockStatement(table string) string {
	return "DELETE FROM " + table + " WHERE key = ANY($1) AND kind = 0"
}
