package redisstore_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/redisstore"
)

// BenchmarkApply measures one decision's round trip to a local Redis, one
// at a time, with the time the server spent running its script (INFO
// commandstats), and the throughput of 16 and 64 concurrent callers, with
// the server's clock, on 1024 keys per algorithm.
func BenchmarkApply(b *testing.B) {
	srv := testserver.StartRedis(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64})
	b.Cleanup(func() { c.Close() })
	st, err := redisstore.New(c, redisstore.WithPrefix("bench:"))
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range []engine.Params{
		{Kind: engine.KindGCRA, Limit: 100, Interval: int64(time.Millisecond)},
		{Kind: engine.KindTokenBucket, Limit: 100, Interval: int64(time.Second), Amount: 100},
		{Kind: engine.KindFixedWindow, Limit: 1e6, Interval: int64(24 * time.Hour)},
		{Kind: engine.KindSlidingLog, Limit: 100, Interval: int64(time.Second), MaxEntries: 100},
	} {
		keys := make([]string, 1024)
		for i := range keys {
			keys[i] = fmt.Sprintf("%v:user:%d", p.Kind, i)
		}
		b.Run(fmt.Sprintf("%v/Sequential", p.Kind), func(b *testing.B) {
			b.ReportAllocs()
			usec := scriptMicros(b, c)
			for i := 0; b.Loop(); i++ {
				if _, err := st.Apply(b.Context(), keys[i%len(keys)], &p, allow(1, 0)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(scriptMicros(b, c)-usec)/float64(b.N), "script-µs/op")
		})
		for _, callers := range []int{16, 64} {
			b.Run(fmt.Sprintf("%v/Callers%d", p.Kind, callers), func(b *testing.B) {
				b.ReportAllocs()
				b.SetParallelism(max(callers/runtime.GOMAXPROCS(0), 1))
				var next atomic.Uint64
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						key := keys[next.Add(1)%uint64(len(keys))]
						if _, err := st.Apply(b.Context(), key, &p, allow(1, 0)); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkApplyReplicaAcks measures what waiting for a replica costs: a
// GCRA decision on a master with one replica, both local, without and
// with WithReplicaAcks(1, time.Second), one caller at a time and 16.
// Compare the two with: benchstat -col /acks.
func BenchmarkApplyReplicaAcks(b *testing.B) {
	nodes := testserver.StartRedisWithReplicas(b, 1)
	c := redis.NewClient(&redis.Options{Addr: nodes[0].Addr, PoolSize: 64})
	b.Cleanup(func() { c.Close() })
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	p := engine.Params{Kind: engine.KindGCRA, Limit: 100, Interval: int64(time.Millisecond)}
	for _, mode := range []struct {
		name string
		opts []redisstore.Option
	}{
		{"acks=0", nil},
		{"acks=1", []redisstore.Option{redisstore.WithReplicaAcks(1, time.Second)}},
	} {
		st, err := redisstore.New(c, append([]redisstore.Option{redisstore.WithPrefix("bench:")}, mode.opts...)...)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(mode.name+"/callers=1", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := st.Apply(b.Context(), keys[i%len(keys)], &p, allow(1, 0)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(mode.name+"/callers=16", func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(max(16/runtime.GOMAXPROCS(0), 1))
			var next atomic.Uint64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					key := keys[next.Add(1)%uint64(len(keys))]
					if _, err := st.Apply(b.Context(), key, &p, allow(1, 0)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkApplyShaping measures the verbs that book ahead or grant in
// part, one decision at a time on the server's clock, on 1024 keys of a
// GCRA admitting one unit an hour: Reserve, each turn booked behind the
// previous ones on its key; Reserve then the Cancel that gives it back
// (two decisions per op); and AllowAtMost of 5 units on keys with one
// left, then none, which decides several costs in its one script call.
func BenchmarkApplyShaping(b *testing.B) {
	srv := testserver.StartRedis(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	b.Cleanup(func() { c.Close() })
	st, err := redisstore.New(c, redisstore.WithPrefix("bench:"))
	if err != nil {
		b.Fatal(err)
	}
	p := engine.Params{Kind: engine.KindGCRA, Limit: 1, Interval: int64(time.Hour)}
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	apply := func(b *testing.B, key string, op engine.Op) engine.Decision {
		d, err := st.Apply(b.Context(), key, &p, op)
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	reserve := engine.Op{Verb: engine.VerbReserve, Cost: 1, MaxDelay: 1 << 60}
	b.Run("Reserve", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			apply(b, "r"+keys[i%len(keys)], reserve)
		}
	})
	b.Run("ReserveAndCancel", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			key := "c" + keys[i%len(keys)]
			d := apply(b, key, reserve)
			apply(b, key, engine.Op{Verb: engine.VerbCancel, Cost: 1, At: d.At})
		}
	})
	b.Run("AllowAtMost", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			apply(b, "g"+keys[i%len(keys)], engine.Op{Verb: engine.VerbAtMost, Cost: 5})
		}
	})
}

// BenchmarkApplyGroup measures a group decision of 2 and 3 limits (5,000
// per second and 10,000 a day per API key, and a per-key token bucket of
// 100 a second), each limit on its own key under the API key's hash tag,
// on 1024 API keys of a local Redis, one decision at a time on the
// server's clock: as one ApplyGroup, and as the separate Applies a group
// replaces (which charge the limits that admit a request another denies).
// It reports the client's round trips per decision (commands and
// pipelines sent, counted by a go-redis hook) and the time the server
// spent running scripts per decision (INFO commandstats).
func BenchmarkApplyGroup(b *testing.B) {
	srv := testserver.StartRedis(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	b.Cleanup(func() { c.Close() })
	trips := &sentCommands{}
	c.AddHook(trips)
	st, err := redisstore.New(c, redisstore.WithPrefix("bench:"))
	if err != nil {
		b.Fatal(err)
	}
	limits := []engine.Params{
		{Kind: engine.KindGCRA, Limit: 5000, Interval: int64(time.Second) / 5000},
		{Kind: engine.KindFixedWindow, Limit: 10000, Interval: int64(24 * time.Hour)},
		{Kind: engine.KindTokenBucket, Limit: 100, Interval: int64(time.Second), Amount: 100},
	}
	names := []string{"second", "day", "bucket"}
	apiKeys := make([][]string, 1024)
	for i := range apiKeys {
		for _, name := range names {
			apiKeys[i] = append(apiKeys[i], "{api:"+strconv.Itoa(i)+"}:"+name)
		}
	}
	for _, n := range []int{2, 3} {
		ops := make([]engine.GroupOp, n)
		each := make([]engine.Decision, n)
		measure := func(b *testing.B, decide func(keys []string)) {
			b.ReportAllocs()
			trips.n.Store(0)
			usec := scriptMicros(b, c)
			for i := 0; b.Loop(); i++ {
				decide(apiKeys[i%len(apiKeys)])
			}
			b.ReportMetric(float64(trips.n.Load())/float64(b.N), "roundtrips/op")
			b.ReportMetric(float64(scriptMicros(b, c)-usec)/float64(b.N), "script-µs/op")
		}
		b.Run(fmt.Sprintf("limits=%d/Group", n), func(b *testing.B) {
			measure(b, func(keys []string) {
				for j := range ops {
					ops[j] = engine.GroupOp{Key: keys[j], Params: &limits[j], Op: engine.Op{Verb: engine.VerbAllow, Cost: 1}}
				}
				if _, err := st.ApplyGroup(b.Context(), ops, each); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run(fmt.Sprintf("limits=%d/Separate", n), func(b *testing.B) {
			measure(b, func(keys []string) {
				for j := range n {
					if _, err := st.Apply(b.Context(), keys[j], &limits[j], allow(1, 0)); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// sentCommands is a go-redis hook that counts what the client sends: each
// command and each pipeline is one round trip.
type sentCommands struct{ n atomic.Int64 }

func (h *sentCommands) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *sentCommands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *sentCommands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// scriptMicros returns the microseconds the server has spent running
// decisions (FCALL, or EVALSHA and EVAL before the function library), by
// INFO commandstats, read without the counting hook.
func scriptMicros(b *testing.B, c *redis.Client) int64 {
	usec, _ := scriptStats(b, c.Options().Addr)
	return usec
}

// scriptStats is testserver.ScriptStats, failing b on an error.
func scriptStats(b *testing.B, addr string) (usec, calls int64) {
	b.Helper()
	usec, calls, err := testserver.ScriptStats(addr)
	if err != nil {
		b.Fatal(err)
	}
	return usec, calls
}

// BenchmarkServerTime measures the time Redis spends on each decision
// (INFO commandstats' usec per call, after CONFIG RESETSTAT), for every
// algorithm admitting and denying, one caller at a time, and GCRA's from
// 16 callers too, on 1024 keys of a local Redis with the server's clock.
// Compare two versions of the store with: benchstat -filter
// .unit:server-µs/op.
func BenchmarkServerTime(b *testing.B) {
	srv := testserver.StartRedis(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64})
	b.Cleanup(func() { c.Close() })
	st, err := redisstore.New(c, redisstore.WithPrefix("bench:"))
	if err != nil {
		b.Fatal(err)
	}
	const s, h = int64(time.Second), int64(time.Hour)
	// Admitting: more than 1024 keys see in a run; denying: one unit an
	// hour, taken before the run.
	for _, tc := range []struct {
		name        string
		admit, deny engine.Params
	}{
		{"LeakyBucket",
			engine.Params{Kind: engine.KindLeakyBucket, Limit: 1e6, Interval: s, Amount: 1e6},
			engine.Params{Kind: engine.KindLeakyBucket, Limit: 1, Interval: h, Amount: 1}},
		{"GCRA",
			engine.Params{Kind: engine.KindGCRA, Limit: 1e6, Interval: 1000},
			engine.Params{Kind: engine.KindGCRA, Limit: 1, Interval: h}},
		{"TokenBucket",
			engine.Params{Kind: engine.KindTokenBucket, Limit: 1e6, Interval: s, Amount: 1e6},
			engine.Params{Kind: engine.KindTokenBucket, Limit: 1, Interval: h, Amount: 1}},
		{"IntervalRefill",
			engine.Params{Kind: engine.KindTokenBucket, Limit: 1e6, Interval: s, Amount: 1e6, IntervalRefill: true},
			engine.Params{Kind: engine.KindTokenBucket, Limit: 1, Interval: h, Amount: 1, IntervalRefill: true}},
		{"FixedWindow",
			engine.Params{Kind: engine.KindFixedWindow, Limit: 1e9, Interval: 24 * h},
			engine.Params{Kind: engine.KindFixedWindow, Limit: 1, Interval: 24 * h}},
		{"SlidingLog",
			engine.Params{Kind: engine.KindSlidingLog, Limit: 1e6, Interval: s, MaxEntries: 10},
			engine.Params{Kind: engine.KindSlidingLog, Limit: 1, Interval: h, MaxEntries: 10}},
		{"SlidingCounter",
			engine.Params{Kind: engine.KindSlidingCounter, Limit: 1e9, Interval: h},
			engine.Params{Kind: engine.KindSlidingCounter, Limit: 1, Interval: h}},
		{"Concurrency", // admitting: leases of a microsecond, expired by the key's next call
			engine.Params{Kind: engine.KindConcurrency, Limit: 1e6, Interval: 1000, MaxEntries: 10},
			engine.Params{Kind: engine.KindConcurrency, Limit: 1, Interval: h, MaxEntries: 10}},
	} {
		for _, mode := range []struct {
			name string
			p    engine.Params
		}{{"admit", tc.admit}, {"deny", tc.deny}} {
			keys := make([]string, 1024)
			for i := range keys {
				keys[i] = fmt.Sprintf("%s:%s:%d", tc.name, mode.name, i)
				if _, err := st.Apply(b.Context(), keys[i], &mode.p, allow(1, 0)); err != nil {
					b.Fatal(err)
				}
			}
			callers := []int{1}
			if tc.name == "GCRA" {
				callers = append(callers, 16)
			}
			for _, n := range callers {
				b.Run(fmt.Sprintf("%s/%s/callers=%d", tc.name, mode.name, n), func(b *testing.B) {
					if _, err := testserver.Do(srv.Addr, "CONFIG", "RESETSTAT"); err != nil {
						b.Fatal(err)
					}
					var next atomic.Uint64
					decide := func() {
						key := keys[next.Add(1)%uint64(len(keys))]
						d, err := st.Apply(b.Context(), key, &mode.p, allow(1, 0))
						if err != nil || d.Allowed != (mode.name == "admit") {
							b.Errorf("%s: %+v, %v", key, d, err)
						}
					}
					if n == 1 {
						for b.Loop() {
							decide()
						}
					} else {
						b.SetParallelism(max(n/runtime.GOMAXPROCS(0), 1))
						b.RunParallel(func(pb *testing.PB) {
							for pb.Next() {
								decide()
							}
						})
					}
					usec, calls := scriptStats(b, srv.Addr)
					b.ReportMetric(float64(usec)/float64(calls), "server-µs/op")
				})
			}
		}
	}
}

// BenchmarkAllowPerKey measures Allow through a GCRA with a fixed limit
// and through a per-key limiter ([sluice.NewPerKey]) whose lookup reads
// each key's tier from a map, one call at a time, on 1024 keys of a local
// Redis, with the server's time per decision: a per-key limit costs its
// lookup in the process, and nothing on the server.
func BenchmarkAllowPerKey(b *testing.B) {
	srv := testserver.StartRedis(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	b.Cleanup(func() { c.Close() })
	st, err := redisstore.New(c, redisstore.WithPrefix("bench:"))
	if err != nil {
		b.Fatal(err)
	}
	free, err := sluice.NewGCRA(sluice.PerSecond(1000), 100)
	if err != nil {
		b.Fatal(err)
	}
	pro, err := sluice.NewGCRA(sluice.PerSecond(10000), 100)
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, 1024)
	plans := make(map[string]*sluice.Limiter, len(keys))
	for i := range keys {
		keys[i] = "perkey:user:" + strconv.Itoa(i)
		plans[keys[i]] = free
	}
	fixed, err := sluice.NewGCRA(sluice.PerSecond(1000), 100, sluice.WithStore(st))
	if err != nil {
		b.Fatal(err)
	}
	perKey, err := sluice.NewPerKey(func(_ context.Context, key string) (*sluice.Limiter, error) {
		if lim, ok := plans[key]; ok {
			return lim, nil
		}
		return pro, nil
	}, sluice.WithStore(st))
	if err != nil {
		b.Fatal(err)
	}
	for _, lim := range []struct {
		name string
		lim  *sluice.Limiter
	}{{"limit=fixed", fixed}, {"limit=per-key", perKey}} {
		b.Run(lim.name, func(b *testing.B) {
			b.ReportAllocs()
			usec := scriptMicros(b, c)
			for i := 0; b.Loop(); i++ {
				if _, err := lim.lim.Allow(b.Context(), keys[i%len(keys)], 1); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(scriptMicros(b, c)-usec)/float64(b.N), "server-µs/op")
		})
	}
}
