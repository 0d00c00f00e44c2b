package sluice_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/plantest"
)

// tiers are a free and a pro limit, and a lookup that picks one per key
// from a plan that a test may change.
type tiers struct {
	free, pro *sluice.Limiter
	mu        sync.Mutex
	plans     map[string]string
}

func newTiers(t *testing.T, free, pro *sluice.Limiter) *tiers {
	t.Cleanup(func() { free.Close(); pro.Close() })
	return &tiers{free: free, pro: pro, plans: map[string]string{}}
}

func (ts *tiers) set(key, plan string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.plans[key] = plan
}

func (ts *tiers) lookup(_ context.Context, key string) (*sluice.Limiter, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.plans[key] == "pro" {
		return ts.pro, nil
	}
	return ts.free, nil
}

func gcraTiers(t *testing.T) *tiers {
	free, err := sluice.NewGCRA(sluice.PerSecond(10), 5)
	require.NoError(t, err)
	pro, err := sluice.NewGCRA(sluice.PerSecond(100), 5)
	require.NoError(t, err)
	return newTiers(t, free, pro)
}

func TestPerKeyHoldsEachKeyToTheLimitItsLookupReturns(t *testing.T) {
	free, err := sluice.NewFixedWindow(2, time.Minute)
	require.NoError(t, err)
	pro, err := sluice.NewFixedWindow(20, time.Minute)
	require.NoError(t, err)
	ts := newTiers(t, free, pro)
	ts.set("acme", "pro")
	mock := newMock()
	lim, err := sluice.NewPerKey(ts.lookup, sluice.WithClock(mock))
	require.NoError(t, err)
	defer lim.Close()
	require.Equal(t, 2, plantest.Admitted(t, lim, "someone"))
	require.Equal(t, 20, plantest.Admitted(t, lim, "acme"))
	d, err := lim.CanAccept(context.Background(), "acme", 0)
	require.NoError(t, err)
	require.Equal(t, 20.0, d.Limit, "the decision states the key's own limit")
}

func TestPerKeyGCRARaisedAdmitsAtTheNewRateAtOnce(t *testing.T) {
	ts := gcraTiers(t)
	mock := newMock()
	lim, err := sluice.NewPerKey(ts.lookup, sluice.WithClock(mock))
	require.NoError(t, err)
	defer lim.Close()
	require.Equal(t, 5, plantest.Admitted(t, lim, "k"), "the free burst")
	ts.set("k", "pro")
	d, err := lim.Allow(context.Background(), "k", 1)
	require.NoError(t, err)
	require.False(t, d.Allowed, "what was used is kept")
	require.Equal(t, 10*time.Millisecond, d.RetryAfter, "one unit at 100/s, not 100 ms")
	for range 20 {
		mock.Add(10 * time.Millisecond)
		require.Equal(t, 1, plantest.Admitted(t, lim, "k"), "one every 10 ms")
	}
}

func TestPerKeyGCRALoweredDoesNotForgetWhatWasSpent(t *testing.T) {
	ts := gcraTiers(t)
	ts.set("k", "pro")
	mock := newMock()
	lim, err := sluice.NewPerKey(ts.lookup, sluice.WithClock(mock))
	require.NoError(t, err)
	defer lim.Close()
	require.Equal(t, 5, plantest.Admitted(t, lim, "k"))
	mock.Add(20 * time.Millisecond) // 2 units drained at 100/s
	ts.set("k", "free")
	require.Equal(t, 2, plantest.Admitted(t, lim, "k"), "the 2 units drained, no more")
	mock.Add(99 * time.Millisecond)
	require.Equal(t, 0, plantest.Admitted(t, lim, "k"), "then one per 100 ms")
	mock.Add(time.Millisecond)
	require.Equal(t, 1, plantest.Admitted(t, lim, "k"))
}

