package redisstore_test

import (
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/redisstore"
)

// BenchmarkApply measures one decision's round trip to a local Redis, one
// at a time, and the throughput of 16 and 64 concurrent callers, with the
// server's clock, on 1024 keys.
func BenchmarkApply(b *testing.B) {
	srv := testserver.StartRedis(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64})
	b.Cleanup(func() { c.Close() })
	st, err := redisstore.New(c, redisstore.WithPrefix("bench:"))
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	for _, p := range []sluice.Params{
		{Kind: sluice.KindGCRA, Limit: 100, Interval: int64(time.Millisecond)},
		{Kind: sluice.KindSlidingLog, Limit: 100, Interval: int64(time.Second), MaxEntries: 100},
	} {
		b.Run(fmt.Sprintf("%v/Sequential", p.Kind), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := st.Apply(b.Context(), keys[i%len(keys)], &p, allow(1, 0)); err != nil {
					b.Fatal(err)
				}
			}
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
	p := sluice.Params{Kind: sluice.KindGCRA, Limit: 100, Interval: int64(time.Millisecond)}
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
	p := sluice.Params{Kind: sluice.KindGCRA, Limit: 1, Interval: int64(time.Hour)}
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	apply := func(b *testing.B, key string, op sluice.Op) sluice.Decision {
		d, err := st.Apply(b.Context(), key, &p, op)
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	reserve := sluice.Op{Verb: sluice.VerbReserve, Cost: 1, MaxDelay: 1 << 60}
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
			apply(b, key, sluice.Op{Verb: sluice.VerbCancel, Cost: 1, At: d.At})
		}
	})
	b.Run("AllowAtMost", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			apply(b, "g"+keys[i%len(keys)], sluice.Op{Verb: sluice.VerbAtMost, Cost: 5})
		}
	})
}
