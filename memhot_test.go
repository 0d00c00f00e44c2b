package sluice_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/simclock"
)

// hotWorld is a one-shard MemStore and the limiters a hot-key trace
// decides with. A world with a spacer decides a key of its own before each
// step, so that no key is ever decided twice in a row in its shard: none
// becomes the shard's hot key (memhot.go).
type hotWorld struct {
	st                 *sluice.MemStore
	gcra, slow, strict *sluice.Limiter // one GCRA interval, another, the first with a penalty
	bucket, spacer     *sluice.Limiter
	group              *sluice.Group
	booked             []*sluice.Reservation
	spaced             bool
}

func newHotWorld(t *testing.T, mock *simclock.Clock, spaced bool) *hotWorld {
	t.Helper()
	w := &hotWorld{st: sluice.NewMemStore(sluice.MemStoreConfig{Shards: 1}), spaced: spaced}
	t.Cleanup(func() { _ = w.st.Close() })
	opts := []sluice.Option{sluice.WithStore(w.st), sluice.WithClock(mock)}
	var err error
	must := func(l *sluice.Limiter, e error) *sluice.Limiter {
		require.NoError(t, e)
		return l
	}
	w.gcra = must(sluice.NewGCRA(sluice.PerSecond(10), 5, opts...))
	w.slow = must(sluice.NewGCRA(sluice.PerSecond(4), 3, opts...))
	w.strict = must(sluice.NewGCRA(sluice.PerSecond(10), 5, append(opts, sluice.WithPenalty(700*time.Millisecond))...))
	w.bucket = must(sluice.NewTokenBucket(sluice.PerSecond(10), 5, opts...))
	// The spacer shares the GCRA's interval, and so its table, and admits
	// all a trace asks of it.
	w.spacer = must(sluice.NewGCRA(sluice.PerSecond(10), 1e6, opts...))
	w.group, err = sluice.NewGroup(w.gcra, w.bucket)
	require.NoError(t, err)
	return w
}

// step makes the trace's step op on the key "k" (or, for a few ops, on
// others) and returns what it decided, as text.
func (w *hotWorld) step(ctx context.Context, op int, cost float64, n int) string {
	if w.spaced {
		if _, err := w.spacer.Allow(ctx, "spacer", 1); err != nil {
			return "spacer: " + err.Error()
		}
	}
	show := func(v any, err error) string { return fmt.Sprintf("%+v %v", v, err) }
	switch op {
	case 0, 1, 2, 3: // the common case, most often
		return show(w.gcra.Allow(ctx, "k", cost))
	case 4:
		return show(w.gcra.CanAccept(ctx, "k", cost))
	case 5:
		return show(w.slow.Allow(ctx, "k", 1)) // converts the key to another interval
	case 6:
		return show(w.strict.Allow(ctx, "k", cost))
	case 7:
		r, err := w.gcra.Reserve(ctx, "k", cost, 400*time.Millisecond)
		if err == nil {
			w.booked = append(w.booked, r)
			return show(r.Decision, nil)
		}
		return show(nil, err)
	case 8:
		if len(w.booked) == 0 {
			return "nothing booked"
		}
		r := w.booked[len(w.booked)-1]
		w.booked = w.booked[:len(w.booked)-1]
		return show(r.Decision, r.Cancel(ctx))
	case 9:
		return show(w.gcra.AllowAtMost(ctx, "k", 3*cost))
	case 10:
		d, err := w.group.Allow(ctx, []string{"k", "g"}, cost)
		return show(d.Limits(), err)
	case 11:
		return show(w.bucket.Allow(ctx, "k", 1)) // another algorithm: a conflict while the GCRA's state lives
	case 12:
		return show(nil, w.gcra.Reset(ctx, "k"))
	case 13:
		w.st.Sweep() // counts differ: the spacer's key
		return "swept"
	case 14:
		return show(w.gcra.Allow(ctx, "n"+strconv.Itoa(n), 1)) // a new key: room made in the shard
	default:
		return show(w.gcra.Exhaust(ctx, "k", 300*time.Millisecond))
	}
}

