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
