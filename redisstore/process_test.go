package redisstore_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/leaseproc"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/redisstore"
)

// The tests across processes run the test binary again as the other
// processes (package leaseproc), on the server, keys and clock these
// name.
const (
	helperAddr   = "SLUICE_REDISSTORE_HELPER_ADDR"
	helperPrefix = "SLUICE_REDISSTORE_HELPER_PREFIX"
	helperClock  = "SLUICE_REDISSTORE_HELPER_CLOCK" // "server" or "caller"
)

func TestMain(m *testing.M) {
	leaseproc.Main(m, func(context.Context) (engine.Store, func(), error) {
		c := redis.NewClient(&redis.Options{Addr: os.Getenv(helperAddr), ContextTimeoutEnabled: true})
		st, err := redisstore.New(c, storeOptions(os.Getenv(helperPrefix), os.Getenv(helperClock))...)
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		return st, func() { st.Close(); c.Close() }, nil
	})
}

// storeOptions are the options of a store of the keys of prefix deciding
// by clock, "server" or "caller".
func storeOptions(prefix, clock string) []redisstore.Option {
	opts := []redisstore.Option{redisstore.WithPrefix(prefix)}
	if clock == "caller" {
		opts = append(opts, redisstore.WithCallerClock(time.Second))
	}
	return opts
}

// TestLeasesAcrossProcessesNeverExceedTheLimit pins the concurrency
// limit's guarantee across processes: 3 processes on one Redis, each with
// 4 goroutines taking 10 leases in turn (woken by releases alone: their
// polls last an hour), never hold more than the limit at once, counted by
// the holders themselves, and every acquisition completes.
func TestLeasesAcrossProcessesNeverExceedTheLimit(t *testing.T) {
	addr := testserver.StartRedis(t).Addr
	prefix := fmt.Sprintf("test:%s:%d:", t.Name(), time.Now().UnixNano())
	holds := leaseproc.Holders(t, helperAddr+"="+addr, helperPrefix+"="+prefix)
	most, at := leaseproc.MostAtOnce(holds)
	t.Logf("%d holds in %d processes, at most %d at once (limit %d)", len(holds), leaseproc.Processes, most, leaseproc.Limit)
	require.LessOrEqual(t, most, leaseproc.Limit, "leases held at once at %d ns", at)
}

// TestWaitersAcrossProcessesAreServedInArrivalOrder pins the line across
// processes: waiters that join one after the other, each in the next of
// 3 processes (woken by the store alone: their polls last an hour), are
// granted the slot in the order they joined, as the grants' lease
// identities, which grow with each grant, tell; on either clock.
func TestWaitersAcrossProcessesAreServedInArrivalOrder(t *testing.T) {
	addr := testserver.StartRedis(t).Addr
	for _, clock := range []string{"server", "caller"} {
		t.Run(clock, func(t *testing.T) {
			prefix := fmt.Sprintf("test:%s:%d:", t.Name(), time.Now().UnixNano())
			c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
			t.Cleanup(func() { c.Close() })
			st, err := redisstore.New(c, storeOptions(prefix, clock)...)
			require.NoError(t, err)
			t.Cleanup(func() { st.Close() })
			lim, err := sluice.NewConcurrencyLimit(1, time.Minute, sluice.WithStore(st))
			require.NoError(t, err)
			order := leaseproc.Order(t, lim, helperAddr+"="+addr, helperPrefix+"="+prefix, helperClock+"="+clock)
			require.Equal(t, leaseproc.Arrivals(), order)
		})
	}
}

// TestSlotsOfAKilledHolderComeBackAtTheirExpiry pins what a holder killed
// with SIGKILL while it holds every slot costs: its leases hold the slots
// until they expire, and no longer than that and leaseproc.KeeperSlack.
// Measured by the store's own decisions, on each clock the store can
// decide by: a TryAcquire just after the kill is denied, and says that a
// slot comes back within the time to live; Acquires whose deadline is the
// time to live and the slack after the kill get every slot, each no sooner
// than a killed lease expired.
func TestSlotsOfAKilledHolderComeBackAtTheirExpiry(t *testing.T) {
	const slots = 2
	addr := testserver.StartRedis(t).Addr
	for _, clock := range []string{"server", "caller"} {
		t.Run(clock, func(t *testing.T) {
			prefix := fmt.Sprintf("test:%s:%d:", t.Name(), time.Now().UnixNano())
			kept := leaseproc.KillKeeper(t, slots, helperAddr+"="+addr, helperPrefix+"="+prefix, helperClock+"="+clock)
			killed := time.Now()

			st, err := redisstore.New(newClient(t, addr), storeOptions(prefix, clock)...)
			require.NoError(t, err)
			t.Cleanup(func() { st.Close() })
			lim, err := sluice.NewConcurrencyLimit(slots, leaseproc.KeeperTTL, sluice.WithStore(st), sluice.WithLeasePoll(time.Hour))
			require.NoError(t, err)

			ctx, cancel := context.WithDeadline(t.Context(), killed.Add(leaseproc.KeeperTTL+leaseproc.KeeperSlack))
			defer cancel()
			d, err := lim.TryAcquire(ctx, leaseproc.KeeperKey, 1)
			require.NoError(t, err)
			require.False(t, d.Allowed, "the killed holder's leases hold every slot")
			require.Positive(t, d.RetryAfter)
			require.LessOrEqual(t, d.RetryAfter, leaseproc.KeeperTTL, "a slot comes back within the time to live")

			for i := range slots {
				lease, err := lim.Acquire(ctx, leaseproc.KeeperKey, 1)
				require.NoError(t, err, "the slots came back within the time to live and %v", leaseproc.KeeperSlack)
				require.True(t, lease.Allowed)
				// A lease expires at its grant plus the time to live, and
				// the key's expiries only grow: the i-th slot was granted at
				// the i-th killed lease's expiry or later.
				require.GreaterOrEqual(t, lease.At-int64(leaseproc.KeeperTTL), kept[i], "slot %d granted before the killed lease expired", i)
			}
		})
	}
}
