package benchmarks

import (
	"context"
	"runtime"
	"strconv"
	"testing"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/redisstore"
)

// A redisPeer is a library under test on Redis.
type redisPeer struct {
	name string
	new  func(*redis.Client, limit) (keyed, error)
}

// redisPeers returns sluice first, as the base the others are compared
// with.
func redisPeers() []redisPeer {
	return []redisPeer{
		{name: "sluice", new: newSluiceRedis},
		{name: "redis_rate", new: newRedisRate},
	}
}

// redisPaths returns the paths of [paths] with the admit path's burst cut
// to 1e6: the Redis store's script computes in doubles, exact only below
// 2^53 ns, so burst × interval must stay under about 104 days there.
func redisPaths() []path {
	ps := paths()
	ps[0].limit.burst = 1e6
	return ps
}

func newSluiceRedis(c *redis.Client, l limit) (keyed, error) {
	store, err := redisstore.New(c, redisstore.WithPrefix("sluice:"))
	if err != nil {
		return nil, err
	}
	lim, err := newSluiceGCRA(l, store, c)
	if err != nil {
		return nil, err
	}
	return &sluiceRedis{sluiceGCRA: lim, store: store}, nil
}

// sluiceRedis is sluice's GCRA on its Redis store, which can also decide
// a batch of requests in one round trip.
type sluiceRedis struct {
	*sluiceGCRA
	store *redisstore.Store
}

// A batcher decides requests of cost one for many keys in one round trip.
type batcher interface {
	AllowBatch(ctx context.Context, keys []string) ([]bool, error)
}

func (s *sluiceRedis) AllowBatch(ctx context.Context, keys []string) ([]bool, error) {
	p, _ := s.lim.Params()
	reqs := make([]redisstore.Request, len(keys))
	for i, k := range keys {
		reqs[i] = redisstore.Request{Key: k, Params: &p, Op: engine.Op{Verb: engine.VerbAllow, Cost: 1}}
	}
	allowed := make([]bool, len(keys))
	for i, r := range s.store.ApplyBatch(ctx, reqs) {
		if r.Err != nil {
			return nil, r.Err
		}
		allowed[i] = r.Decision.Allowed
	}
	return allowed, nil
}

// redisRate is go-redis/redis_rate's GCRA.
type redisRate struct {
	lim    *redis_rate.Limiter
	limit  redis_rate.Limit
	client *redis.Client
}

func newRedisRate(c *redis.Client, l limit) (keyed, error) {
	return &redisRate{
		lim:    redis_rate.NewLimiter(c),
		limit:  redis_rate.Limit{Rate: 1, Period: l.per, Burst: l.burst},
		client: c,
	}, nil
}

func (r *redisRate) Allow(ctx context.Context, key string) (bool, error) {
	res, err := r.lim.Allow(ctx, key, r.limit)
	if err != nil {
		return false, err
	}
	return res.Allowed > 0, nil
}

func (r *redisRate) Warm(ctx context.Context, key string, n int) error {
	_, err := r.lim.AllowN(ctx, key, r.limit, n)
	return err
}

func (r *redisRate) Close() error { return r.client.Close() }

// BenchmarkRedis measures decisions on 10,000 existing keys in a
// redis-server it starts on 127.0.0.1, with the server's clock: one
// decision's round trip (mode=seq), the throughput of 16 and 64
// goroutines (mode=par16, mode=par64), and for a library that batches,
// one goroutine sending 16 decisions per round trip (mode=batch16, time
// per decision). Every library gets a client of its
// own, with a pool of 64 connections so that no goroutine waits for one,
// and an empty database.
func BenchmarkRedis(b *testing.B) {
	srv := testserver.StartRedis(b)
	ks := keys(10_000)
	for _, pa := range redisPaths() {
		b.Run("path="+pa.name, func(b *testing.B) {
			for _, p := range redisPeers() {
				b.Run("lib="+p.name, func(b *testing.B) { benchRedis(b, p, pa, srv.Addr, ks) })
			}
		})
	}
}

func benchRedis(b *testing.B, p redisPeer, pa path, addr string, ks []string) {
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64})
	if err := c.FlushDB(context.Background()).Err(); err != nil {
		b.Fatal(err)
	}
	lim, err := p.new(c, pa.limit)
	if err != nil {
		c.Close()
		b.Fatalf("%s: %v", p.name, err)
	}
	b.Cleanup(func() {
		if err := lim.Close(); err != nil {
			b.Errorf("%s: close: %v", p.name, err)
		}
	})
	warm(b, lim, ks, pa.warm)

	b.Run("mode=seq", func(b *testing.B) { serverTime(b, addr, func() { runSeq(b, lim, pa, ks) }) })
	procs := runtime.GOMAXPROCS(0)
	for _, goroutines := range []int{16, 64} {
		parallelism := (goroutines + procs - 1) / procs
		b.Run("mode=par"+strconv.Itoa(parallelism*procs), func(b *testing.B) {
			serverTime(b, addr, func() { runParallel(b, lim, pa, ks, parallelism) })
		})
	}
	if bl, ok := lim.(batcher); ok {
		b.Run("mode=batch16", func(b *testing.B) { serverTime(b, addr, func() { runBatch(b, bl, pa, ks, 16) }) })
	}
}

// serverTime runs bench, which times b.N decisions, and reports the time
// the server at addr spent running them (server-µs/op: Lua's share of
// INFO commandstats, read outside the timed loop), which is what sizes a
// Redis for a given traffic, whatever the round trips cost.
func serverTime(b *testing.B, addr string, bench func()) {
	before, _, err := testserver.ScriptStats(addr)
	if err != nil {
		b.Fatal(err)
	}
	bench()
	after, _, err := testserver.ScriptStats(addr)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(after-before)/float64(b.N), "server-µs/op")
}

// runBatch times lim's decisions on ks in turn from one goroutine, sent
// size to a round trip, and requires each to take pa. A b.N that is not a
// multiple of size ends with a shorter batch.
func runBatch(b *testing.B, lim batcher, pa path, ks []string, size int) {
	ctx := context.Background()
	b.ReportAllocs()
	batch := make([]string, 0, size)
	send := func() {
		allowed, err := lim.AllowBatch(ctx, batch)
		if err != nil {
			b.Fatal(err)
		}
		for i, a := range allowed {
			if a != pa.admits {
				b.Fatalf("%q: allowed = %v on the %s path", batch[i], a, pa.name)
			}
		}
		batch = batch[:0]
	}
	i := 0
	for b.Loop() {
		if batch = append(batch, ks[i]); len(batch) == size {
			send()
		}
		if i++; i == len(ks) {
			i = 0
		}
	}
	if len(batch) > 0 {
		send()
	}
}
