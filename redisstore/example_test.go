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

// Three tenants' limits checked in one round trip, as a job dispatcher
// would before handing out work.
func ExampleStore_ApplyBatch() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer client.Close()
	st, err := redisstore.New(client, redisstore.WithPrefix("jobs:"))
	if err != nil {
		log.Fatal(err)
	}
	lim, err := sluice.NewTokenBucket(sluice.PerMinute(100), sluice.WithStore(st))
	if err != nil {
		log.Fatal(err)
	}
	p := lim.Params() // in the server-clock mode, Op.Now is not needed
	var reqs []redisstore.Request
	for _, tenant := range []string{"acme", "globex", "initech"} {
		reqs = append(reqs, redisstore.Request{Key: tenant, Params: &p, Op: sluice.Op{Verb: sluice.VerbAllow, Cost: 10}})
	}
	for i, r := range st.ApplyBatch(context.Background(), reqs) {
		if r.Err != nil {
			log.Fatal(r.Err)
		}
		fmt.Println(reqs[i].Key, r.Decision.Allowed)
	}
}
