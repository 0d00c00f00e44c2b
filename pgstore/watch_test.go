package pgstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/leaseproc"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/pgstore"
)

// The tests of waiting for a lease give the leases and the waiters' polls
// an hour, and the tests 30 s: a waiter that gets its lease was woken by a
// notification, since nothing else could wake it in time.
const (
	hour     = time.Hour
	deadline = 30 * time.Second
)

// sharing returns another store on table, on a pool of its own, as
// another process would have, closed when t ends.
func sharing(t *testing.T, url, table string) *pgstore.Store {
	t.Helper()
	st, err := pgstore.New(newPool(t, url, 4), pgstore.WithTable(table))
	require.NoError(t, err)
	closeAfter(t, st)
	return st
}

// slots returns a concurrency limit of one lease per key on st, whose
// leases and polls last an hour.
func slots(t *testing.T, st *pgstore.Store, opts ...sluice.Option) *sluice.Limiter {
	t.Helper()
	lim, err := sluice.NewConcurrencyLimit(1, hour, append([]sluice.Option{sluice.WithStore(st), sluice.WithLeasePoll(hour)}, opts...)...)
	require.NoError(t, err)
	return lim
}

// granted is what a waiter got: whether it got the slot, and its error.
type granted struct {
	allowed bool
	err     error
}

// holdAndWait is one way to hold the slot of key "k" and to wait for it.
type holdAndWait struct {
	name string
	// hold takes the slot through st and returns its release.
	hold func(t *testing.T, ctx context.Context, st *pgstore.Store) func(context.Context) error
	// waiter returns a wait for the slot through st, with observe on the
	// limit that holds it, to run on a goroutine of its own.
	waiter func(t *testing.T, st *pgstore.Store, observe sluice.Option) func(context.Context) granted
}

// asLease holds and waits with a lease of the concurrency limit alone.
var asLease = holdAndWait{
	name: "a lease",
	hold: func(t *testing.T, ctx context.Context, st *pgstore.Store) func(context.Context) error {
		lease, err := slots(t, st).TryAcquire(ctx, "k", 1)
		require.NoError(t, err)
		require.True(t, lease.Allowed)
		return lease.Release
	},
	waiter: func(t *testing.T, st *pgstore.Store, observe sluice.Option) func(context.Context) granted {
		lim := slots(t, st, observe)
		return func(ctx context.Context) granted {
			lease, err := lim.Acquire(ctx, "k", 1)
			return granted{lease.Allowed, err}
		}
	},
}

// asGroup holds and waits with a group of a rate limit, which admits
// every request, and the concurrency limit.
var asGroup = holdAndWait{
	name: "a group",
	hold: func(t *testing.T, ctx context.Context, st *pgstore.Store) func(context.Context) error {
		lease, err := group(t, st).TryAcquire(ctx, []string{"rate", "k"}, 1)
		require.NoError(t, err)
		require.True(t, lease.Allowed)
		return lease.Release
	},
	waiter: func(t *testing.T, st *pgstore.Store, observe sluice.Option) func(context.Context) granted {
		g := group(t, st, observe)
		return func(ctx context.Context) granted {
			lease, err := g.Acquire(ctx, []string{"rate", "k"}, 1)
			return granted{lease.Allowed, err}
		}
	},
}

// group returns a group of a rate limit that admits every request and a
// concurrency limit (slots) on st, with opts on the concurrency limit.
func group(t *testing.T, st *pgstore.Store, opts ...sluice.Option) *sluice.Group {
	t.Helper()
	rate, err := sluice.NewGCRA(sluice.PerSecond(1000), 100, sluice.WithStore(st))
	require.NoError(t, err)
	g, err := sluice.NewGroup(rate, slots(t, st, opts...))
	require.NoError(t, err)
	return g
}

// TestAcquireIsWokenByAReleaseThroughAnotherStore pins the notification
// of a release across processes: a waiter in one store's Acquire, denied,
// is woken by a release made through another store on the table (another
// pool: another process, as far as PostgreSQL knows), alone or as a
// group's, and gets the slot.
func TestAcquireIsWokenByAReleaseThroughAnotherStore(t *testing.T) {
	url := testserver.StartPostgres(t).URL
	for _, tc := range []struct {
		holder, waiter holdAndWait
	}{
		{asLease, asLease},
		{asGroup, asGroup},
		{asGroup, asLease}, // a group's release wakes the key's waiter
	} {
		t.Run(tc.holder.name+" released wakes "+tc.waiter.name, func(t *testing.T) {
			holder, table := newStore(t, newPool(t, url, 2))
			waiter := sharing(t, url, table)
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			release := tc.holder.hold(t, ctx, holder)
			observe, denied := leaseproc.Denials()
			wait := tc.waiter.waiter(t, waiter, observe)
			got := make(chan granted, 1)
			go func() { got <- wait(ctx) }()
			leaseproc.Receive(t, ctx, denied, "denial of the waiter")
			leaseproc.Receive(t, ctx, denied, "denial of the waiter, watching") // Acquire watches once denied, and asks again
			require.NoError(t, release(ctx))
			g := leaseproc.Receive(t, ctx, got, "lease for the waiter")
			require.NoError(t, g.err)
			require.True(t, g.allowed)
		})
	}
}

