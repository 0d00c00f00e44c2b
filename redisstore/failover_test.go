package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/redisstore"
)

// Failover tests run decisions under load in real time, kill a master
// with SIGKILL, and require decisions to succeed again soon after a
// replica has taken over and no key to admit more than its limit, plus
// what the replication window can lose.
const (
	// failoverKeys keys, each allowed failoverLimit requests an hour, are
	// decided in turn by failoverWorkers goroutines: with about a second
	// of load before the kill, keys are still being admitted when the
	// master dies, and again after the failover.
	failoverKeys    = 600
	failoverLimit   = 50
	failoverWorkers = 8

	// replicationWindow bounds how long an admission may go unreplicated
	// in these tests: replicas on the same machine are a few milliseconds
	// behind their master at most, and this allows for a loaded machine.
	// An admission lost with the master can be admitted again after the
	// failover; with WithReplicaAcks none is lost.
	replicationWindow = 250 * time.Millisecond

	// recovered is how long decisions must succeed, none failing or
	// slow, after the kill for the store to count as recovered.
	recovered = time.Second

	// followed bounds how long after the failover (a new master serving,
	// as every node or Sentinel sees it) decisions may go on failing: the
	// client's reload, asked for within 100 ms of a failure, and decisions
	// in flight, which may still fail at their 2 s deadline, on a loaded
	// machine. How long the failover itself takes is the cluster's or the
	// Sentinels' business, which a loaded machine slows down; without the
	// store's reload, a Cluster client would follow only at its periodic
	// reload of the slots, every 60 s.
	followed = 5 * time.Second

	// slow is how long a decision may take before it counts as disrupted:
	// one that waits for a dead server has not recovered either.
	slow = 500 * time.Millisecond
)

// failoverFigures are what a failover test measured.
type failoverFigures struct {
	errors   int           // decisions that failed after the kill
	slow     int           // decisions that took longer than slow
	recovery time.Duration // from the kill to the end of the last failed or slow decision
	failover time.Duration // from the kill to the new master serving
	extra    int           // admissions beyond the keys' limits, in all
	unacked  int           // decisions that replicas did not acknowledge
	after    time.Duration // from the kill to the end of the load
}

func (f failoverFigures) String() string {
	return fmt.Sprintf("%d failed and %d slow decisions, the last ending %v after the kill (the new master serving after %v); %d admissions beyond the limits; %d decisions not acknowledged",
		f.errors, f.slow, f.recovery.Round(time.Millisecond), f.failover.Round(time.Millisecond), f.extra, f.unacked)
}

// An admission is one admitted request on key, and when its decision
// returned.
type admission struct {
	key int
	at  time.Time
}

