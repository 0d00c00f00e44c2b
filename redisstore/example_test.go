package redisstore_test

import (
	"context"
	"fmt"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/redisstore"
)

// A GCRA limiter of 10 requests per second and bursts of 5 per client,
// shared by every process that uses the same Redis.
func Example() {
	client := redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:                 []string{"localhost:6379"}, // one node, Sentinel or Cluster
		ContextTimeoutEnabled: true,                       // a context's deadline bounds each call
	})
	defer client.Close()
	st, err := redisstore.New(client, redisstore.WithPrefix("myapp:"))
	if err != nil {
		log.Fatal(err)
	}
	lim, err := sluice.NewGCRA(sluice.PerSecond(10), 5, sluice.WithStore(st))
	if err != nil {
		log.Fatal(err)
	}
	d, err := lim.Allow(context.Background(), "203.0.113.7", 1)
	if err != nil {
		log.Fatal(err) // Redis failed: deny or allow is the caller's choice
	}
	fmt.Println(d.Allowed, d.Remaining, d.RetryAfter)
}