// listenerPID returns the process ID of the backend that listens for the
// releases on table, other than not, polling until there is one: the
// channel is the table's name followed by ":released".
func listenerPID(t *testing.T, ctx context.Context, conn *pgx.Conn, table string, not int32) int32 {
	t.Helper()
	listen := "LISTEN " + pgx.Identifier{table + ":released"}.Sanitize()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var pid int32
		err := conn.QueryRow(ctx, "SELECT pid FROM pg_stat_activity WHERE query = $1 AND pid <> $2", listen, not).Scan(&pid)
		if err == nil {
			return pid
		}
		require.ErrorIs(t, err, pgx.ErrNoRows)
		leaseproc.Receive(t, ctx, tick.C, "listening backend")
	}
}

// TestTerminatedListenerReconnectsAndWakesEveryWatcher pins the listening
// connection's recovery: when its backend is terminated, the store listens
// on another connection by itself, wakes every waiter once (releases may
// have gone untold meanwhile), and a release after that wakes a waiter.
func TestTerminatedListenerReconnectsAndWakesEveryWatcher(t *testing.T) {
	url := testserver.StartPostgres(t).URL
	holder, table := newStore(t, newPool(t, url, 2))
	waiter := sharing(t, url, table)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	release := asLease.hold(t, ctx, holder)
	observe, denied := leaseproc.Denials()
	wait := asLease.waiter(t, waiter, observe)
	got := make(chan granted, 1)
	go func() { got <- wait(ctx) }()
	leaseproc.Receive(t, ctx, denied, "denial of the waiter")
	leaseproc.Receive(t, ctx, denied, "denial of the waiter, watching") // Acquire watches once denied, and asks again

	killer, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer killer.Close(ctx)
	pid := listenerPID(t, ctx, killer, table, 0)
	var killed bool
	require.NoError(t, killer.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&killed))
	require.True(t, killed)
	// Nothing was released: only the listener, listening again, can
	// have woken the waiter to be denied again.
	leaseproc.Receive(t, ctx, denied, "denial of the waiter woken by the new listener")
	require.NotEqual(t, pid, listenerPID(t, ctx, killer, table, pid))

	require.NoError(t, release(ctx))
	g := leaseproc.Receive(t, ctx, got, "lease for the waiter")
	require.NoError(t, g.err)
	require.True(t, g.allowed)
}

// TestWatchReleasesFailsWhileTheDatabaseIsDown pins what a waiter gets
// when the store cannot listen: the error of an attempt to connect (not
// its context's end); Acquire, whose first decision fails first, fails
// with the store's error too; once the database is back, the store
// listens again.
func TestWatchReleasesFailsWhileTheDatabaseIsDown(t *testing.T) {
	pg := testserver.StartPostgres(t)
	st, _ := newStore(t, newPool(t, pg.URL, 2))
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	pg.Stop(t)
	c := make(chan struct{}, 1)
	_, err := st.WatchReleases(ctx, "k", c)
	require.ErrorContains(t, err, "pgstore: listening for releases")
	require.NoError(t, ctx.Err(), "the error came before the deadline")
	_, err = slots(t, st).Acquire(ctx, "k", 1)
	require.ErrorContains(t, err, "connect", "Acquire fails with the store's error: its first decision's")
	require.NoError(t, ctx.Err(), "the error came before the deadline")

	pg.Start(t)
	stop, err := st.WatchReleases(ctx, "k", c)
	require.NoError(t, err)
	stop()
	lease, err := slots(t, st).Acquire(ctx, "k", 1)
	require.NoError(t, err)
	require.True(t, lease.Allowed)
}

