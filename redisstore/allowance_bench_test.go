package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/allowance"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/guarantees"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/nearcache"
	"github.com/sluice-go/sluice/redisstore"
)

// BenchmarkAllowance is 4 processes of 16 callers each deciding as fast
// as they can on 1, 100 and 10,000 keys through one Redis, each process
// with a client and a store of its own: the Redis store alone, under a
// near-cache, and under the allowance Store (its defaults: blocks leased
// for 100 ms, at most an eighth of the limit each). Every key has the
// same limit (GCRA, 10,000/s, bursts of 1,000); decisions are made in real
// time, on Redis's clock. It reports the round trips to Redis per
// decision and per admission, the decisions per second, the share
// admitted, the share of the keys' limits over the run that was admitted
// (limit-used), and the cost admitted on a key beyond what its limit
// allows over the whole run (overlimit), which must be zero. Run it with
// -benchtime of a second or more, so that a hot key's burst is a small
// part of what it admits.
func BenchmarkAllowance(b *testing.B) {
	srv := testserver.StartRedis(b)
	p := engine.Params{Kind: engine.KindGCRA, Limit: 1000, Interval: int64(100 * time.Microsecond)}
	const procs, callers = 4, 16
	for _, keys := range []int{1, 100, 10_000} {
		names := make([]string, keys)
		for i := range names {
			names[i] = "k" + strconv.Itoa(i)
		}
		for _, via := range []string{"direct", "nearcache", "allowance"} {
			b.Run(fmt.Sprintf("keys=%d/store=%s", keys, via), func(b *testing.B) {
				prefix := fmt.Sprintf("%s:%d:", b.Name(), rand.Uint64())
				stores := make([]engine.Store, procs)
				counted := make([]*roundTrips, procs)
				for i := range stores {
					c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: callers, ContextTimeoutEnabled: true})
					b.Cleanup(func() { c.Close() })
					rs, err := redisstore.New(c, redisstore.WithPrefix(prefix))
					require.NoError(b, err)
					counted[i] = &roundTrips{Store: rs}
					stores[i] = counted[i]
					switch via {
					case "nearcache":
						stores[i], err = nearcache.New(stores[i], nearcache.Config{})
					case "allowance":
						stores[i], err = allowance.New(stores[i], allowance.Config{})
					}
					require.NoError(b, err)
				}
				admitted := make([]atomic.Int64, keys)
				var handed atomic.Int64
				b.ReportAllocs()
				first := time.Now().UnixNano()
				b.ResetTimer()
				var wg sync.WaitGroup
				for g := range procs * callers {
					st := stores[g/callers]
					wg.Go(func() {
						rng := rand.New(rand.NewPCG(uint64(g), 1))
						for handed.Add(1) <= int64(b.N) {
							k := rng.IntN(keys)
							d, err := st.Apply(context.Background(), names[k], &p, allow(1, time.Now().UnixNano()))
							if err != nil {
								b.Error(err)
								return
							}
							if d.Allowed {
								admitted[k].Add(1)
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				allowed := guarantees.Bound(p, time.Now().UnixNano()-first+1, 1)
				var total, over float64
				for i := range admitted {
					n := float64(admitted[i].Load())
					total += n
					over += max(n-allowed, 0)
				}
				if over > 0 {
					b.Errorf("%.0f admitted beyond the limits", over)
				}
				var trips float64
				for _, c := range counted {
					trips += float64(c.n.Load())
				}
				b.ReportMetric(trips/float64(b.N), "roundtrips/op")
				b.ReportMetric(trips/max(total, 1), "roundtrips/admitted")
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
				b.ReportMetric(total/float64(b.N), "admitted/op")
				b.ReportMetric(over, "overlimit")
				b.ReportMetric(total/(allowed*float64(keys)), "limit-used")
			})
		}
	}
}
