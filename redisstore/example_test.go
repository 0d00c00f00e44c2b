package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/redisstore"
)

// A GCRA limiter of 10 requests per second and bursts of 5 per client,
// shared by every process that uses the same Redis.
func Example() {
	client := redis.NewClient(&redis.Options{
		Addr:                  "localhost:6379",
		ContextTimeoutEnabled: true, // a context's deadline bounds each call
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

// On a Redis Cluster: a Cluster client, given some of the nodes, finds the
// others and sends each decision to the master of its key's slot. After a
// master dies, the store has the client reload the slots' layout, so that
// decisions go to the promoted replica as soon as it takes over.
func Example_cluster() {
	client := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 []string{"redis-1:6379", "redis-2:6379", "redis-3:6379"},
		ContextTimeoutEnabled: true,
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
	_, _ = lim.Allow(context.Background(), "203.0.113.7", 1)
}

// With Sentinel: a failover client asks the Sentinels for the current
// master, and again after a failover.
func Example_sentinel() {
	client := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:            "mymaster",
		SentinelAddrs:         []string{"sentinel-1:26379", "sentinel-2:26379", "sentinel-3:26379"},
		ContextTimeoutEnabled: true,
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
	_, _ = lim.Allow(context.Background(), "203.0.113.7", 1)
}

// A login limit that a failover must not reset: each attempt returns only
// once a replica has it, so the replica that takes over after the master
// dies still counts it.
func ExampleWithReplicaAcks() {
	client := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:            "mymaster",
		SentinelAddrs:         []string{"sentinel-1:26379", "sentinel-2:26379", "sentinel-3:26379"},
		ContextTimeoutEnabled: true,
	})
	defer client.Close()
	st, err := redisstore.New(client, redisstore.WithPrefix("login:"),
		redisstore.WithReplicaAcks(1, 100*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	lim, err := sluice.NewTokenBucket(sluice.Per(5, time.Hour), 5, sluice.WithStore(st))
	if err != nil {
		log.Fatal(err)
	}
	d, err := lim.Allow(context.Background(), "alice@example.com", 1)
	switch {
	case errors.Is(err, redisstore.ErrNotReplicated):
		// The master decided, but no replica has it yet: a failover now
		// would forget this attempt. Act on d, or deny to be safe.
		fmt.Println("unreplicated:", d.Allowed)
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Println(d.Allowed)
	}
}

// Turns booked in Redis: every process that waits on a key joins one
// queue there, each Wait booking its turn with one script call and
// sleeping until it, and a caller that gives up hands its turn back. A
// turn's instant (Decision.At) is on the Redis server's clock.
func Example_reserve() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer client.Close()
	st, err := redisstore.New(client, redisstore.WithPrefix("export:"))
	if err != nil {
		log.Fatal(err)
	}
	lim, err := sluice.NewGCRA(sluice.PerSecond(10), 1, sluice.WithStore(st))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := lim.Wait(ctx, "acme", 1); err != nil { // book the next turn, sleep until it
		log.Fatal(err)
	}
	r, err := lim.Reserve(ctx, "acme", 1, time.Second) // a turn at most a second away
	if err != nil {
		log.Fatal(err)
	}
	if !r.Allowed {
		fmt.Println("busy: a turn within a second comes in", r.RetryAfter)
		return
	}
	if err := r.Wait(ctx); err != nil { // or r.Cancel(ctx) to hand the turn back
		log.Fatal(err)
	}
	d, err := lim.AllowAtMost(ctx, "acme", 50) // as many of 50 rows as fit now
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("export", d.Granted, "rows now")
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
	lim, err := sluice.NewTokenBucket(sluice.PerMinute(100), 100, sluice.WithStore(st))
	if err != nil {
		log.Fatal(err)
	}
	p, _ := lim.Params() // in the server-clock mode, Op.Now is not needed
	var reqs []redisstore.Request
	for _, tenant := range []string{"acme", "globex", "initech"} {
		reqs = append(reqs, redisstore.Request{Key: tenant, Params: &p, Op: engine.Op{Verb: engine.VerbAllow, Cost: 10}})
	}
	for i, r := range st.ApplyBatch(context.Background(), reqs) {
		if r.Err != nil {
			log.Fatal(r.Err)
		}
		fmt.Println(reqs[i].Key, r.Decision.Allowed)
	}
}

// "10 per second and 1,000 per day per API key" on a Redis Cluster, each
// request decided against both limits in one script call: admitted and
// charged to both, or to neither. The keys of one API key share the hash
// tag "{api:KEY}", so they live in one slot; a global cap's key cannot, and
// is decided as a call of its own.
func Example_group() {
	client := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 []string{"redis-1:6379", "redis-2:6379", "redis-3:6379"},
		ContextTimeoutEnabled: true,
	})
	defer client.Close()
	st, err := redisstore.New(client, redisstore.WithPrefix("myapp:"))
	if err != nil {
		log.Fatal(err)
	}
	perSecond, err := sluice.NewGCRA(sluice.PerSecond(10), 10, sluice.WithStore(st))
	if err != nil {
		log.Fatal(err)
	}
	perDay, err := sluice.NewFixedWindow(1000, 24*time.Hour, sluice.WithStore(st))
	if err != nil {
		log.Fatal(err)
	}
	global, err := sluice.NewTokenBucket(sluice.PerSecond(5000), 5000, sluice.WithStore(st))
	if err != nil {
		log.Fatal(err)
	}
	api, err := sluice.NewGroup(perSecond, perDay)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	apiKey := "k-123"
	d, err := api.Allow(ctx, []string{"{api:" + apiKey + "}:second", "{api:" + apiKey + "}:day"}, 1)
	if errors.Is(err, redisstore.ErrCrossSlot) {
		log.Fatal("the keys of a group need one hash tag: ", err)
	}
	if err != nil {
		log.Fatal(err) // Redis failed: deny or allow is the caller's choice
	}
	if !d.Allowed {
		fmt.Println("retry after", d.RetryAfter, "left today:", d.Limits()[1].Remaining)
		return
	}
	g, err := global.Allow(ctx, "global", 1) // another slot: a call of its own
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(g.Allowed)
}