func TestPerKeyLookupThatFailsFailsTheRequest(t *testing.T) {
	errNoPlan := errors.New("no plan for this key")
	perKey, err := sluice.NewPerKey(func(context.Context, string) (*sluice.Limiter, error) { return nil, nil })
	require.NoError(t, err)
	defer perKey.Close()
	for _, c := range []struct {
		name   string
		lookup func(context.Context, string) (*sluice.Limiter, error)
		want   error
	}{
		{"an error", func(context.Context, string) (*sluice.Limiter, error) { return nil, errNoPlan }, errNoPlan},
		{"no limiter", func(context.Context, string) (*sluice.Limiter, error) { return nil, nil }, sluice.ErrInvalidConfig},
		{"a per-key limiter", func(context.Context, string) (*sluice.Limiter, error) { return perKey, nil }, sluice.ErrInvalidConfig},
	} {
		t.Run(c.name, func(t *testing.T) {
			var observed atomic.Int32
			lim, err := sluice.NewPerKey(c.lookup, sluice.WithObserver(func(_ context.Context, e sluice.Event) {
				require.ErrorIs(t, e.Err, c.want)
				observed.Add(1)
			}))
			require.NoError(t, err)
			defer lim.Close()
			ctx := context.Background()
			d, err := lim.Allow(ctx, "k", 1)
			require.ErrorIs(t, err, c.want)
			require.False(t, d.Allowed)
			require.Equal(t, int32(1), observed.Load(), "the observer sees the failure")
			_, err = lim.Reserve(ctx, "k", 1, time.Second)
			require.ErrorIs(t, err, c.want)
			require.ErrorIs(t, lim.Wait(ctx, "k", 1), c.want)
			_, err = lim.TryAcquire(ctx, "k", 1)
			require.ErrorIs(t, err, c.want)
			_, err = lim.Acquire(ctx, "k", 1)
			require.ErrorIs(t, err, c.want)
		})
	}
}

func TestPerKeyRefusesOptionsThatBelongToTheLimits(t *testing.T) {
	lookup := func(context.Context, string) (*sluice.Limiter, error) { return nil, nil }
	for _, c := range []struct {
		name   string
		lookup func(context.Context, string) (*sluice.Limiter, error)
		opts   []sluice.Option
	}{
		{"no lookup", nil, nil},
		{"a penalty", lookup, []sluice.Option{sluice.WithPenalty(time.Second)}},
		{"denials counted", lookup, []sluice.Option{sluice.WithCountDenied()}},
		{"anchored windows", lookup, []sluice.Option{sluice.WithAnchoredWindows()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := sluice.NewPerKey(c.lookup, c.opts...)
			require.ErrorIs(t, err, sluice.ErrInvalidConfig)
		})
	}
}

func TestPerKeyReservationIsGivenBackUnderTheLimitItWasBookedUnder(t *testing.T) {
	ts := gcraTiers(t)
	mock := newMock()
	lim, err := sluice.NewPerKey(ts.lookup, sluice.WithClock(mock))
	require.NoError(t, err)
	defer lim.Close()
	ctx := context.Background()
	require.Equal(t, 5, plantest.Admitted(t, lim, "k"))
	r, err := lim.Reserve(ctx, "k", 1, time.Second)
	require.NoError(t, err)
	require.True(t, r.Allowed)
	require.Equal(t, 100*time.Millisecond, r.Delay)
	require.NoError(t, r.Cancel(ctx))
	d, err := lim.CanAccept(ctx, "k", 1)
	require.NoError(t, err)
	require.Equal(t, 100*time.Millisecond+time.Nanosecond, d.RetryAfter, "given back, a nanosecond late")
}

func TestPerKeyConcurrencyLimitLeasesPerTier(t *testing.T) {
	free, err := sluice.NewConcurrencyLimit(1, time.Minute)
	require.NoError(t, err)
	pro, err := sluice.NewConcurrencyLimit(3, time.Minute)
	require.NoError(t, err)
	ts := newTiers(t, free, pro)
	ts.set("acme", "pro")
	lim, err := sluice.NewPerKey(ts.lookup, sluice.WithClock(newMock()))
	require.NoError(t, err)
	defer lim.Close()
	ctx := context.Background()
	for key, most := range map[string]int{"someone": 1, "acme": 3} {
		var held []sluice.Lease
		for {
			ls, err := lim.TryAcquire(ctx, key, 1)
			require.NoError(t, err)
			if !ls.Allowed {
				break
			}
			held = append(held, ls)
		}
		require.Len(t, held, most, key)
		for _, ls := range held {
			require.NoError(t, ls.Release(ctx))
		}
	}
}

