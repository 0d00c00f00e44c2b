package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/leaseproc"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/redisstore"
)

// wakeTimeout bounds the tests' waits for what a release must bring: a
// wake-up, a lease. It is no timing assertion: the polls and leases last
// an hour, so only a notice can bring either, and a test that reaches
// this bound has failed for good.
const wakeTimeout = 30 * time.Second

// A deployment is one Redis deployment for a test, and its clients.
type deployment struct {
	name string
	// start starts the servers and returns a function that makes a
	// client of them, with a connection pool of its own (a process's),
	// and one that returns keys to wait on: one, or in a Cluster one in a
	// slot of each master.
	start func(t *testing.T) (client func() redis.UniversalClient, keys func(st *redisstore.Store) []string)
}

// oneKey is the keys of a deployment of one master.
func oneKey(*redisstore.Store) []string { return []string{"k"} }

// deployments are the single server, Sentinel and Cluster that the
// store's wake-ups must work on.
var deployments = []deployment{
	{"Server", func(t *testing.T) (func() redis.UniversalClient, func(*redisstore.Store) []string) {
		addr := testserver.StartRedis(t).Addr
		return func() redis.UniversalClient { return newClient(t, addr) }, oneKey
	}},
	{"Sentinel", func(t *testing.T) (func() redis.UniversalClient, func(*redisstore.Store) []string) {
		s := testserver.StartRedisSentinel(t, 1)
		return func() redis.UniversalClient {
			c := redis.NewFailoverClient(&redis.FailoverOptions{
				MasterName:            s.MasterName,
				SentinelAddrs:         s.SentinelAddrs(),
				ContextTimeoutEnabled: true,
			})
			t.Cleanup(func() { c.Close() })
			return c
		}, oneKey
	}},
	{"Cluster", func(t *testing.T) (func() redis.UniversalClient, func(*redisstore.Store) []string) {
		cluster := testserver.StartRedisClusterWithReplicas(t)
		return func() redis.UniversalClient { return newClusterClient(t, cluster) },
			func(st *redisstore.Store) []string { return keysOnEveryMaster(t, cluster, st) }
	}},
}

// newClusterClient returns a Cluster client of cluster whose calls end at
// their context's deadline.
func newClusterClient(t testing.TB, cluster *testserver.RedisCluster) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// sharedStores returns a store on each client, all on one prefix that no
// other test uses: processes that share their keys. Each store is closed
// when t ends.
func sharedStores(t *testing.T, clients ...redis.UniversalClient) []*redisstore.Store {
	t.Helper()
	prefix := fmt.Sprintf("test:%s:%d:", t.Name(), rand.Uint64())
	stores := make([]*redisstore.Store, len(clients))
	for i, c := range clients {
		st, err := redisstore.New(c, redisstore.WithPrefix(prefix))
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		stores[i] = st
	}
	return stores
}

// receive returns what c brings, or fails t after wakeTimeout.
func receive[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wakeTimeout)
	defer cancel()
	return leaseproc.Receive(t, ctx, c, what)
}

// keysOnEveryMaster returns a key whose Redis name st puts on each of the
// cluster's masters, each in a slot of its own.
func keysOnEveryMaster(t *testing.T, cluster *testserver.RedisCluster, st *redisstore.Store) []string {
	t.Helper()
	found := map[string]string{} // master's address: key
	for i := 0; len(found) < 3; i++ {
		key := fmt.Sprint("k", i)
		m := cluster.MasterOf(t, cluster.Slot(t, st.Key(key)))
		if _, ok := found[m.Addr]; !ok {
			found[m.Addr] = key
		}
	}
	var keys []string
	for _, key := range found {
		keys = append(keys, key)
	}
	return keys
}

