package pgstore_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/leaseproc"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/pgstore"
)

// The tests across processes run the test binary again as the other
// processes (package leaseproc), on the database and table these name.
const (
	helperURL   = "SLUICE_PGSTORE_HELPER_URL"
	helperTable = "SLUICE_PGSTORE_HELPER_TABLE"
)

func TestMain(m *testing.M) {
	leaseproc.Main(m, func(ctx context.Context) (engine.Store, func(), error) {
		pool, err := pgxpool.New(ctx, os.Getenv(helperURL))
		if err != nil {
			return nil, nil, err
		}
		st, err := pgstore.New(pool, pgstore.WithTable(os.Getenv(helperTable)))
		if err != nil {
			pool.Close()
			return nil, nil, err
		}
		return st, func() { st.Close(); pool.Close() }, nil
	})
}

// TestLeasesAcrossProcessesNeverExceedTheLimit pins the concurrency
// limit's guarantee across processes: 3 processes on one database, each
// with 4 goroutines taking 10 leases in turn (woken by releases alone:
// their polls last an hour), never hold more than the limit at once,
// counted by the holders themselves, and every acquisition completes.
func TestLeasesAcrossProcessesNeverExceedTheLimit(t *testing.T) {
	url := testserver.StartPostgres(t).URL
	_, table := newStore(t, newPool(t, url, 2))
	holds := leaseproc.Holders(t, helperURL+"="+url, helperTable+"="+table)
	most, at := leaseproc.MostAtOnce(holds)
	t.Logf("%d holds in %d processes, at most %d at once (limit %d)", len(holds), leaseproc.Processes, most, leaseproc.Limit)
	require.LessOrEqual(t, most, leaseproc.Limit, "leases held at once at %d ns", at)
}

// TestWaitersAcrossProcessesAreServedInArrivalOrder pins the line across
// processes: waiters that join one after the other, each in the next of
// 3 processes (woken by the store alone: their polls last an hour), are
// granted the slot in the order they joined, as the grants' lease
// identities, which grow with each grant, tell.
func TestWaitersAcrossProcessesAreServedInArrivalOrder(t *testing.T) {
	url := testserver.StartPostgres(t).URL
	st, table := newStore(t, newPool(t, url, 2))
	lim, err := sluice.NewConcurrencyLimit(1, time.Minute, sluice.WithStore(st))
	require.NoError(t, err)
	order := leaseproc.Order(t, lim, helperURL+"="+url, helperTable+"="+table)
	require.Equal(t, leaseproc.Arrivals(), order)
}

// TestSlotOfAKilledHolderComesBackAtItsExpiry pins what a holder killed
// with SIGKILL costs: its lease holds the slot until it expires, and no
// longer than that and leaseproc.KeeperSlack; the waiter's lease is
// granted no sooner than the expiry (both instants on the database's
// clock, as the store decides them).
func TestSlotOfAKilledHolderComesBackAtItsExpiry(t *testing.T) {
	url := testserver.StartPostgres(t).URL
	st, table := newStore(t, newPool(t, url, 2))
	kept := leaseproc.KillKeeper(t, 1, helperURL+"="+url, helperTable+"="+table)

	lim, err := sluice.NewConcurrencyLimit(1, leaseproc.KeeperTTL, sluice.WithStore(st), sluice.WithLeasePoll(time.Hour))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), leaseproc.KeeperTTL+leaseproc.KeeperSlack)
	defer cancel()
	lease, err := lim.Acquire(ctx, leaseproc.KeeperKey, 1)
	require.NoError(t, err, "the slot came back within the time to live and %v", leaseproc.KeeperSlack)
	require.True(t, lease.Allowed)
	// A lease expires at its grant plus the time to live, and the key's
	// expiries only grow: this one was granted at its At less the time
	// to live, at the killed one's expiry or later.
	require.GreaterOrEqual(t, lease.At-int64(leaseproc.KeeperTTL), kept[0], "granted before the killed holder's lease expired")
}
