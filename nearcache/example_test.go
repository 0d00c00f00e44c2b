package nearcache_test

import (
	"context"
	"fmt"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/nearcache"
)

// A client floods one key. The near-cache answers the remote store's
// denials itself until they are due: here the remote store is a MemStore
// standing in for Redis, and a fake clock stands still, so every request
// after the first denial is answered locally.
func Example() {
	remote := sluice.NewMemStore(sluice.MemStoreConfig{}) // redisstore.New(client) in production
	defer remote.Close()
	st, err := nearcache.New(remote, nearcache.Config{MaxKeys: 10_000})
	if err != nil {
		panic(err)
	}
	clk := newFrozenClock()
	lim, err := sluice.NewGCRA(sluice.PerSecond(1), 5, sluice.WithStore(st), sluice.WithClock(clk))
	if err != nil {
		panic(err)
	}
	allowed := 0
	for range 100 {
		d, err := lim.Allow(context.Background(), "client-1", 1)
		if err != nil {
			panic(err)
		}
		if d.Allowed {
			allowed++
		}
	}
	s := st.Stats()
	fmt.Printf("allowed %d of 100; %d round trips, %d answered locally\n", allowed, s.Remote, s.Local)
	// Output:
	// allowed 5 of 100; 6 round trips, 94 answered locally
}
