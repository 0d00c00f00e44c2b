package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/storetest"
)

func TestMemStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) engine.Store {
		st := sluice.NewMemStore(sluice.MemStoreConfig{})
		t.Cleanup(func() { _ = st.Close() })
		return st
	}, storetest.Exact())
}

func TestMemStoreForgetsKeysOnceFresh(t *testing.T) {
	mock := newMock()
	st := sluice.NewMemStore(sluice.MemStoreConfig{Shards: 1})
	lim, err := sluice.NewGCRA(sluice.PerSecond(10), 1, sluice.WithStore(st), sluice.WithClock(mock))
	require.NoError(t, err)
	ctx := context.Background()
	for _, k := range keys(100) {
		_, err := lim.Allow(ctx, k, 1)
		require.NoError(t, err)
	}
	require.Equal(t, 100, st.Len())
	mock.Add(100 * time.Millisecond) // every key is fresh again
	_, err = lim.Allow(ctx, "newcomer", 1)
	require.NoError(t, err)
	require.Less(t, st.Len(), 101, "adding a key sweeps expired ones")
	require.Equal(t, st.Len()-1, st.Sweep(), "Sweep removes every expired key")
	require.Equal(t, 1, st.Len())

	_, err = lim.Allow(ctx, "zero-cost", 0)
	require.NoError(t, err)
	require.Equal(t, 1, st.Len(), "a request that leaves a key fresh stores nothing")
}

// TestMemStoreMaxKeysEvictsTheIdlestKeyClosestToFresh pins the eviction
// rule on a shard small enough that eviction samples every key: of the
// keys that went longest without a decision, the one closest to fresh.
func TestMemStoreMaxKeysEvictsTheIdlestKeyClosestToFresh(t *testing.T) {
	mock := newMock()
	st := sluice.NewMemStore(sluice.MemStoreConfig{Shards: 1, MaxKeys: 16})
	lim, err := sluice.NewGCRA(sluice.PerSecond(1), 100, sluice.WithStore(st), sluice.WithClock(mock))
	require.NoError(t, err)
	ctx := context.Background()
	remaining := func(key string) float64 {
		d, err := lim.CanAccept(ctx, key, 0)
		require.NoError(t, err)
		return d.Remaining
	}
	// Key i holds i+2 units: key 0 is the closest to fresh.
	for i, k := range keys(16) {
		_, err := lim.Allow(ctx, k, float64(i+2))
		require.NoError(t, err)
	}
	for _, k := range keys(16) {
		remaining(k) // every key was just used: all equally idle
	}
	_, err = lim.Allow(ctx, "flood-1", 1)
	require.NoError(t, err)
	require.Equal(t, 16, st.Len(), "the bound holds")
	require.Equal(t, 100.0, remaining("client-0"), "of keys equally idle, the one closest to fresh was evicted")

	// Now client-1 is the closest to fresh, but in use; the others have
	// been sampled once since their last decision.
	require.Equal(t, 97.0, remaining("client-1"))
	_, err = lim.Allow(ctx, "flood-2", 1)
	require.NoError(t, err)
	require.Equal(t, 16, st.Len(), "the bound holds")
	require.Equal(t, 97.0, remaining("client-1"), "the key in use is kept")
	require.Equal(t, 100.0, remaining("client-2"), "the idle key closest to fresh was evicted")
	require.Equal(t, 83.0, remaining("client-15"), "the others are kept")
}

func TestMemStoreJanitorSweepsAndStopsOnClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := sluice.NewMemStore(sluice.MemStoreConfig{SweepInterval: time.Minute})
		defer st.Close()
		lim, err := sluice.NewGCRA(sluice.PerSecond(10), 1, sluice.WithStore(st))
		require.NoError(t, err)
		_, err = lim.Allow(context.Background(), "k", 1)
		require.NoError(t, err)
		time.Sleep(time.Second) // fake time: the bubble's clock jumps
		_, err = lim.CanAccept(context.Background(), "other", 1)
		require.NoError(t, err)
		require.Equal(t, 1, st.Len())
		time.Sleep(time.Minute) // the janitor's tick
		synctest.Wait()
		require.Zero(t, st.Len())
		require.NoError(t, st.Close())
		require.NoError(t, st.Close(), "Close twice is fine")
		_, err = lim.Allow(context.Background(), "k", 1)
		require.ErrorIs(t, err, sluice.ErrStoreClosed)
		require.ErrorIs(t, lim.Reset(context.Background(), "k"), sluice.ErrStoreClosed)
	}) // synctest fails if the janitor goroutine were still running
}