// TestReleaseThroughAnotherStoreWakesTheWaiter has a waiter in one
// store's Limiter.Acquire, and a holder in another store, with a client
// of its own, release the one slot: the waiter gets it. Its poll and the
// lease's time to live are an hour, so only the release's notice can
// have woken it. On a single server, behind Sentinel and in a Cluster of
// three masters (on a key in a slot of each), for a lease and for a
// group's lease (a GCRA and the concurrency limit, on keys of one hash
// tag, released by GroupLease.Release).
func TestReleaseThroughAnotherStoreWakesTheWaiter(t *testing.T) {
	for _, dep := range deployments {
		t.Run(dep.name, func(t *testing.T) {
			client, keysOf := dep.start(t)
			stores := sharedStores(t, client(), client())
			observe, denied := leaseproc.Denials()
			holder, err := sluice.NewConcurrencyLimit(1, time.Hour, sluice.WithStore(stores[0]))
			require.NoError(t, err)
			waiter, err := sluice.NewConcurrencyLimit(1, time.Hour, sluice.WithStore(stores[1]),
				sluice.WithLeasePoll(time.Hour), observe)
			require.NoError(t, err)

			keys := keysOf(stores[0])
			for _, key := range keys {
				t.Run("Lease/"+key, func(t *testing.T) {
					ctx := t.Context()
					held, err := holder.TryAcquire(ctx, key, 1)
					require.NoError(t, err)
					require.True(t, held.Allowed)
					type acquired struct {
						lease sluice.Lease
						err   error
					}
					got := make(chan acquired, 1)
					go func() {
						ctx, cancel := context.WithTimeout(context.Background(), wakeTimeout)
						defer cancel()
						lease, err := waiter.Acquire(ctx, key, 1)
						got <- acquired{lease, err}
					}()
					require.Equal(t, key, receive(t, denied, "denial of the waiter"))
					require.Equal(t, key, receive(t, denied, "denial of the waiter, watching")) // Acquire watches once denied, and asks again
					require.NoError(t, held.Release(ctx))
					a := receive(t, got, "lease")
					require.NoError(t, a.err)
					require.True(t, a.lease.Allowed)
					require.NoError(t, a.lease.Release(ctx))
				})
			}

			t.Run("GroupLease", func(t *testing.T) {
				ctx := t.Context()
				groupOn := func(st *redisstore.Store, opts ...sluice.Option) *sluice.Group {
					rate, err := sluice.NewGCRA(sluice.PerSecond(1000), 1000, sluice.WithStore(st))
					require.NoError(t, err)
					conc, err := sluice.NewConcurrencyLimit(1, time.Hour,
						append([]sluice.Option{sluice.WithStore(st), sluice.WithLeasePoll(time.Hour)}, opts...)...)
					require.NoError(t, err)
					g, err := sluice.NewGroup(rate, conc)
					require.NoError(t, err)
					return g
				}
				holders, waiters := groupOn(stores[0]), groupOn(stores[1], observe)
				keys := []string{"{api:7}:rate", "{api:7}:running"}
				held, err := holders.TryAcquire(ctx, keys, 1)
				require.NoError(t, err)
				require.True(t, held.Allowed)
				type acquired struct {
					lease sluice.GroupLease
					err   error
				}
				got := make(chan acquired, 1)
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), wakeTimeout)
					defer cancel()
					lease, err := waiters.Acquire(ctx, keys, 1)
					got <- acquired{lease, err}
				}()
				require.Equal(t, keys[1], receive(t, denied, "denial of the waiter"))
				require.Equal(t, keys[1], receive(t, denied, "denial of the waiter, watching")) // Acquire watches once denied, and asks again
				require.NoError(t, held.Release(ctx))
				a := receive(t, got, "group lease")
				require.NoError(t, a.err)
				require.True(t, a.lease.Allowed)
				require.NoError(t, a.lease.Release(ctx))
			})
		})
	}
}

// release takes the one slot of key through st and releases it: a
// release, published to the key's waiters.
func release(t *testing.T, st *redisstore.Store, key string) {
	t.Helper()
	lim, err := sluice.NewConcurrencyLimit(1, time.Hour, sluice.WithStore(st))
	require.NoError(t, err)
	lease, err := lim.TryAcquire(t.Context(), key, 1)
	require.NoError(t, err)
	require.True(t, lease.Allowed)
	require.NoError(t, lease.Release(t.Context()))
}

// TestWatcherWhoseConnectionIsKilledIsWokenAndWakesAgain kills the
// subscriptions' connections (CLIENT KILL TYPE pubsub, from another
// client): the watcher is woken once go-redis has subscribed again,
// since releases may have gone untold, and a release made after that
// wakes it too.
func TestWatcherWhoseConnectionIsKilledIsWokenAndWakesAgain(t *testing.T) {
	addr := testserver.StartRedis(t).Addr
	stores := sharedStores(t, newClient(t, addr), newClient(t, addr))
	c := make(chan struct{}, 1)
	stop, err := stores[1].WatchReleases(t.Context(), "k", c)
	require.NoError(t, err)
	defer stop()

	killed, err := testserver.Do(addr, "CLIENT", "KILL", "TYPE", "pubsub")
	require.NoError(t, err)
	require.Equal(t, int64(1), killed, "the store's one subscription")
	receive(t, c, "wake-up after the connection was killed")
	require.Empty(t, c, "one wake-up")

	release(t, stores[0], "k")
	receive(t, c, "wake-up by a release on the new connection")
}

