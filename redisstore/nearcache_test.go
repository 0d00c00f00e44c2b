package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/nearcachetest"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/nearcache"
	"github.com/sluice-go/sluice/redisstore"
)

func TestNearCacheChangesNoDecision(t *testing.T) {
	c := newClient(t, testserver.StartRedis(t).Addr)
	for seed := range uint64(2) {
		alone := newStore(t, c, redisstore.WithCallerClock(testSkew))
		remote := newStore(t, c, redisstore.WithCallerClock(testSkew))
		st := nearcachetest.Compare(t, alone, remote, seed, 150)
		t.Logf("seed %d: %d answered locally, %d by Redis", seed, st.Local, st.Remote)
	}
}

// roundTrips is a store that counts the calls that reach Redis.
type roundTrips struct {
	engine.Store
	n atomic.Int64
}

func (r *roundTrips) Apply(ctx context.Context, key string, p *engine.Params, op engine.Op) (engine.Decision, error) {
	r.n.Add(1)
	return r.Store.Apply(ctx, key, p, op)
}

// BenchmarkFlood is one client flooding one key at 50 times its limit
// (GCRA, 100/s, bursts of 10) through Redis, with and without the
// near-cache: each request comes 1/5000 s of simulated time after the
// one before. It reports the round trips to Redis per request and the
// decisions per second of real time, one caller at a time and with 16
// concurrent callers.
func BenchmarkFlood(b *testing.B) {
	srv := testserver.StartRedis(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 32, ContextTimeoutEnabled: true})
	b.Cleanup(func() { c.Close() })
	p := engine.Params{Kind: engine.KindGCRA, Limit: 10, Interval: int64(10 * time.Millisecond)}
	const gap = int64(time.Second) / 5000 // 50 times 100/s
	for _, cached := range []bool{false, true} {
		for _, callers := range []int{1, 16} {
			name := "direct"
			if cached {
				name = "nearcache"
			}
			b.Run(name+"/callers="+strconv.Itoa(callers), func(b *testing.B) {
				// A parallel benchmark's function runs once per round, and
				// each round starts its simulated time afresh: on keys of its
				// own, or it would find the last round's state in its future.
				prefix := fmt.Sprintf("%s:%d:", b.Name(), rand.Uint64())
				rs, err := redisstore.New(c, redisstore.WithPrefix(prefix), redisstore.WithCallerClock(testSkew))
				require.NoError(b, err)
				counted := &roundTrips{Store: rs}
				var st engine.Store = counted
				var nc *nearcache.Store
				if cached {
					nc, err = nearcache.New(counted, nearcache.Config{})
					require.NoError(b, err)
					st = nc
				}
				var now atomic.Int64
				now.Store(base)
				var allowed atomic.Int64
				b.ReportAllocs()
				b.SetParallelism(max(callers/runtime.GOMAXPROCS(0), 1))
				if callers == 1 {
					b.SetParallelism(1)
				}
				run := func(pb interface{ Next() bool }) {
					for pb.Next() {
						d, err := st.Apply(context.Background(), "flooder", &p, allow(1, now.Add(gap)))
						if err != nil {
							b.Error(err)
							return
						}
						if d.Allowed {
							allowed.Add(1)
						}
					}
				}
				if callers == 1 {
					run(loop{b})
				} else {
					b.RunParallel(func(pb *testing.PB) { run(pb) })
				}
				b.ReportMetric(float64(counted.n.Load())/float64(b.N), "roundtrips/op")
				b.ReportMetric(float64(allowed.Load())/float64(b.N), "allowed/op")
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
			})
		}
	}
}

// loop adapts b.Loop to the shape of a testing.PB.
type loop struct{ b *testing.B }

func (l loop) Next() bool { return l.b.Loop() }