// decideThroughFailover decides requests of cost 1 on failoverKeys keys
// from failoverWorkers goroutines, calls kill (which returns when the
// master is dead) after a second of load, then failover (which returns
// once a new master serves), and goes on until decisions have succeeded
// for the time recovered, or until followed after the failover. It
// requires decisions to fail no later than followed after the failover,
// and every key to admit at most its limit plus its admissions
// within replicationWindow of the kill, which the master may have taken
// with it; when acked, the store waits for replicas, and a key admits at
// most its limit in decisions returned without an error. A decision that
// fails with ErrNotReplicated was made, and counts as a success for the
// recovery, but not as an admission.
func decideThroughFailover(t *testing.T, st *redisstore.Store, kill, failover func(), acked bool) failoverFigures {
	lim, err := sluice.NewTokenBucket(sluice.Per(failoverLimit, time.Hour), failoverLimit, sluice.WithStore(st))
	require.NoError(t, err)
	keys := make([]string, failoverKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%d", i)
	}

	var (
		next     atomic.Uint64
		killed   atomic.Bool
		mu       sync.Mutex // guards what follows
		lastErr  time.Time  // the end of the last failed or slow decision
		errs     int
		slows    int
		okSince  int // decisions that succeeded since lastErr
		unacked  int // decisions that failed with ErrNotReplicated
		lastMsg  string
		firstErr error
		admitted []admission
		wg       sync.WaitGroup
	)
	start := time.Now()
	stop := make(chan struct{})
	// A failed requirement must not leave the load running, nor the
	// workers blocked on mu, against servers the test's end stops.
	stopLoad := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopLoad()
	for range failoverWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []admission
			defer func() {
				mu.Lock()
				admitted = append(admitted, mine...)
				mu.Unlock()
			}()
			for {
				select {
				case <-stop:
					return
				default:
				}
				k := int(next.Add(1) % failoverKeys)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				began := time.Now()
				d, err := lim.Allow(ctx, keys[k], 1)
				cancel()
				now := time.Now()
				if d.Allowed && err == nil {
					mine = append(mine, admission{k, now})
				}
				mu.Lock()
				switch {
				case err != nil && !errors.Is(err, redisstore.ErrNotReplicated):
					if !killed.Load() && firstErr == nil {
						firstErr = err
					}
					errs++
					lastErr, okSince, lastMsg = now, 0, err.Error()
				case now.Sub(began) > slow:
					slows++
					lastErr, okSince = now, 0
				default:
					// A decision that replicas did not acknowledge was
					// made: the store works.
					if err != nil {
						unacked++
					}
					okSince++
				}
				mu.Unlock()
			}
		}()
	}

	time.Sleep(time.Second) // load before the kill
	mu.Lock()
	errsBefore, slowsBefore, errBefore := errs, slows, firstErr
	mu.Unlock()
	require.NoError(t, errBefore, "a decision failed before the kill")
	killStart := time.Now()
	kill()
	killEnd := time.Now()
	killed.Store(true)
	failover()
	failedOver := time.Now()
	for {
		time.Sleep(10 * time.Millisecond)
		mu.Lock()
		last, ok := lastErr, okSince
		mu.Unlock()
		if last.Before(killEnd) {
			last = killEnd
		}
		// Every key decided without failing, and for a while.
		if time.Since(last) >= recovered && ok >= failoverKeys || time.Since(failedOver) > followed+recovered {
			break
		}
	}
	stopLoad()
	elapsed := time.Since(start)

	f := failoverFigures{errors: errs - errsBefore, slow: slows - slowsBefore, unacked: unacked,
		failover: failedOver.Sub(killEnd), after: time.Since(killEnd)}
	if lastErr.After(killEnd) {
		f.recovery = lastErr.Sub(killEnd)
	}
	// A key admits at most its burst plus what refills while the test
	// runs, plus what the master admitted without replicating.
	refill := int(failoverLimit * elapsed.Hours())
	counts := make([]int, failoverKeys)
	window := make([]int, failoverKeys)
	for _, a := range admitted {
		counts[a.key]++
		if a.at.After(killStart.Add(-replicationWindow)) && a.at.Before(killEnd.Add(replicationWindow)) {
			window[a.key]++
		}
	}
	for k, n := range counts {
		extra := n - failoverLimit - refill
		if extra > 0 {
			f.extra += extra
		}
		if acked {
			window[k] = 0
		}
		require.LessOrEqual(t, extra, window[k],
			"key %d admitted %d requests, %d within %v of the kill", k, n, window[k], replicationWindow)
	}
	t.Logf("last error: %s", lastMsg)
	t.Logf("%v (%d admissions, %d within %v of the kill, load for %v)",
		f, len(admitted), sum(window), replicationWindow, elapsed.Round(time.Millisecond))
	require.LessOrEqual(t, f.recovery, f.failover+followed, "decisions failed for longer than %v after the failover: %v", followed, f)
	return f
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// TestClusterRecoversFromAKilledMaster kills one of three masters under
// load, through the Cluster client the README shows: decisions on the
// dead master's slots fail until its replica takes over (after
// ClusterNodeTimeout and an election), and succeed again within a few
// seconds of that, not at go-redis's next periodic reload of the slots
// (every 60 s by default).
func TestClusterRecoversFromAKilledMaster(t *testing.T) {
	cluster := testserver.StartRedisClusterWithReplicas(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	st := newStore(t, c)

	var master *testserver.Redis
	var reloadsBefore int
	f := decideThroughFailover(t, st, func() {
		reloadsBefore = slotsCalls(t, cluster)
		master = cluster.MasterOf(t, 0)
		master.Stop(t)
	}, func() { cluster.WaitForFailover(t, 0, master) }, false)
	requireFewReloads(t, cluster, reloadsBefore, f)
}

// requireFewReloads requires the failing decisions to have asked for
// reloads at most ten times a second since the kill, however many they
// were: each reload is one CLUSTER SLOTS on a live node (or a refused
// connection to the dead one).
func requireFewReloads(t *testing.T, cluster *testserver.RedisCluster, before int, f failoverFigures) {
	t.Helper()
	reloads := slotsCalls(t, cluster) - before
	t.Logf("%d CLUSTER SLOTS calls in the %v after the kill", reloads, f.after.Round(time.Millisecond))
	require.LessOrEqual(t, reloads, int(10*f.after.Seconds())+2)
}

// slotsCalls returns how many CLUSTER SLOTS calls the running nodes of
// cluster have served.
func slotsCalls(t *testing.T, cluster *testserver.RedisCluster) int {
	t.Helper()
	n := 0
	for _, node := range cluster.Nodes {
		reply, err := testserver.Do(node.Addr, "INFO", "commandstats")
		if err != nil {
			continue // the dead node
		}
		_, stat, ok := strings.Cut(reply.(string), "cmdstat_cluster|slots:calls=")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(stat, ",")
		c, err := strconv.Atoi(calls)
		require.NoError(t, err)
		n += c
	}
	return n
}

// TestSentinelRecoversFromAKilledMaster is the same through a Sentinel
// client: go-redis asks the Sentinels for the new master.
func TestSentinelRecoversFromAKilledMaster(t *testing.T) {
	s := testserver.StartRedisSentinel(t, 2)
	c := redis.NewUniversalClient(&redis.UniversalOptions{
		MasterName:            s.MasterName,
		Addrs:                 s.SentinelAddrs(),
		ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { c.Close() })
	st := newStore(t, c)

	var master *testserver.Redis
	decideThroughFailover(t, st, func() {
		master = s.Master(t)
		master.Stop(t)
	}, func() { s.WaitForFailover(t, master) }, false)
}

// TestClusterWithReplicaAcksLosesNoAdmission kills a master under load
// with WithReplicaAcks: no key admits more than its limit in decisions
// returned without an error. The promoted replica has no replica of its
// own, so decisions on its slots are then made but not acknowledged.
func TestClusterWithReplicaAcksLosesNoAdmission(t *testing.T) {
	cluster := testserver.StartRedisClusterWithReplicas(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	// A short timeout: the promoted replica has no replica of its own,
	// and each decision on it waits for the whole timeout.
	st := newStore(t, c, redisstore.WithReplicaAcks(1, 50*time.Millisecond))

	var master *testserver.Redis
	var reloadsBefore int
	f := decideThroughFailover(t, st, func() {
		reloadsBefore = slotsCalls(t, cluster)
		master = cluster.MasterOf(t, 0)
		master.Stop(t)
	}, func() { cluster.WaitForFailover(t, 0, master) }, true)
	requireFewReloads(t, cluster, reloadsBefore, f)
	require.Positive(t, f.unacked, "the new master has no replica to acknowledge")
}

// TestSentinelWithReplicaAcksLosesNoAdmission is the same through
// Sentinel, where the other replica follows the new master.
func TestSentinelWithReplicaAcksLosesNoAdmission(t *testing.T) {
	s := testserver.StartRedisSentinel(t, 2)
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:            s.MasterName,
		SentinelAddrs:         s.SentinelAddrs(),
		ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { c.Close() })
	st := newStore(t, c, redisstore.WithReplicaAcks(1, 50*time.Millisecond))

	var master *testserver.Redis
	decideThroughFailover(t, st, func() {
		master = s.Master(t)
		master.Stop(t)
	}, func() { s.WaitForFailover(t, master) }, true)
}

// TestFailoverLosesWhatWasNotReplicated shows the window of loss: the
// link between a master and its replica is cut (the replica paused, its
// connection killed), decisions go on on the master alone, and then the
// master dies and the replica takes over. Without WithReplicaAcks, each
// key admits again exactly the requests the replica never received; with
// it, those decisions had returned ErrNotReplicated, and every decision
// returned without an error survived.
func TestFailoverLosesWhatWasNotReplicated(t *testing.T) {
	cluster := testserver.StartRedisClusterWithReplicas(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	plain := newStore(t, c)
	// The acknowledged keys are decided by two stores on one prefix: acked
	// waits for the replica, while it is linked, as long as a loaded machine
	// may need; hasty gives up after 5 ms where no replica can answer (cut
	// off, then none after the failover), rather than have each of those
	// decisions wait all of ackTimeout.
	prefix := fmt.Sprintf("test:%s:%d:", t.Name(), rand.Uint64())
	acked, err := redisstore.New(c, redisstore.WithPrefix(prefix), redisstore.WithReplicaAcks(1, ackTimeout))
	require.NoError(t, err)
	hasty, err := redisstore.New(c, redisstore.WithPrefix(prefix), redisstore.WithReplicaAcks(1, 5*time.Millisecond))
	require.NoError(t, err)
	master := cluster.MasterOf(t, 0)
	replica := cluster.ReplicaOf(t, master)
	require.NotNil(t, replica)

	// Five keys of each store on that master, and one more of plain's.
	const perStore, before, during = 5, 3, 4
	keysOn := func(st *redisstore.Store, n int) []string {
		var keys []string
		for i := 0; len(keys) < n; i++ {
			key := fmt.Sprint("k", i)
			if cluster.MasterOf(t, cluster.Slot(t, st.Key(key))) == master {
				keys = append(keys, key)
			}
		}
		return keys
	}
	plainKeys, ackedKeys := keysOn(plain, perStore+1), keysOn(acked, perStore)
	spare := plainKeys[perStore]
	plainKeys = plainKeys[:perStore]
	allow := engine.Op{Verb: engine.VerbAllow, Cost: 1}
	// A loaded machine may take many seconds over the failover, and no key
	// may refill measurably meanwhile.
	decide := func(st *redisstore.Store, key string) (engine.Decision, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		return st.Apply(ctx, key, &monthly, allow)
	}

	for range before { // replicated
		for _, key := range plainKeys {
			_, err := decide(plain, key)
			require.NoError(t, err)
		}
		for _, key := range ackedKeys {
			_, err := decide(acked, key)
			require.NoError(t, err)
		}
	}
	replica.Pause(t)
	_, err = testserver.Do(master.Addr, "CLIENT", "KILL", "TYPE", "replica")
	require.NoError(t, err)
	for range during { // on the master alone
		for _, key := range plainKeys {
			d, err := decide(plain, key)
			require.NoError(t, err)
			require.True(t, d.Allowed)
		}
		for _, key := range ackedKeys {
			d, err := decide(hasty, key)
			require.ErrorIs(t, err, redisstore.ErrNotReplicated)
			require.True(t, d.Allowed, "decided on the master all the same")
		}
	}
	master.Stop(t)
	replica.Resume(t)
	require.Equal(t, replica.Addr, cluster.WaitForFailover(t, 0, master).Addr)

	// The client learns the new layout from the first failed decisions.
	for deadline := time.Now().Add(5 * time.Second); ; {
		_, err := decide(plain, spare)
		if err == nil || time.Now().After(deadline) {
			require.NoError(t, err)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}

	// The replica has the decisions made before the link was cut, and none
	// of those made after.
	for _, tc := range []struct {
		st   *redisstore.Store
		keys []string
	}{{plain, plainKeys}, {hasty, ackedKeys}} {
		for _, key := range tc.keys {
			d, err := decide(tc.st, key)
			if tc.st == hasty {
				require.ErrorIs(t, err, redisstore.ErrNotReplicated, "the new master has no replica")
			} else {
				require.NoError(t, err)
			}
			require.InDelta(t, monthly.Limit-before-1, d.Remaining, 0.05,
				"key %s: the %d decisions on the master alone are lost", key, during)
		}
	}
}