// TestWatchReleasesOnAClosedStoreReturnsErrStoreClosed pins Close: a
// watcher's stop still works after it, a new watch returns an error
// wrapping sluice.ErrStoreClosed, and so does a watch waiting for its
// confirmation when Close came.
func TestWatchReleasesOnAClosedStoreReturnsErrStoreClosed(t *testing.T) {
	addr := testserver.StartRedis(t).Addr
	st := newStore(t, newClient(t, addr))
	c := make(chan struct{}, 1)
	stop, err := st.WatchReleases(t.Context(), "k", c)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	stop()
	_, err = st.WatchReleases(t.Context(), "k", c)
	require.ErrorIs(t, err, sluice.ErrStoreClosed)
	require.NoError(t, st.Close(), "a second Close is harmless")

	// Decisions still run on the caller's client: a free slot is granted
	// without a watch; a full key needs one, and fails.
	lim, err := sluice.NewConcurrencyLimit(1, time.Hour, sluice.WithStore(st))
	require.NoError(t, err)
	held, err := lim.TryAcquire(t.Context(), "k", 1)
	require.NoError(t, err)
	require.True(t, held.Allowed)
	_, err = lim.Acquire(t.Context(), "k", 1)
	require.ErrorIs(t, err, sluice.ErrStoreClosed, "Acquire fails as its watch does")
}

// TestCloseWakesWatchersAndEndsEveryGoroutine watches keys in every slot
// of a Cluster's three masters, and closes the store: every watcher is
// woken once, so that none sleeps on a store that cannot wake it any
// more, and none of the store's goroutines outlives Close.
func TestCloseWakesWatchersAndEndsEveryGoroutine(t *testing.T) {
	cluster := testserver.StartRedisClusterWithReplicas(t)
	st := newStore(t, newClusterClient(t, cluster))
	keys := keysOnEveryMaster(t, cluster, st)
	var cs []chan struct{}
	for _, key := range keys {
		c := make(chan struct{}, 1)
		stop, err := st.WatchReleases(t.Context(), key, c)
		require.NoError(t, err)
		defer stop()
		cs = append(cs, c)
	}
	require.Positive(t, subscriptionGoroutines(st))
	require.NoError(t, st.Close())
	for i, c := range cs {
		require.Len(t, c, 1, "watcher of %s woken", keys[i])
	}
	require.Zero(t, subscriptionGoroutines(st), "goroutines left after Close")
}

// subscriptionGoroutines counts the goroutines running a subscription's
// loop for st: those whose call names st among its arguments, so that the
// stores of other tests, whose goroutines come and go as their servers
// stop, do not count.
func subscriptionGoroutines(st *redisstore.Store) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			count, self := 0, fmt.Sprintf("%p", st)
			for _, line := range strings.Split(string(buf[:n]), "\n") {
				if strings.Contains(line, "redisstore.(*releases).run(") && strings.Contains(line, self) {
					count++
				}
			}
			return count
		}
		buf = make([]byte, 2*len(buf))
	}
}

// shardSubscribers returns how many connections of the server at addr
// are subscribed to the sharded channel name.
func shardSubscribers(t *testing.T, addr, name string) int64 {
	t.Helper()
	reply, err := testserver.Do(addr, "PUBSUB", "SHARDNUMSUB", name)
	require.NoError(t, err)
	return reply.([]any)[1].(int64)
}

// pubsubConnections returns how many connections of the server at addr
// are in pub/sub mode.
func pubsubConnections(t *testing.T, addr string) int {
	t.Helper()
	reply, err := testserver.Do(addr, "CLIENT", "LIST", "TYPE", "pubsub")
	require.NoError(t, err)
	return strings.Count(reply.(string), "\n")
}

