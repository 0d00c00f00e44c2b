package sluice_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice"
)

// Limits per plan, looked up by key, and a customer who upgrades: what
// they used is kept, and the new limit applies at once.
func ExampleNewPerKey() {
	fake := newExampleClock()
	free, _ := sluice.NewGCRA(sluice.PerSecond(1), 2)
	pro, _ := sluice.NewGCRA(sluice.PerSecond(10), 2)
	var upgraded atomic.Bool
	lim, err := sluice.NewPerKey(func(ctx context.Context, key string) (*sluice.Limiter, error) {
		if strings.HasPrefix(key, "acme:") && upgraded.Load() {
			return pro, nil
		}
		return free, nil
	}, sluice.WithClock(fake))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for range 3 {
		d, _ := lim.Allow(ctx, "acme:api", 1)
		fmt.Println("free:", d.Allowed, d.RetryAfter)
	}
	upgraded.Store(true)
	d, _ := lim.Allow(ctx, "acme:api", 1)
	fmt.Println("pro: ", d.Allowed, d.RetryAfter)
	fake.Add(100 * time.Millisecond)
	d, _ = lim.Allow(ctx, "acme:api", 1)
	fmt.Println("pro: ", d.Allowed, d.RetryAfter)
	// Output:
	// free: true 0s
	// free: true 0s
	// free: false 1s
	// pro:  false 100ms
	// pro:  true 0s
}
