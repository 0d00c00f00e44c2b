// Package plantest is a per-key limiter's lookup for tests: each key's
// limit is its plan's tier, which a test may change, or make fail, between
// requests.
package plantest

import (
	"context"
	"sync"
	"testing"

	"github.com/sluice-go/sluice"
)

// Plans looks up each key's tier: "free" unless a test sets another.
type Plans struct {
	tiers map[string]*sluice.Limiter

	mu   sync.Mutex
	plan map[string]string
	err  error
	keys []string // every key looked up, in order
}

// New returns plans of tiers, whose limiters it closes when the test
// ends.
func New(t testing.TB, tiers map[string]*sluice.Limiter) *Plans {
	t.Helper()
	t.Cleanup(func() {
		for _, lim := range tiers {
			lim.Close()
		}
	})
	return &Plans{tiers: tiers, plan: map[string]string{}}
}

// Set makes plan key's plan.
func (p *Plans) Set(key, plan string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.plan[key] = plan
}

// Fail makes every lookup fail with err, or none if err is nil.
func (p *Plans) Fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.err = err
}

// Lookup is the per-key limiter's lookup.
func (p *Plans) Lookup(ctx context.Context, key string) (*sluice.Limiter, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = append(p.keys, key)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.err != nil {
		return nil, p.err
	}
	plan := p.plan[key]
	if plan == "" {
		plan = "free"
	}
	return p.tiers[plan], nil
}

// LookedUp returns every key looked up so far, in order.
func (p *Plans) LookedUp() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.keys...)
}

// Limiter returns a per-key limiter of p's tiers on clock, with opts,
// closed when the test ends.
func (p *Plans) Limiter(t testing.TB, clock sluice.Clock, opts ...sluice.Option) *sluice.Limiter {
	t.Helper()
	lim, err := sluice.NewPerKey(p.Lookup, append([]sluice.Option{sluice.WithClock(clock)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close() })
	return lim
}

// Must returns lim, a tier built for a test, or panics with err.
func Must(lim *sluice.Limiter, err error) *sluice.Limiter {
	if err != nil {
		panic(err)
	}
	return lim
}

// BenchLimiter returns the limiter the adapters' benchmarks compare a
// per-key limit with a fixed one by: a GCRA of 10^9 per second and as
// much burst, fixed, or perKey, looked up in a map of tiers that holds
// another for one client; closed when the benchmark ends.
func BenchLimiter(b *testing.B, perKey bool) *sluice.Limiter {
	b.Helper()
	tier := Must(sluice.NewGCRA(sluice.PerSecond(1e9), 1e9))
	b.Cleanup(func() { tier.Close() })
	if !perKey {
		return tier
	}
	other := Must(sluice.NewGCRA(sluice.PerSecond(1e8), 1e8))
	b.Cleanup(func() { other.Close() })
	plans := map[string]*sluice.Limiter{"198.51.100.7": other}
	lim := Must(sluice.NewPerKey(func(_ context.Context, key string) (*sluice.Limiter, error) {
		if plan, ok := plans[key]; ok {
			return plan, nil
		}
		return tier, nil
	}))
	b.Cleanup(func() { lim.Close() })
	return lim
}

// Admitted counts the Allows of cost one that lim admits for key at its
// clock's instant, which the test holds still.
func Admitted(t testing.TB, lim *sluice.Limiter, key string) int {
	t.Helper()
	for n := 0; ; n++ {
		d, err := lim.Allow(context.Background(), key, 1)
		if err != nil {
			t.Fatalf("Allow(%q): %v", key, err)
		}
		if !d.Allowed {
			return n
		}
	}
}
