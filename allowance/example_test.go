package allowance_test

import (
	"context"
	"fmt"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/allowance"
)

// Four processes share one limit of 1,000 requests a second (bursts of
// 400) on a key that each of them offers 4,000 a second. Each decides in
// process from blocks it leases from the shared store: here a MemStore
// stands in for Redis, and a fake clock moves a millisecond at a time.
func Example() {
	remote := sluice.NewMemStore(sluice.MemStoreConfig{}) // redisstore.New(client) in production
	defer remote.Close()
	clk := clock.NewMock()
	clk.Set(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	var (
		stores   []*allowance.Store
		limiters []*sluice.Limiter
	)
	for range 4 {
		st, err := allowance.New(remote, allowance.Config{LeaseTime: 50 * time.Millisecond})
		if err != nil {
			panic(err)
		}
		lim, err := sluice.NewGCRA(sluice.PerSecond(1000), 400, sluice.WithStore(st), sluice.WithClock(clk))
		if err != nil {
			panic(err)
		}
		stores, limiters = append(stores, st), append(limiters, lim)
	}
	admitted := 0
	for range 1000 { // one second
		for _, lim := range limiters {
			for range 4 {
				d, err := lim.Allow(context.Background(), "api", 1)
				if err != nil {
					panic(err)
				}
				if d.Allowed {
					admitted++
				}
			}
		}
		clk.Add(time.Millisecond)
	}
	var trips uint64
	for _, st := range stores {
		trips += st.Stats().Remote
	}
	fmt.Printf("admitted %d of 16000 (the limit allows 1400 in this second)\n", admitted)
	fmt.Printf("%.3f round trips per admission\n", float64(trips)/float64(admitted))
	// Output:
	// admitted 1304 of 16000 (the limit allows 1400 in this second)
	// 0.064 round trips per admission
}