// TestWatchersShareSubscriptions pins how watchers share: on one server
// every key's channel is on the store's one connection, subscribed once
// however many watch it, and unsubscribed when its last watcher stops;
// the watchers that remain are still woken.
func TestWatchersShareSubscriptions(t *testing.T) {
	addr := testserver.StartRedis(t).Addr
	stores := sharedStores(t, newClient(t, addr), newClient(t, addr))
	st := stores[1]
	ctx := t.Context()
	watch := func(key string) (chan struct{}, func()) {
		c := make(chan struct{}, 1)
		stop, err := st.WatchReleases(ctx, key, c)
		require.NoError(t, err)
		return c, stop
	}
	var stops []func()
	var cs []chan struct{}
	for range 3 {
		c, stop := watch("k")
		cs, stops = append(cs, c), append(stops, stop)
	}
	j, stopJ := watch("j")
	defer stopJ()
	require.Equal(t, int64(1), shardSubscribers(t, addr, st.Key("k")))
	require.Equal(t, int64(1), shardSubscribers(t, addr, st.Key("j")))
	require.Equal(t, 1, pubsubConnections(t, addr), "one connection for the store")

	stops[0]()
	release(t, stores[0], "k")
	for _, c := range cs[1:] {
		receive(t, c, "wake-up of a remaining watcher")
	}
	require.Empty(t, cs[0], "a watcher that stopped is not woken")
	require.Empty(t, j, "the watcher of another key is not woken")

	stops[1]()
	stops[2]()
	// A watch made after the last stop is confirmed on the same
	// connection after the server has unsubscribed "k".
	_, stopL := watch("l")
	defer stopL()
	require.Zero(t, shardSubscribers(t, addr, st.Key("k")), "unsubscribed with its last watcher")
	require.Equal(t, int64(1), shardSubscribers(t, addr, st.Key("j")))
	require.Equal(t, 1, pubsubConnections(t, addr))
}

// TestClusterSubscribesOncePerSlot pins the sharing in a Cluster: keys
// of one hash tag, one slot, share a connection to its master; keys in
// the slots of three masters take one connection each, to the master
// that serves it.
func TestClusterSubscribesOncePerSlot(t *testing.T) {
	cluster := testserver.StartRedisClusterWithReplicas(t)
	st := newStore(t, newClusterClient(t, cluster))
	watch := func(key string) {
		stop, err := st.WatchReleases(t.Context(), key, make(chan struct{}, 1))
		require.NoError(t, err)
		t.Cleanup(stop)
	}
	connections := func() (n int) {
		for _, node := range cluster.Nodes {
			n += pubsubConnections(t, node.Addr)
		}
		return n
	}
	for _, key := range []string{"{api:7}:second", "{api:7}:day", "{api:7}:running"} {
		watch(key)
	}
	require.Equal(t, 1, connections(), "one slot, one connection")
	keys := keysOnEveryMaster(t, cluster, st)
	for _, key := range keys {
		watch(key)
	}
	require.Equal(t, 1+len(keys), connections(), "one connection per slot")
	for _, key := range keys {
		master := cluster.MasterOf(t, cluster.Slot(t, st.Key(key)))
		require.Equal(t, int64(1), shardSubscribers(t, master.Addr, st.Key(key)), "%s subscribed on its master", key)
	}
}

// TestWatchReleasesFailsWhileRedisIsDown pins what a waiter gets while
// the server is down: WatchReleases returns the connection's error, not
// its context's, and so does Acquire; once the server is back, watches
// succeed again.
func TestWatchReleasesFailsWhileRedisIsDown(t *testing.T) {
	srv := testserver.StartRedis(t)
	st := newStore(t, newClient(t, srv.Addr))
	ctx, cancel := context.WithTimeout(t.Context(), wakeTimeout)
	defer cancel()
	stop, err := st.WatchReleases(ctx, "k", make(chan struct{}, 1))
	require.NoError(t, err)
	stop()

	srv.Stop(t)
	_, err = st.WatchReleases(ctx, "j", make(chan struct{}, 1))
	require.Error(t, err)
	require.NoError(t, ctx.Err(), "the error came before the context's end: %v", err)
	lim, err := sluice.NewConcurrencyLimit(1, time.Hour, sluice.WithStore(st))
	require.NoError(t, err)
	_, err = lim.Acquire(ctx, "j", 1)
	require.Error(t, err)
	require.NoError(t, ctx.Err(), "Acquire failed before the context's end: %v", err)

	srv.Start(t)
	stop, err = st.WatchReleases(ctx, "j", make(chan struct{}, 1))
	require.NoError(t, err)
	stop()
}

// TestResetWakesTheWaiters pins that a reset through another store, which
// frees every slot of the key, wakes its watchers as a release does.
func TestResetWakesTheWaiters(t *testing.T) {
	addr := testserver.StartRedis(t).Addr
	stores := sharedStores(t, newClient(t, addr), newClient(t, addr))
	c := make(chan struct{}, 1)
	stop, err := stores[1].WatchReleases(t.Context(), "k", c)
	require.NoError(t, err)
	defer stop()
	require.NoError(t, stores[0].Reset(t.Context(), "k"))
	receive(t, c, "wake-up by a reset")
}
