package redisstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/redisstore"
)

// monthly is a token bucket of 10 requests in 30 days: nothing measurable
// refills while a test runs, however long a loaded machine takes over its
// pauses, waits and failovers (a hundredth of a request in 43 minutes).
var monthly = engine.Params{Kind: engine.KindTokenBucket, Limit: 10, Interval: int64(30 * 24 * time.Hour), Amount: 10}

// ackTimeout is how long the tests' stores wait for a replica's
// acknowledgement when one is expected: a replica on the same machine
// acknowledges within a millisecond when the machine is idle, and this
// allows for a loaded one, where a process can wait 100 ms and more for a
// core. A decision whose replica is paused waits all of it, which is why
// it is not longer.
const ackTimeout = time.Second

// TestReplicaAcksCountTheReplicasOfTheKeysMaster pauses the replica of
// one master of a Cluster: decisions on that master's keys are recorded
// but not acknowledged, while those on the other masters' keys are. A WAIT
// sent on any other connection than the one that ran the script would
// count another master's replica, or none of this connection's writes.
func TestReplicaAcksCountTheReplicasOfTheKeysMaster(t *testing.T) {
	cluster := testserver.StartRedisClusterWithReplicas(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	st := newStore(t, c, redisstore.WithReplicaAcks(1, ackTimeout))

	// Five keys on each master.
	keysOf := map[*testserver.Redis][]string{}
	for i := 0; len(keysOf) < 3 || minLen(keysOf) < 5; i++ {
		key := fmt.Sprint("k", i)
		m := cluster.MasterOf(t, cluster.Slot(t, st.Key(key)))
		keysOf[m] = append(keysOf[m], key)
	}
	paused := cluster.Nodes[0]
	replica := cluster.ReplicaOf(t, paused)
	require.NotNil(t, replica)

	// The Cluster client's first script call fetches COMMAND's table from
	// a node it picks, which may be the replica about to be paused: that
	// would cost 5 s each time. Have it fetched now, by a check, which
	// records nothing.
	_, err := st.Apply(t.Context(), keysOf[paused][0], &monthly, engine.Op{Verb: engine.VerbCheck, Cost: 1})
	require.NoError(t, err)

	replica.Pause(t)
	for _, m := range cluster.Nodes[:3] {
		for _, key := range keysOf[m][:5] {
			d, err := st.Apply(t.Context(), key, &monthly, engine.Op{Verb: engine.VerbAllow, Cost: 1})
			require.True(t, d.Allowed, "the master decided")
			require.Equal(t, 9.0, d.Remaining)
			if m == paused {
				require.ErrorIs(t, err, redisstore.ErrNotReplicated, "key %s on the paused replica's master", key)
				require.ErrorContains(t, err, fmt.Sprintf("0 of 1 replicas acknowledged within %v", ackTimeout))
			} else {
				require.NoError(t, err, "key %s on another master", key)
			}
			// A check records nothing, and waits for nothing.
			d, err = st.Apply(t.Context(), key, &monthly, engine.Op{Verb: engine.VerbCheck, Cost: 1})
			require.NoError(t, err)
			require.InDelta(t, 2, d.Used, 0.05, "the decision was recorded on the master: one used, one checked")
		}
	}

	// A batch: each master's part is followed by its own WAIT.
	var reqs []redisstore.Request
	for _, m := range cluster.Nodes[:3] {
		for _, key := range keysOf[m][:5] {
			reqs = append(reqs, redisstore.Request{Key: key, Params: &monthly, Op: engine.Op{Verb: engine.VerbAllow, Cost: 1}})
		}
	}
	reqs = append(reqs, redisstore.Request{Key: keysOf[paused][0], Params: &monthly, Op: engine.Op{Verb: engine.VerbCheck, Cost: 1}})
	results := st.ApplyBatch(t.Context(), reqs)
	for i, r := range results[:15] {
		require.True(t, r.Decision.Allowed)
		require.InDelta(t, 8, r.Decision.Remaining, 0.01, "the second request on %s", reqs[i].Key)
		if i < 5 == (cluster.Nodes[0] == paused) {
			require.ErrorIs(t, r.Err, redisstore.ErrNotReplicated, "key %s on the paused replica's master", reqs[i].Key)
		} else {
			require.NoError(t, r.Err, "key %s on another master", reqs[i].Key)
		}
	}
	require.NoError(t, results[15].Err, "a check waits for nothing")

	replica.Resume(t)
	for _, key := range keysOf[paused][:5] {
		d, err := st.Apply(t.Context(), key, &monthly, engine.Op{Verb: engine.VerbAllow, Cost: 1})
		require.NoError(t, err, "the replica is back")
		require.InDelta(t, 7, d.Remaining, 0.01)
	}
}

func minLen(m map[*testserver.Redis][]string) int {
	n := -1
	for _, keys := range m {
		if n < 0 || len(keys) < n {
			n = len(keys)
		}
	}
	return n
}

// TestReplicaAcksOnOneMaster waits for the replicas of a single master,
// through a plain client: an admission the replica holds comes without an
// error, and one that fewer replicas than asked acknowledge (the replica
// paused, or two asked of one) comes with ErrNotReplicated, recorded all
// the same. It also pins that a denial, which records nothing, comes
// without an error however many replicas acknowledge, alone, in a batch
// and as a group, while a group denied by a limit whose penalty it
// records comes with ErrNotReplicated.
func TestReplicaAcksOnOneMaster(t *testing.T) {
	nodes := testserver.StartRedisWithReplicas(t, 1)
	c := newClient(t, nodes[0].Addr)
	allow := engine.Op{Verb: engine.VerbAllow, Cost: 1}

	st := newStore(t, c, redisstore.WithReplicaAcks(1, ackTimeout))
	d, err := st.Apply(t.Context(), "a", &monthly, allow)
	require.NoError(t, err)
	require.True(t, d.Allowed)
	require.Equal(t, "1", replicaGet(t, nodes[1], st.Key("a")), "the replica has the state")

	nodes[1].Pause(t)
	d, err = st.Apply(t.Context(), "a", &monthly, allow)
	require.ErrorIs(t, err, redisstore.ErrNotReplicated)
	require.True(t, d.Allowed, "the decision is returned with the error")
	require.InDelta(t, 2, d.Used, 0.01, "and was recorded")
	nodes[1].Resume(t)

	// Two replicas asked of a master that has one: the one acknowledges in
	// the time a loaded machine may need, and the decision waits all of it.
	_, err = newStore(t, c, redisstore.WithReplicaAcks(2, ackTimeout)).Apply(t.Context(), "b", &monthly, allow)
	require.ErrorIs(t, err, redisstore.ErrNotReplicated)
	require.ErrorContains(t, err, fmt.Sprintf("1 of 2 replicas acknowledged within %v", ackTimeout))

	// A denial records nothing: it has nothing a failover could lose, and
	// comes without an error however many replicas acknowledge. Two never
	// do here, so a millisecond of waiting is as good as any.
	two := newStore(t, c, redisstore.WithReplicaAcks(2, time.Millisecond))
	all := engine.Op{Verb: engine.VerbAllow, Cost: monthly.Limit}
	_, err = two.Apply(t.Context(), "c", &monthly, all)
	require.ErrorIs(t, err, redisstore.ErrNotReplicated, "the whole limit, admitted")
	d, err = two.Apply(t.Context(), "c", &monthly, allow)
	require.NoError(t, err, "a denial")
	require.False(t, d.Allowed)
	results := two.ApplyBatch(t.Context(), []redisstore.Request{{Key: "c", Params: &monthly, Op: allow}})
	require.NoError(t, results[0].Err, "a denial in a batch")
	require.False(t, results[0].Decision.Allowed)
	gd, err := two.ApplyGroup(t.Context(), []engine.GroupOp{{Key: "c", Params: &monthly, Op: allow}, {Key: "e", Params: &monthly, Op: allow}}, make([]engine.Decision, 2))
	require.NoError(t, err, "a group denied, which records on none of its keys")
	require.False(t, gd.Allowed)

	penalized := monthly
	penalized.Penalty = int64(time.Minute)
	_, err = two.Apply(t.Context(), "f", &penalized, all)
	require.ErrorIs(t, err, redisstore.ErrNotReplicated)
	gd, err = two.ApplyGroup(t.Context(), []engine.GroupOp{{Key: "f", Params: &penalized, Op: allow}, {Key: "g", Params: &monthly, Op: allow}}, make([]engine.Decision, 2))
	require.ErrorIs(t, err, redisstore.ErrNotReplicated, "a group denied by a limit whose penalty it records")
	require.True(t, gd.Blocked)
}

// TestReplicaAcksCoverReservationsCancelsAndGrants waits for the replica
// after a reservation, the cancel that gives it back and a partial grant,
// which record as an admission does, alone and in a batch: acknowledged,
// the replica holds the master's state; unacknowledged, the decision comes
// with ErrNotReplicated.
func TestReplicaAcksCoverReservationsCancelsAndGrants(t *testing.T) {
	nodes := testserver.StartRedisWithReplicas(t, 1)
	c := newClient(t, nodes[0].Addr)
	st := newStore(t, c, redisstore.WithReplicaAcks(1, ackTimeout))
	ctx := t.Context()
	p := engine.Params{Kind: engine.KindGCRA, Limit: 1, Interval: int64(time.Hour)}
	reserve := engine.Op{Verb: engine.VerbReserve, Cost: 1, MaxDelay: int64(10 * time.Hour)}
	cancel := func(d engine.Decision) engine.Op { return engine.Op{Verb: engine.VerbCancel, Cost: 1, At: d.At} }
	grant := engine.Op{Verb: engine.VerbAtMost, Cost: 3}
	requireReplicated := func(key string) {
		t.Helper()
		want, err := c.Get(ctx, st.Key(key)).Result()
		require.NoError(t, err)
		got, err := testserver.Do(nodes[1].Addr, "GET", st.Key(key))
		require.NoError(t, err)
		require.Equal(t, want, got, "the replica holds the master's state of %s", key)
	}

	_, err := st.Apply(ctx, "r", &p, reserve)
	require.NoError(t, err)
	booked, err := st.Apply(ctx, "r", &p, reserve)
	require.NoError(t, err)
	require.Positive(t, booked.Delay)
	requireReplicated("r")

	nodes[1].Pause(t)
	later, err := st.Apply(ctx, "r", &p, reserve)
	require.ErrorIs(t, err, redisstore.ErrNotReplicated, "a booking")
	require.True(t, later.Allowed, "booked on the master all the same")
	d, err := st.Apply(ctx, "r", &p, cancel(later))
	require.ErrorIs(t, err, redisstore.ErrNotReplicated, "a cancel")
	require.True(t, d.Allowed, "given back on the master all the same")
	d, err = st.Apply(ctx, "g", &p, grant)
	require.ErrorIs(t, err, redisstore.ErrNotReplicated, "a partial grant")
	require.Equal(t, 1.0, d.Granted)
	nodes[1].Resume(t)

	last, err := st.Apply(ctx, "r", &p, reserve)
	require.NoError(t, err, "the replica is back")
	d, err = st.Apply(ctx, "r", &p, cancel(last))
	require.NoError(t, err)
	require.True(t, d.Allowed, "the key's latest booking is given back")
	requireReplicated("r")

	results := st.ApplyBatch(ctx, []redisstore.Request{
		{Key: "b", Params: &p, Op: reserve},
		{Key: "b", Params: &p, Op: reserve},
		{Key: "h", Params: &p, Op: grant},
	})
	for i, r := range results {
		require.NoError(t, r.Err, "request %d", i)
		require.True(t, r.Decision.Allowed, "request %d", i)
	}
	require.Positive(t, results[1].Decision.Delay)
	requireReplicated("b")
	requireReplicated("h")
}

// replicaGet returns "1" if the replica holds name, "0" otherwise.
func replicaGet(t *testing.T, replica *testserver.Redis, name string) string {
	t.Helper()
	reply, err := testserver.Do(replica.Addr, "EXISTS", name)
	require.NoError(t, err)
	return fmt.Sprint(reply)
}

// TestReplicaAcksRejectsWhatCannotWork refuses options no client can
// honour, and ones the client's read timeout would cut short.
func TestReplicaAcksRejectsWhatCannotWork(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: time.Second})
	t.Cleanup(func() { c.Close() })
	for _, tc := range []struct {
		name    string
		n       int
		timeout time.Duration
	}{
		{"NoReplica", 0, time.Second / 2},
		{"NegativeReplicas", -1, time.Second / 2},
		{"ZeroTimeout", 1, 0},
		{"NegativeTimeout", 1, -time.Second},
		{"NotBelowReadTimeout", 1, time.Second},
		{"Overflow", 1, 1<<63 - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := redisstore.New(c, redisstore.WithReplicaAcks(tc.n, tc.timeout))
			require.ErrorIs(t, err, sluice.ErrInvalidConfig)
		})
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	t.Cleanup(func() { ring.Close() })
	_, err := redisstore.New(ring, redisstore.WithReplicaAcks(1, time.Millisecond))
	require.ErrorIs(t, err, sluice.ErrUnsupported)
}