func TestMemStoreHotKeyDecidesAsAColdKey(t *testing.T) {
	for seed := range uint64(200) {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			mock := simclock.New(start) // steps without yielding: the trace has no waiters
			ctx := context.Background()
			hot, cold := newHotWorld(t, mock, false), newHotWorld(t, mock, true)
			rng := rand.New(rand.NewPCG(seed, 0x5eed))
			for n := range 400 {
				op, cost := rng.IntN(16), []float64{1, 0.5, 2}[rng.IntN(3)]
				if rng.IntN(3) == 0 {
					mock.Add(time.Duration(rng.IntN(300)) * time.Millisecond)
				}
				require.Equal(t, cold.step(ctx, op, cost, n), hot.step(ctx, op, cost, n), "step %d: op %d, cost %v", n, op, cost)
			}
		})
	}
}

func TestMemStoreHotKeyOutlivesItsSlotsStaleExpiry(t *testing.T) {
	st := sluice.NewMemStore(sluice.MemStoreConfig{Shards: 1})
	t.Cleanup(func() { _ = st.Close() })
	mock := simclock.New(start)
	ctx := context.Background()
	lim, err := sluice.NewGCRA(sluice.PerSecond(1), 10, sluice.WithStore(st), sluice.WithClock(mock))
	require.NoError(t, err)
	// The third admission makes the key hot with a TAT 3 s ahead (the
	// first adds it, the second is the shard's last save); the fourth
	// moves its TAT to 4 s ahead beside the mutex only.
	for range 4 {
		d, err := lim.Allow(ctx, "k", 1)
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	mock.Add(3500 * time.Millisecond)
	_, err = lim.CanAccept(ctx, "other", 0) // the store sees the time
	require.NoError(t, err)
	require.Zero(t, st.Sweep(), "the sweep removed a key whose TAT is 0.5s ahead")
	require.Equal(t, 1, st.Len())
	_, err = lim.Allow(ctx, "new", 1) // a key added: the shard samples its keys
	require.NoError(t, err)
	require.Equal(t, 2, st.Len())
	d, err := lim.CanAccept(ctx, "k", 0)
	require.NoError(t, err)
	require.InDelta(t, 0.5, d.Used, 1e-9)
	require.Equal(t, 500*time.Millisecond, d.ResetAfter)
}

func TestMemStoreHotKeyIsNotEvictedForAFlood(t *testing.T) {
	mock := simclock.New(start)
	ctx := context.Background()
	world := func(maxKeys int) (*sluice.MemStore, *sluice.Limiter) {
		st := sluice.NewMemStore(sluice.MemStoreConfig{Shards: 1, MaxKeys: maxKeys})
		t.Cleanup(func() { _ = st.Close() })
		lim, err := sluice.NewGCRA(sluice.PerSecond(100), 3, sluice.WithStore(st), sluice.WithClock(mock))
		require.NoError(t, err)
		return st, lim
	}
	flooded, inFlood := world(8)
	_, alone := world(0)
	// The flood's keys share the hammered key's table, and live 10 s.
	flood, err := sluice.NewGCRA(sluice.PerSecond(100), 1e6, sluice.WithStore(flooded), sluice.WithClock(mock))
	require.NoError(t, err)
	for i := range 300 {
		// The hammered key, hot from its second admission in a row, and
		// then a new key of the flood, which makes room by eviction.
		for range 2 {
			want, err := alone.Allow(ctx, "hammered", 1)
			require.NoError(t, err)
			got, err := inFlood.Allow(ctx, "hammered", 1)
			require.NoError(t, err)
			require.Equal(t, want, got, "step %d", i)
		}
		_, err := flood.Allow(ctx, "flood-"+strconv.Itoa(i), 1000)
		require.NoError(t, err)
		mock.Add(7 * time.Millisecond)
	}
	require.NotZero(t, flooded.Stats().Evicted)
}
