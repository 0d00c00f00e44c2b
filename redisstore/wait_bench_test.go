package redisstore_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/internal/waitbench"
	"github.com/sluice-go/sluice/redisstore"
)

// BenchmarkWait is the core module's BenchmarkWait on a local Redis, on
// the server's clock (see waitbench.Run): calls/op there counts round
// trips.
func BenchmarkWait(b *testing.B) {
	srv := testserver.StartRedis(b)
	// A connection for every waiter: the pool must not be what they queue on.
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64})
	b.Cleanup(func() { c.Close() })
	st, err := redisstore.New(c, redisstore.WithPrefix("bench:"))
	if err != nil {
		b.Fatal(err)
	}
	waitbench.Run(b, st)
}
