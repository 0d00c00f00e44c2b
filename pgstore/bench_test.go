package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/internal/testserver"
)

// BenchmarkApply measures decisions against a server the benchmark starts:
// one at a time (the round trip), and 16 at a time on keys of their own
// and on one hot key, whose row lock serializes them. The store uses the
// database's clock; the GCRA admits nearly every request, so each decision
// writes its row.
func BenchmarkApply(b *testing.B) {
	pool := newPool(b, testserver.StartPostgres(b).URL, 16)
	st, _ := newStore(b, pool)
	p := sluice.Params{Kind: sluice.KindGCRA, Limit: 1e6, Interval: int64(time.Nanosecond)}
	ctx := context.Background()
	op := sluice.Op{Verb: sluice.VerbAllow, Cost: 1}
	apply := func(b *testing.B, key string) {
		if _, err := st.Apply(ctx, key, &p, op); err != nil {
			b.Error(err)
		}
	}
	// concurrently runs b.N decisions on 16 goroutines, goroutine g using
	// key(g), after warming up each connection's prepared statements.
	concurrently := func(b *testing.B, key func(g int) string) {
		run := func(n int64) {
			var next atomic.Int64
			var wg sync.WaitGroup
			for g := range 16 {
				wg.Go(func() {
					for next.Add(1) <= n {
						apply(b, key(g))
					}
				})
			}
			wg.Wait()
		}
		run(16 * 10)
		b.ReportAllocs()
		b.ResetTimer()
		run(int64(b.N))
	}

	b.Run("Sequential", func(b *testing.B) {
		for range 10 {
			apply(b, "seq")
		}
		b.ReportAllocs()
		for b.Loop() {
			apply(b, "seq")
		}
	})
	b.Run("Parallel16", func(b *testing.B) {
		concurrently(b, func(g int) string { return fmt.Sprintf("par%d", g) })
	})
	b.Run("Parallel16HotKey", func(b *testing.B) {
		concurrently(b, func(int) string { return "hot" })
	})
	// sequential runs decisions of op under q on one key, after warming
	// up the connection's prepared statement.
	sequential := func(b *testing.B, key string, q sluice.Params, op sluice.Op) {
		for range 10 {
			if _, err := st.Apply(ctx, key, &q, op); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := st.Apply(ctx, key, &q, op); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("Reserve", func(b *testing.B) {
		// One unit per microsecond and no burst: each booking waits
		// behind the previous one.
		q := sluice.Params{Kind: sluice.KindGCRA, Limit: 1, Interval: int64(time.Microsecond)}
		sequential(b, "reserve", q, sluice.Op{Verb: sluice.VerbReserve, Cost: 1, MaxDelay: 1 << 60})
	})
	b.Run("AtMost", func(b *testing.B) {
		// A key kept full: every candidate cost is decided, and little
		// or nothing is granted.
		q := sluice.Params{Kind: sluice.KindGCRA, Limit: 10, Interval: int64(time.Millisecond)}
		sequential(b, "atmost", q, sluice.Op{Verb: sluice.VerbAtMost, Cost: 5})
	})
	b.Run("Check", func(b *testing.B) {
		check := sluice.Op{Verb: sluice.VerbCheck, Cost: 1}
		for range 10 {
			if _, err := st.Apply(ctx, "seq", &p, check); err != nil {
				b.Error(err)
			}
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := st.Apply(ctx, "seq", &p, check); err != nil {
				b.Error(err)
			}
		}
	})
}