// TestMemStoreKeyConflictBetweenAlgorithms pins that a key holding one
// algorithm's live state refuses another's, whichever of the store's
// tables each keeps its keys in, and is free once the state is fresh.
func TestMemStoreKeyConflictBetweenAlgorithms(t *testing.T) {
	gcra := func(o ...sluice.Option) (*sluice.Limiter, error) { return sluice.NewGCRA(sluice.PerSecond(1), 1, o...) }
	window := func(o ...sluice.Option) (*sluice.Limiter, error) { return sluice.NewFixedWindow(1, time.Second, o...) }
	log := func(o ...sluice.Option) (*sluice.Limiter, error) { return sluice.NewSlidingLog(1, time.Second, o...) }
	for _, tc := range []struct {
		name          string
		first, second func(...sluice.Option) (*sluice.Limiter, error)
	}{
		{name: "GCRA then fixed window", first: gcra, second: window},
		{name: "fixed window then GCRA", first: window, second: gcra},
		{name: "sliding log then fixed window", first: log, second: window},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mock := newMock()
			st := sluice.NewMemStore(sluice.MemStoreConfig{})
			first, err := tc.first(sluice.WithStore(st), sluice.WithClock(mock))
			require.NoError(t, err)
			second, err := tc.second(sluice.WithStore(st), sluice.WithClock(mock))
			require.NoError(t, err)
			ctx := context.Background()
			_, err = first.Allow(ctx, "shared", 1)
			require.NoError(t, err)
			_, err = second.Allow(ctx, "shared", 1)
			require.ErrorIs(t, err, sluice.ErrKeyConflict)
			_, err = second.CanAccept(ctx, "shared", 1)
			require.ErrorIs(t, err, sluice.ErrKeyConflict)

			mock.Add(time.Second) // the first state is fresh: the key is free
			d, err := second.Allow(ctx, "shared", 1)
			require.NoError(t, err)
			require.True(t, d.Allowed)
			require.Equal(t, 1, st.Len(), "the expired state was replaced, not kept beside")
			_, err = first.Allow(ctx, "shared", 1)
			require.ErrorIs(t, err, sluice.ErrKeyConflict, "and the second now holds it")
			require.NoError(t, second.Reset(ctx, "shared"))
			require.Zero(t, st.Len())
		})
	}
}

// TestMemStoreBoundHoldsAcrossAlgorithms pins that MaxKeys counts the keys
// of every algorithm in a store, and that Sweep clears them all.
func TestMemStoreBoundHoldsAcrossAlgorithms(t *testing.T) {
	mock := newMock()
	st := sluice.NewMemStore(sluice.MemStoreConfig{Shards: 1, MaxKeys: 8})
	g, err := sluice.NewGCRA(sluice.PerSecond(1), 100, sluice.WithStore(st), sluice.WithClock(mock))
	require.NoError(t, err)
	w, err := sluice.NewFixedWindow(100, time.Hour, sluice.WithAnchoredWindows(), sluice.WithStore(st), sluice.WithClock(mock))
	require.NoError(t, err)
	ctx := context.Background()
	for i, k := range keys(8) {
		_, err := g.Allow(ctx, "g-"+k, float64(i+2))
		require.NoError(t, err)
	}
	for _, k := range keys(8) {
		_, err := w.Allow(ctx, "w-"+k, 1)
		require.NoError(t, err)
		require.LessOrEqual(t, st.Len(), 8)
	}
	require.Equal(t, 8, st.Len())
	// The GCRA keys, closest to fresh, went first: their first key (2
	// units, 2 s from fresh) before any window (an hour from fresh).
	d, err := g.CanAccept(ctx, "g-client-0", 0)
	require.NoError(t, err)
	require.Equal(t, 100.0, d.Remaining, "the key closest to fresh was evicted")

	mock.Add(2 * time.Hour)
	_, err = g.CanAccept(ctx, "probe", 0) // Sweep goes by the latest time seen
	require.NoError(t, err)
	require.Equal(t, 8, st.Sweep())
	require.Zero(t, st.Len())
}

func TestMemStoreRejectsInvalidParams(t *testing.T) {
	st := sluice.NewMemStore(sluice.MemStoreConfig{})
	_, err := st.Apply(context.Background(), "k", &engine.Params{Kind: engine.KindGCRA}, engine.Op{Verb: engine.VerbAllow, Cost: 1})
	require.ErrorIs(t, err, sluice.ErrInvalidConfig)
	p := engine.Params{Kind: engine.KindGCRA, Limit: 1, Interval: 1}
	_, err = st.Apply(context.Background(), "k", &p, engine.Op{Verb: engine.VerbFill, Cost: 1})
	require.ErrorIs(t, err, sluice.ErrUnsupported)
	_, err = st.Apply(context.Background(), "k", &p, engine.Op{Verb: 0, Cost: 1})
	require.ErrorIs(t, err, sluice.ErrUnsupported)
}

