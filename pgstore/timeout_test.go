package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/pgstore"
)

// lockTimeout is the limiters' timeout in the tests of a locked row, and
// lockSlack how much later than it a call may return on a loaded machine:
// ten times as much, and still a bound, since a call that waited for the
// lock would never return while the test holds it.
const (
	lockTimeout = 200 * time.Millisecond
	lockSlack   = 2 * time.Second
)

// lockRow has another transaction, on a connection of its own, hold the
// row of key in table locked, as a long migration or a stuck session
// would. It returns the transaction and its connection; the test's end
// rolls the one back and closes the other.
func lockRow(t *testing.T, url, table, key string) (pgx.Tx, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(ctx) })
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	_, err = tx.Exec(ctx, "SELECT 1 FROM "+pgx.Identifier{table}.Sanitize()+" WHERE key = $1 FOR UPDATE", key)
	require.NoError(t, err)
	return tx, conn
}

// waiting returns the number of backends waiting for a lock that the
// backend holder holds.
func waiting(t *testing.T, conn *pgx.Conn, holder uint32) int {
	t.Helper()
	var n int
	require.NoError(t, conn.QueryRow(context.Background(),
		"SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))", int32(holder)).Scan(&n))
	return n
}

func TestLockedRowGivesTimeoutsAndStoreRecovers(t *testing.T) {
	url := testserver.StartPostgres(t).URL
	pool := newPool(t, url, 4)
	st, table := newStore(t, pool, pgstore.WithCallerClock())
	lim, err := sluice.NewGCRA(sluice.PerSecond(1000), 1000, sluice.WithStore(st), sluice.WithTimeout(lockTimeout))
	require.NoError(t, err)
	// The calls that must be decided go through a limiter on the same
	// store with a timeout of a minute: each may first have to dial a
	// connection (the pool's first, or one in place of those the timeouts
	// closed), which a loaded machine may not do within lockTimeout.
	patient, err := sluice.NewGCRA(sluice.PerSecond(1000), 1000, sluice.WithStore(st), sluice.WithTimeout(time.Minute))
	require.NoError(t, err)
	ctx := context.Background()
	_, err = patient.Allow(ctx, "k", 1)
	require.NoError(t, err)

	tx, holder := lockRow(t, url, table, "k")

	for i := range 3 {
		begin := time.Now()
		_, err = lim.Allow(ctx, "k", 1)
		took := time.Since(begin)
		require.ErrorIs(t, err, sluice.ErrTimeout, "call %d", i)
		require.ErrorIs(t, err, context.DeadlineExceeded, "call %d", i)
		require.GreaterOrEqual(t, took, lockTimeout, "call %d returned before its deadline", i)
		require.Less(t, took, lockTimeout+lockSlack, "call %d", i)
		t.Logf("call %d on the locked row: error after %v", i, took.Round(time.Millisecond))
	}
	d, err := patient.Allow(ctx, "other", 1)
	require.NoError(t, err, "other keys are decided meanwhile")
	require.True(t, d.Allowed)

	// pgx closes the connection of a statement whose context ended, and
	// sends the server a cancel request: the abandoned statements do not
	// wait on, to run when the lock is released. Left waiting, they would
	// wait as long as the test holds the lock: the minute is only how long
	// the cancel requests, sent in the background, may take to arrive.
	observer, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer observer.Close(ctx)
	require.Eventually(t, func() bool { return waiting(t, observer, holder.PgConn().PID()) == 0 },
		time.Minute, 10*time.Millisecond, "the server cancelled the abandoned statements")

	require.NoError(t, tx.Commit(ctx))
	d, err = patient.Allow(ctx, "k", 1)
	require.NoError(t, err, "the store recovers by itself")
	require.True(t, d.Allowed)
}
