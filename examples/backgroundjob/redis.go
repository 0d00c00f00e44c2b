package main

import (
	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/redisstore"
)

// sharedStore returns a store that keeps the pace in the Redis server of
// client, so that every process calling the API shares it. Its keys start
// with "backgroundjob:". By default decisions use the Redis server's clock,
// so processes on hosts whose clocks disagree still share one timeline.
func sharedStore(client redis.UniversalClient, opts ...redisstore.Option) (*redisstore.Store, error) {
	return redisstore.New(client, append([]redisstore.Option{redisstore.WithPrefix("backgroundjob:")}, opts...)...)
}
