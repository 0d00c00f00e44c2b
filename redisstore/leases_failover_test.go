package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/leaseproc"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/redisstore"
)

// The leases through a failover: failoverLeaseKeys keys of a limit of
// failoverLeaseLimit on the master that is killed, taken in turn by
// failoverChurners goroutines per key before the kill and after the
// failover, failoverRounds leases each, and failoverLoadKeys more keys on
// that master taken and released throughout, the kill included.
const (
	failoverLeaseKeys  = 3
	failoverLeaseLimit = 3
	failoverChurners   = 4
	failoverRounds     = 10
	failoverLoadKeys   = 2
	failoverWork       = 2 * time.Millisecond
)

// holds records the holds of leases, by key, as their holders see them.
type holds struct {
	mu    sync.Mutex
	byKey map[string][]leaseproc.Interval
}

func (h *holds) add(key string, iv leaseproc.Interval) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byKey == nil {
		h.byKey = make(map[string][]leaseproc.Interval)
	}
	h.byKey[key] = append(h.byKey[key], iv)
}

// churn has goroutines goroutines per key take rounds leases each in
// turn, Acquire, work, Release, and records each hold; it returns the
// first error.
func churn(lim *sluice.Limiter, keys []string, goroutines, rounds int, rec *holds) error {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for _, key := range keys {
		for range goroutines {
			wg.Go(func() {
				for range rounds {
					ctx, cancel := context.WithTimeout(context.Background(), wakeTimeout)
					lease, err := lim.Acquire(ctx, key, 1)
					if err == nil {
						start := time.Now().UnixNano()
						time.Sleep(failoverWork)
						rec.add(key, leaseproc.Interval{Start: start, End: time.Now().UnixNano()})
						err = lease.Release(ctx)
					}
					cancel()
					if err != nil {
						mu.Lock()
						firstErr = cmpOr(firstErr, fmt.Errorf("key %s: %w", key, err))
						mu.Unlock()
						return
					}
				}
			})
		}
	}
	wg.Wait()
	return firstErr
}

// cmpOr returns err if it is not nil, and else other.
func cmpOr(err, other error) error {
	if err != nil {
		return err
	}
	return other
}

// keysServedBy returns n keys whose Redis names st puts on master.
func keysServedBy(t *testing.T, cluster *testserver.RedisCluster, st *redisstore.Store, master *testserver.Redis, n int) []string {
	t.Helper()
	var keys []string
	for i := 0; len(keys) < n; i++ {
		key := fmt.Sprint("lease", i)
		if cluster.MasterOf(t, cluster.Slot(t, st.Key(key))) == master {
			keys = append(keys, key)
		}
	}
	return keys
}

// TestLeasesThroughAKilledClusterMaster kills, under load, the master of
// a Cluster that serves the keys of a concurrency limit, and counts the
// leases held at once on each key as their holders see them. The window
// of loss is made, not raced for: holders churn leases while the replica
// is linked, then one lease per key is taken and kept ("long" holders)
// and WAIT makes sure that the replica has it all; then the replica is
// cut off (paused, its link killed), and "cut" holders take the other
// limit - 1 slots of each key on the master alone, which a waiter then
// waits behind; then the master dies and the replica takes over, the old
// master coming back as its replica. After the failover the new master
// is filled (leases taken until one is denied) and holders churn again,
// woken by releases alone.
//
// Without replica acknowledgements, the cut holders' leases die with the
// master: the new master knows only the long ones, grants the cut
// holders' slots again, and each key is held by limit - 1 more holders
// than its limit, exactly its leases that the old master had not
// replicated. The waiter, whose poll lasts an hour, is woken when its
// subscription is confirmed on the new master, and gets its lease there.
//
// With WithReplicaAcks, the cut holders' leases come with
// ErrNotReplicated, and a careful holder does not count them; every lease
// returned without an error survives the failover, and no key is ever
// held by more than its limit.
func TestLeasesThroughAKilledClusterMaster(t *testing.T) {
	for _, acked := range []bool{false, true} {
		name := "WithoutAcks"
		if acked {
			name = "WithReplicaAcks"
		}
		t.Run(name, func(t *testing.T) { leasesThroughFailover(t, acked) })
	}
}