// TestWatchReleasesOnAClosedStoreReturnsErrStoreClosed pins Close: a
// store closed before it listened, or while listening, refuses to watch,
// and so Acquire fails, with sluice.ErrStoreClosed; closing again is
// harmless.
func TestWatchReleasesOnAClosedStoreReturnsErrStoreClosed(t *testing.T) {
	url := testserver.StartPostgres(t).URL
	pool := newPool(t, url, 2)
	_, table := newStore(t, pool)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	for _, tc := range []struct {
		name     string
		listened bool
	}{
		{"closed before it listened", false},
		{"closed while listening", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := pgstore.New(pool, pgstore.WithTable(table))
			require.NoError(t, err)
			c := make(chan struct{}, 1)
			if tc.listened {
				stop, err := st.WatchReleases(ctx, "k", c)
				require.NoError(t, err)
				defer stop()
			}
			require.NoError(t, st.Close())
			_, err = st.WatchReleases(ctx, "k", c)
			require.ErrorIs(t, err, sluice.ErrStoreClosed)
			// Decisions still run on the caller's pool: a free slot is
			// granted without a watch; a full key needs one, and fails.
			lim := slots(t, st)
			held, err := lim.TryAcquire(ctx, "k."+tc.name, 1)
			require.NoError(t, err)
			require.True(t, held.Allowed)
			_, err = lim.Acquire(ctx, "k."+tc.name, 1)
			require.ErrorIs(t, err, sluice.ErrStoreClosed)
			require.NoError(t, st.Close())
		})
	}
}

// TestReleaseWakesItsWatcherWhateverTheNamesLength pins the channel and
// the payload at their bounds: a table named as long as WithTable allows
// (a channel name shortened to PostgreSQL's 63 bytes), and a key of 6,000
// bytes of UTF-8 (whose digest is the payload, as a payload must be
// shorter than 8,000 bytes), woken by a release through another store.
func TestReleaseWakesItsWatcherWhateverTheNamesLength(t *testing.T) {
	url := testserver.StartPostgres(t).URL
	pool := newPool(t, url, 2)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	schema := (newTable() + strings.Repeat("s", 63))[:63]
	_, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	require.NoError(t, err)
	dropAfter(t, pool, "SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	table := schema + "." + strings.Repeat("t", 48)
	holder, err := pgstore.New(pool, pgstore.WithTable(table))
	require.NoError(t, err)
	require.NoError(t, holder.CreateSchema(ctx))
	closeAfter(t, holder)
	waiter, err := pgstore.New(newPool(t, url, 2), pgstore.WithTable(table))
	require.NoError(t, err)
	closeAfter(t, waiter)

	for _, key := range []string{"k", strings.Repeat("é", 3000)} {
		lease, err := slots(t, holder).TryAcquire(ctx, key, 1)
		require.NoError(t, err)
		require.True(t, lease.Allowed)
		c := make(chan struct{}, 1)
		stop, err := waiter.WatchReleases(ctx, key, c)
		require.NoError(t, err)
		require.NoError(t, lease.Release(ctx))
		leaseproc.Receive(t, ctx, c, "wake-up by the release")
		stop()
	}
}

// TestResetWakesTheWaiters pins Reset on a concurrency limit's key: the
// leases it forgets free their slots, and a waiter in another store's
// Acquire is woken and gets one. A reset of a rate limit's key notifies
// nobody.
func TestResetWakesTheWaiters(t *testing.T) {
	url := testserver.StartPostgres(t).URL
	holder, table := newStore(t, newPool(t, url, 2))
	waiter := sharing(t, url, table)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	held, err := slots(t, holder).TryAcquire(ctx, "k", 1)
	require.NoError(t, err)
	require.True(t, held.Allowed)
	observe, denied := leaseproc.Denials()
	lim := slots(t, waiter, observe)
	got := make(chan granted, 1)
	go func() {
		lease, err := lim.Acquire(ctx, "k", 1)
		got <- granted{lease.Allowed, err}
	}()
	leaseproc.Receive(t, ctx, denied, "denial of the waiter")
	leaseproc.Receive(t, ctx, denied, "denial of the waiter, watching")
	require.NoError(t, holder.Reset(ctx, "k"))
	g := leaseproc.Receive(t, ctx, got, "lease for the waiter")
	require.NoError(t, g.err)
	require.True(t, g.allowed)

	c := make(chan struct{}, 1)
	stop, err := waiter.WatchReleases(ctx, "rate", c)
	require.NoError(t, err)
	defer stop()
	rate, err := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithStore(holder))
	require.NoError(t, err)
	_, err = rate.Allow(ctx, "rate", 1)
	require.NoError(t, err)
	require.NoError(t, holder.Reset(ctx, "rate"))
	require.NoError(t, holder.Reset(ctx, "never-used"))
	// A release on "k2" after the resets, told after them: once it is
	// here, a notice of the resets would have come before it.
	again, err := slots(t, holder).TryAcquire(ctx, "k2", 1)
	require.NoError(t, err)
	c2 := make(chan struct{}, 1)
	stop2, err := waiter.WatchReleases(ctx, "k2", c2)
	require.NoError(t, err)
	defer stop2()
	require.NoError(t, again.Release(ctx))
	leaseproc.Receive(t, ctx, c2, "notice of the release")
	require.Empty(t, c, "a rate limit's reset notifies nobody")
}
