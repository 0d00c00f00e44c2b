package ratelimitheader

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
)

// gcra returns the Params of a GCRA of n per second with a burst of n.
func gcra(t *testing.T, n float64) engine.Params {
	t.Helper()
	lim, err := sluice.NewGCRA(sluice.PerSecond(n), n)
	require.NoError(t, err)
	defer lim.Close()
	p, _ := lim.Params()
	return p
}

func identity(p *Policy) *Policy { return p }

func TestFromParamsIsThePolicyNewGivesTheLimiter(t *testing.T) {
	slots, err := sluice.NewConcurrencyLimit(8, time.Minute)
	require.NoError(t, err)
	defer slots.Close()
	rate, err := sluice.NewTokenBucket(sluice.PerSecond(2), 10)
	require.NoError(t, err)
	defer rate.Close()
	for _, lim := range []*sluice.Limiter{slots, rate} {
		c := Config{Name: "tier", Unit: "calls"}
		byLimiter, err := New(lim, c)
		require.NoError(t, err)
		p, _ := lim.Params()
		byParams, err := FromParams(p, c)
		require.NoError(t, err)
		require.Equal(t, byLimiter, byParams)
	}
}

func TestCacheBuildsEachLimitsPolicyOnce(t *testing.T) {
	built := 0
	cache, err := NewCache(Config{Name: "plan"}, func(p *Policy) *Policy { built++; return p })
	require.NoError(t, err)
	free, pro := gcra(t, 10), gcra(t, 100)
	tests := []struct {
		params engine.Params
		field  string
		built  int
	}{
		0: {params: free, field: `"plan";q=10;w=1`, built: 1},
		1: {params: pro, field: `"plan";q=100;w=1`, built: 2},
		2: {params: free, field: `"plan";q=10;w=1`, built: 2},
		3: {params: pro, field: `"plan";q=100;w=1`, built: 2},
	}
	seen := map[engine.Params]*Policy{}
	for i, tt := range tests {
		p, err := cache.Get(tt.params)
		require.NoError(t, err, "row %d", i)
		require.Equal(t, tt.field, p.Field(), "row %d", i)
		require.Equal(t, tt.built, built, "row %d", i)
		if seen[tt.params] != nil {
			require.Same(t, seen[tt.params], p, "row %d: the policy kept", i)
		}
		seen[tt.params] = p
	}
}

func TestCacheHitAllocatesNothing(t *testing.T) {
	cache, err := NewCache(Config{}, identity)
	require.NoError(t, err)
	tiers := []engine.Params{gcra(t, 1), gcra(t, 10), gcra(t, 100)}
	for _, p := range tiers {
		_, err := cache.Get(p)
		require.NoError(t, err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		for _, p := range tiers {
			if _, err := cache.Get(p); err != nil {
				t.Fatal(err)
			}
		}
	})
	require.Zero(t, allocs)
}

func TestCacheKeepsEveryLimitUpToItsSizeThenReplacesInTurn(t *testing.T) {
	built := 0
	cache, err := NewCache(Config{}, func(p *Policy) *Policy { built++; return p })
	require.NoError(t, err)
	limits := make([]engine.Params, 3*CacheSize)
	for i := range limits {
		limits[i] = gcra(t, float64(i+1))
	}
	for _, p := range limits[:CacheSize] {
		_, err := cache.Get(p)
		require.NoError(t, err)
	}
	require.Equal(t, CacheSize, built)
	for _, p := range limits[:CacheSize] {
		_, err := cache.Get(p)
		require.NoError(t, err)
	}
	require.Equal(t, CacheSize, built, "up to its size, every limit stays")

	for _, p := range limits {
		got, err := cache.Get(p)
		require.NoError(t, err)
		want, err := FromParams(p, Config{})
		require.NoError(t, err)
		require.Equal(t, want.Field(), got.Field(), "a limit replaced is built again, alike")
	}
	kept := 0
	for i := range cache.slots {
		if cache.slots[i].Load() != nil {
			kept++
		}
	}
	require.Equal(t, CacheSize, kept, "never more than its size")
}

func TestCacheDoesNotKeepALimitItCannotState(t *testing.T) {
	tests := []struct {
		name   string
		c      Config
		params engine.Params
	}{
		{name: "below one whole unit", params: engine.Params{Kind: engine.KindGCRA, Limit: 0.5, Interval: int64(time.Second)}},
		{name: "below the minimum cost", c: Config{MinCost: 20}, params: gcra(t, 10)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cache, err := NewCache(tt.c, identity)
			require.NoError(t, err)
			for range 2 {
				_, err = cache.Get(tt.params)
				require.ErrorIs(t, err, sluice.ErrInvalidConfig)
			}
			for i := range cache.slots {
				require.Nil(t, cache.slots[i].Load())
			}
		})
	}
}

func TestNewCacheRefusesWhatNoPolicyCouldCarry(t *testing.T) {
	for _, c := range []Config{
		{Name: "tier\n"},
		{Unit: "caf\u00e9"},
		{Window: -time.Second, WindowSet: true},
	} {
		_, err := NewCache(c, identity)
		require.ErrorIs(t, err, sluice.ErrInvalidConfig, "%+v", c)
	}
}

func TestCacheIsSafeForConcurrentUse(t *testing.T) {
	cache, err := NewCache(Config{}, identity)
	require.NoError(t, err)
	limits := make([]engine.Params, 2*CacheSize)
	for i := range limits {
		limits[i] = gcra(t, float64(i+1))
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 4 * len(limits) {
				p := limits[(g*7+i)%len(limits)]
				got, err := cache.Get(p)
				if err != nil || got.quota != int64(p.Limit) {
					t.Errorf("limit %v: policy %v, %v", p.Limit, got.Field(), err)
					return
				}
			}
		})
	}
	wg.Wait()
}