func TestPerKeyLimiterInAGroupDecidesEachKeyUnderItsLimit(t *testing.T) {
	ts := gcraTiers(t)
	ts.set("client:acme", "pro")
	st := sluice.NewMemStore(sluice.MemStoreConfig{})
	defer st.Close()
	mock := newMock()
	perClient, err := sluice.NewPerKey(ts.lookup, sluice.WithStore(st), sluice.WithClock(mock))
	require.NoError(t, err)
	everyone, err := sluice.NewFixedWindow(100, time.Second, sluice.WithStore(st), sluice.WithClock(mock))
	require.NoError(t, err)
	g, err := sluice.NewGroup(perClient, everyone)
	require.NoError(t, err)
	ctx := context.Background()
	for range 5 {
		d, err := g.Allow(ctx, []string{"client:acme", "all"}, 1)
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	mock.Add(10 * time.Millisecond)
	d, err := g.Allow(ctx, []string{"client:acme", "all"}, 1)
	require.NoError(t, err)
	require.True(t, d.Allowed, "100/s for a pro key")

	conc, err := sluice.NewConcurrencyLimit(2, time.Minute)
	require.NoError(t, err)
	defer conc.Close()
	leases, err := sluice.NewPerKey(func(context.Context, string) (*sluice.Limiter, error) { return conc, nil }, sluice.WithStore(st), sluice.WithClock(mock))
	require.NoError(t, err)
	g, err = sluice.NewGroup(leases, everyone)
	require.NoError(t, err)
	_, err = g.Allow(ctx, []string{"client:acme", "all"}, 1)
	require.ErrorIs(t, err, sluice.ErrUnsupported, "a group's leases are on fixed limits")
}

func TestPerKeyOnTheMemoryStoreAllocatesNothing(t *testing.T) {
	ts := gcraTiers(t)
	lim, err := sluice.NewPerKey(ts.lookup, sluice.WithClock(newMock()))
	require.NoError(t, err)
	defer lim.Close()
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := lim.Allow(ctx, "k", 1); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
}

func TestPerKeyLimitsOfAnotherAlgorithmAreRefused(t *testing.T) {
	rate, err := sluice.NewGCRA(sluice.PerSecond(1), 1)
	require.NoError(t, err)
	conc, err := sluice.NewConcurrencyLimit(1, time.Minute)
	require.NoError(t, err)
	ts := newTiers(t, rate, conc)
	ts.set("b", "pro")
	lim, err := sluice.NewPerKey(ts.lookup)
	require.NoError(t, err)
	defer lim.Close()
	ctx := context.Background()
	_, err = lim.Allow(ctx, "a", 1)
	require.NoError(t, err)
	_, err = lim.Allow(ctx, "b", 1)
	require.ErrorIs(t, err, sluice.ErrInvalidConfig, "the first limit looked up set the algorithm")
}

func TestOnlyALimiterOfItsOwnParamsHasFixedParams(t *testing.T) {
	ctx := context.Background()
	gcra, err := sluice.NewGCRA(sluice.PerSecond(10), 5)
	require.NoError(t, err)
	defer gcra.Close()
	own, fixed := gcra.Params()
	require.True(t, fixed)
	require.Equal(t, engine.KindGCRA, own.Kind)

	perKey, err := sluice.NewPerKey(func(context.Context, string) (*sluice.Limiter, error) { return gcra, nil })
	require.NoError(t, err)
	defer perKey.Close()
	p, fixed := perKey.Params()
	require.False(t, fixed, "its limit is looked up for each key")
	require.Zero(t, p, "it has no Params of its own")
	p, err = perKey.ParamsFor(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, own, p)
}