func leasesThroughFailover(t *testing.T, acked bool) {
	const limit = failoverLeaseLimit
	cluster := testserver.StartRedisClusterWithReplicas(t)
	c := newClusterClient(t, cluster)
	prefix := fmt.Sprintf("test:%s:%d:", t.Name(), rand.Uint64())
	storeWith := func(opts ...redisstore.Option) *redisstore.Store {
		st, err := redisstore.New(c, append([]redisstore.Option{redisstore.WithPrefix(prefix)}, opts...)...)
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		return st
	}
	// st decides while the replica is linked and after the failover; cut
	// while the replica is cut off: with acknowledgements, it gives up on
	// them after 5 ms, where none can come.
	st, cut := storeWith(), storeWith()
	if acked {
		st = storeWith(redisstore.WithReplicaAcks(1, ackTimeout))
		cut = storeWith(redisstore.WithReplicaAcks(1, 5*time.Millisecond))
	}
	limitOn := func(st *redisstore.Store, opts ...sluice.Option) *sluice.Limiter {
		lim, err := sluice.NewConcurrencyLimit(limit, time.Hour,
			append([]sluice.Option{sluice.WithStore(st), sluice.WithLeasePoll(time.Hour)}, opts...)...)
		require.NoError(t, err)
		return lim
	}
	observe, denied := leaseproc.Denials()
	lim, limCut, watching := limitOn(st), limitOn(cut), limitOn(st, observe)

	master := cluster.MasterOf(t, 0)
	replica := cluster.ReplicaOf(t, master)
	require.NotNil(t, replica)
	all := keysServedBy(t, cluster, st, master, failoverLeaseKeys+failoverLoadKeys+1)
	keys, loadKeys, spare := all[:failoverLeaseKeys], all[failoverLeaseKeys:len(all)-1], all[len(all)-1]
	var rec holds
	now := func() int64 { return time.Now().UnixNano() }
	ctx := t.Context()
	decide := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 5*time.Second) }

	// Linked: churn, then the long holders, then WAIT, so that the
	// replica has every decision so far.
	require.NoError(t, churn(lim, keys, failoverChurners, failoverRounds, &rec))
	type held struct {
		key   string
		lease sluice.Lease
		start int64
	}
	var long []held
	for _, key := range keys {
		dctx, cancel := decide()
		lease, err := lim.TryAcquire(dctx, key, 1)
		cancel()
		require.NoError(t, err)
		require.True(t, lease.Allowed)
		long = append(long, held{key, lease, now()})
	}
	reply, err := testserver.Do(master.Addr, "WAIT", "1", "900")
	require.NoError(t, err)
	require.Equal(t, int64(1), reply, "the replica has every decision before the cut")

	// The load: leases taken and released on other keys of the master,
	// from before the cut until after the failover, failing meanwhile.
	stopLoad := make(chan struct{})
	var load sync.WaitGroup
	loadAcquired := 0
	var loadMu sync.Mutex
	for _, key := range loadKeys {
		for range 2 {
			load.Go(func() {
				for {
					select {
					case <-stopLoad:
						return
					default:
					}
					lctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					lease, err := lim.Acquire(lctx, key, 1)
					if err == nil {
						start := now()
						time.Sleep(failoverWork)
						rec.add(key, leaseproc.Interval{Start: start, End: now()})
						loadMu.Lock()
						loadAcquired++
						loadMu.Unlock()
					}
					if lease.Allowed {
						_ = lease.Release(lctx) // also a lease that came with ErrNotReplicated
					}
					cancel()
					if err != nil {
						time.Sleep(10 * time.Millisecond)
					}
				}
			})
		}
	}
	defer func() {
		select {
		case <-stopLoad:
		default:
			close(stopLoad)
		}
		load.Wait()
	}()

	// Cut off: the other slots of each key, taken on the master alone.
	cutAt := now()
	replica.Pause(t)
	_, err = testserver.Do(master.Addr, "CLIENT", "KILL", "TYPE", "replica")
	require.NoError(t, err)
	var cutHeld []held
	for _, key := range keys {
		for range limit - 1 {
			dctx, cancel := decide()
			lease, err := limCut.TryAcquire(dctx, key, 1)
			cancel()
			require.True(t, lease.Allowed, "key %s: %v", key, err)
			if acked {
				require.ErrorIs(t, err, redisstore.ErrNotReplicated, "no replica can acknowledge it")
				continue // a careful holder does not count on it
			}
			require.NoError(t, err)
			cutHeld = append(cutHeld, held{key, lease, now()})
		}
	}
	type waited struct {
		lease sluice.Lease
		start int64
		err   error
	}
	gotWaited := make(chan waited, 1)
	go func() {
		wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for {
			lease, err := watching.Acquire(wctx, keys[0], 1)
			if lease.Allowed || wctx.Err() != nil {
				gotWaited <- waited{lease, now(), err}
				return
			}
			// Woken during the failover, it asked the dead master: as a
			// holder would, it waits again (a store error is not a denial).
			time.Sleep(10 * time.Millisecond)
		}
	}()
	require.Equal(t, keys[0], receive(t, denied, "denial of the waiter"))
	require.Equal(t, keys[0], receive(t, denied, "denial of the waiter, watching")) // Acquire watches once denied, and asks again

	// The kill, and the failover; the old master comes back as the new
	// one's replica, so that acknowledgements come again.
	killedAt := now()
	master.Stop(t)
	replica.Resume(t)
	require.Equal(t, replica.Addr, cluster.WaitForFailover(t, 0, master).Addr)
	master.Start(t)
	testserver.WaitForSync(t, replica, master)
	for deadline := time.Now().Add(followed); ; { // the client follows the new layout
		dctx, cancel := decide()
		_, err := lim.TryAcquire(dctx, spare, 0)
		cancel()
		if err == nil || time.Now().After(deadline) {
			require.NoError(t, err)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}

	w := receive(t, gotWaited, "the waiter's lease")
	require.True(t, w.lease.Allowed, "%v", w.err)
	switch {
	case w.err == nil:
	case acked && errors.Is(w.err, redisstore.ErrNotReplicated):
		// Woken before the old master was back as a replica: a lease not
		// to count on, given back.
		dctx, cancel := decide()
		require.NoError(t, w.lease.Release(dctx))
		cancel()
		w.lease.Allowed = false
	default:
		require.NoError(t, w.err)
	}

	// The new master filled: leases taken on each key until one is denied.
	var fillers []held
	for _, key := range keys {
		for {
			dctx, cancel := decide()
			lease, err := lim.TryAcquire(dctx, key, 1)
			cancel()
			require.NoError(t, err)
			if !lease.Allowed {
				break
			}
			fillers = append(fillers, held{key, lease, now()})
		}
	}
	end := func(hs []held) {
		for _, h := range hs {
			rec.add(h.key, leaseproc.Interval{Start: h.start, End: now()})
			dctx, cancel := decide()
			require.NoError(t, h.lease.Release(dctx))
			cancel()
		}
	}
	end(fillers)
	if w.lease.Allowed {
		end([]held{{keys[0], w.lease, w.start}})
	}
	require.NoError(t, churn(lim, keys, failoverChurners, failoverRounds, &rec))
	close(stopLoad)
	load.Wait()

	// The long holders' leases survived; the cut holders' died with the
	// master, and their holders learn it when they give them back.
	end(long)
	for _, h := range cutHeld {
		rec.add(h.key, leaseproc.Interval{Start: h.start, End: now()})
		dctx, cancel := decide()
		require.ErrorIs(t, h.lease.Release(dctx), sluice.ErrNotHeld, "the new master never had it")
		cancel()
	}

	for _, key := range keys {
		most, at := leaseproc.MostAtOnce(rec.byKey[key])
		// The leases taken while the replica was cut off and still held
		// when the master died: what the old master took with it.
		unreplicated := 0
		for _, h := range rec.byKey[key] {
			if h.Start >= cutAt && h.Start <= killedAt && h.End > killedAt {
				unreplicated++
			}
		}
		t.Logf("key %s: %d holds, at most %d at once (limit %d), %d not replicated when the master died",
			key, len(rec.byKey[key]), most, limit, unreplicated)
		if acked {
			require.Zero(t, unreplicated)
			require.Equal(t, limit, most, "key %s: held by the limit, never more (at %d ns)", key, at)
		} else {
			require.Equal(t, limit-1, unreplicated, "key %s", key)
			require.Equal(t, limit+unreplicated, most, "key %s: the limit, and the leases the old master had not replicated (at %d ns)", key, at)
		}
	}
	for _, key := range loadKeys {
		most, _ := leaseproc.MostAtOnce(rec.byKey[key])
		require.LessOrEqual(t, most, limit, "load key %s", key)
	}
	require.Positive(t, loadAcquired, "the load took leases")
}