func TestMemStoreHugeMaxKeysIsNoTighterBound(t *testing.T) {
	st := sluice.NewMemStore(sluice.MemStoreConfig{Shards: 64, MaxKeys: math.MaxInt})
	defer st.Close()
	lim, err := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithStore(st), sluice.WithClock(newMock()))
	require.NoError(t, err)
	for i := range 1000 {
		_, err := lim.Allow(context.Background(), fmt.Sprint("client-", i), 1)
		require.NoError(t, err)
	}
	require.Equal(t, 1000, st.Len(), "no key evicted")
}

func TestMemStoreHugeShardCountIsCapped(t *testing.T) {
	st := sluice.NewMemStore(sluice.MemStoreConfig{Shards: math.MaxInt})
	defer st.Close()
	lim, err := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithStore(st))
	require.NoError(t, err)
	d, err := lim.Allow(context.Background(), "k", 1)
	require.NoError(t, err)
	require.True(t, d.Allowed)
}

// TestMemStoreGroupsSharingShardsDecideExactlyWithoutDeadlock decides
// groups on stores of one and two shards, where most groups hold several
// keys of one shard: each shard is locked once, whatever the order of the
// keys, so the groups decide as DecideGroup does, bit for bit, and
// concurrent groups neither deadlock nor lose a decision.
func TestMemStoreGroupsSharingShardsDecideExactlyWithoutDeadlock(t *testing.T) {
	for _, shards := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d shards", shards), func(t *testing.T) {
			st := sluice.NewMemStore(sluice.MemStoreConfig{Shards: shards})
			t.Cleanup(func() { _ = st.Close() })
			storetest.RunGroups(t, st, storetest.Exact())
			storetest.RunGroupsConcurrent(t, st, 64)
		})
	}
}

// TestMemStoreHotKeyStaysExactWhileItsShardChurns hammers one GCRA key
// from several goroutines while others add, forget and sweep keys of the
// same shard, so that its tables grow, shift slots back and shrink under
// the hot key: at a time that does not move, exactly its burst is
// admitted, and its state reads as exactly that.
func TestMemStoreHotKeyStaysExactWhileItsShardChurns(t *testing.T) {
	const burst, hammers, tries, minRounds = 300, 4, 150, 20
	st := sluice.NewMemStore(sluice.MemStoreConfig{Shards: 1}) // every key in the hot key's shard
	t.Cleanup(func() { _ = st.Close() })
	mock := newMock()
	ctx := context.Background()
	hot, err := sluice.NewGCRA(sluice.PerSecond(1), burst, sluice.WithStore(st), sluice.WithClock(mock))
	require.NoError(t, err)
	_, err = hot.CanAccept(ctx, "hot", 0)
	require.NoError(t, err)
	// Keys under the hot key's interval share its table; another
	// interval's keys live in the other table.
	same, err := sluice.NewGCRA(sluice.PerSecond(1), 5, sluice.WithStore(st), sluice.WithClock(mock))
	require.NoError(t, err)
	other, err := sluice.NewGCRA(sluice.PerSecond(7), 5, sluice.WithStore(st), sluice.WithClock(mock))
	require.NoError(t, err)

	var admitted, rounds atomic.Int64
	var hammering, churning sync.WaitGroup
	started := make(chan struct{})
	for range hammers {
		hammering.Go(func() {
			<-started
			// Past the burst, denials: the slot is read, not written.
			for i := 0; i < tries || rounds.Load() < minRounds; i++ {
				d, err := hot.Allow(ctx, "hot", 1)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	stop := make(chan struct{})
	churning.Go(func() {
		for round := 0; ; round++ {
			select {
			case <-stop:
				return
			default:
			}
			ks := keys(64)
			for _, k := range ks {
				_, err1 := same.Allow(ctx, k, 1)
				_, err2 := other.Allow(ctx, "other-"+k, 1)
				if err := errors.Join(err1, err2); err != nil {
					t.Error(err)
					return
				}
			}
			for _, k := range ks {
				err1 := same.Reset(ctx, k)
				err2 := other.Reset(ctx, "other-"+k)
				if err := errors.Join(err1, err2); err != nil {
					t.Error(err)
					return
				}
			}
			st.Sweep() // shrinks the emptied tables
			if rounds.Add(1) == 1 {
				close(started) // the hot key's burst is spent while the shard churns
			}
		}
	})
	hammering.Wait()
	close(stop)
	churning.Wait()

	require.Equal(t, int64(burst), admitted.Load())
	d, err := hot.CanAccept(ctx, "hot", 0)
	require.NoError(t, err)
	require.Equal(t, float64(burst), d.Used)
	require.Zero(t, d.Remaining)
}