// TestReplicaAcksFollowAManualFailover promotes a key's replica with
// CLUSTER FAILOVER TAKEOVER, which the client does not see: the old master answers
// MOVED, and the store reloads the layout and decides on the new master,
// where it loads its script, without an error and without losing a
// decision. Then the same for a batch, after a failover back.
func TestReplicaAcksFollowAManualFailover(t *testing.T) {
	cluster := testserver.StartRedisClusterWithReplicas(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	st := newStore(t, c, redisstore.WithReplicaAcks(1, ackTimeout))
	allow := engine.Op{Verb: engine.VerbAllow, Cost: 1}
	slot := cluster.Slot(t, st.Key("k"))

	promote := func(replica *testserver.Redis) {
		t.Helper()
		old := cluster.MasterOf(t, slot)
		// TAKEOVER: the masters would not vote again for this shard
		// within twice the node timeout, and every decision so far is
		// acknowledged, so nothing is lost without the handshake.
		reply, err := testserver.Do(replica.Addr, "CLUSTER", "FAILOVER", "TAKEOVER")
		require.NoError(t, err)
		require.Equal(t, "OK", reply)
		require.Equal(t, replica.Addr, cluster.WaitForFailover(t, slot, old).Addr)
		testserver.WaitForSync(t, replica, old) // the old master follows the new one
	}

	d, err := st.Apply(t.Context(), "k", &monthly, allow)
	require.NoError(t, err)
	require.InDelta(t, 9, d.Remaining, 0.01)

	first := cluster.MasterOf(t, slot)
	promote(cluster.ReplicaOf(t, first))
	d, err = st.Apply(t.Context(), "k", &monthly, allow)
	require.NoError(t, err)
	require.InDelta(t, 8, d.Remaining, 0.01, "the new master has the first decision")

	promote(first)
	results := st.ApplyBatch(t.Context(), []redisstore.Request{{Key: "k", Params: &monthly, Op: allow}})
	require.NoError(t, results[0].Err)
	require.InDelta(t, 7, results[0].Decision.Remaining, 0.01)
}
