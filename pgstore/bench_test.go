package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/testserver"
	"github.com/sluice-go/sluice/pgstore"
)

// BenchmarkApply measures decisions against a server the benchmark starts:
// one at a time (the round trip), and 16 and 32 at a time, on as many
// connections, on keys of their own and on one hot key, whose row lock
// serializes them. The store uses the database's clock; the GCRA admits
// nearly every request, so each decision writes its row.
func BenchmarkApply(b *testing.B) {
	pool := newPool(b, testserver.StartPostgres(b).URL, 32)
	st, _ := newStore(b, pool)
	p := engine.Params{Kind: engine.KindGCRA, Limit: 1e6, Interval: int64(time.Nanosecond)}
	ctx := context.Background()
	op := engine.Op{Verb: engine.VerbAllow, Cost: 1}
	apply := func(b *testing.B, key string) {
		if _, err := st.Apply(ctx, key, &p, op); err != nil {
			b.Error(err)
		}
	}
	// concurrently runs b.N decisions on n goroutines, goroutine g using
	// key(g), after warming up each connection's prepared statements.
	concurrently := func(b *testing.B, n int, key func(g int) string) {
		run := func(ops int64) {
			var next atomic.Int64
			var wg sync.WaitGroup
			for g := range n {
				wg.Go(func() {
					for next.Add(1) <= ops {
						apply(b, key(g))
					}
				})
			}
			wg.Wait()
		}
		run(int64(n) * 10)
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
	for _, n := range []int{16, 32} {
		b.Run(fmt.Sprintf("Parallel%d", n), func(b *testing.B) {
			concurrently(b, n, func(g int) string { return fmt.Sprintf("par%d", g) })
		})
		b.Run(fmt.Sprintf("Parallel%dHotKey", n), func(b *testing.B) {
			concurrently(b, n, func(int) string { return "hot" })
		})
	}
	// sequential runs decisions of op under q on one key, after warming
	// up the connection's prepared statement.
	sequential := func(b *testing.B, key string, q engine.Params, op engine.Op) {
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
		q := engine.Params{Kind: engine.KindGCRA, Limit: 1, Interval: int64(time.Microsecond)}
		sequential(b, "reserve", q, engine.Op{Verb: engine.VerbReserve, Cost: 1, MaxDelay: 1 << 60})
	})
	b.Run("AtMost", func(b *testing.B) {
		// A key kept full: every candidate cost is decided, and little
		// or nothing is granted.
		q := engine.Params{Kind: engine.KindGCRA, Limit: 10, Interval: int64(time.Millisecond)}
		sequential(b, "atmost", q, engine.Op{Verb: engine.VerbAtMost, Cost: 5})
	})
	b.Run("Check", func(b *testing.B) {
		check := engine.Op{Verb: engine.VerbCheck, Cost: 1}
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

// roundTrips is a pgx tracer that counts round trips to the server: each
// statement sent alone, and each batch.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// BenchmarkApplyGroup measures a group of 2 and of 3 limits decided as
// one (ApplyGroup), against the same limits decided by separate Applies,
// one at a time, by the database's clock and by the caller's. It reports
// the time per group and per limit decided, and the round trips per
// group. The limits admit every request, so that each group records in
// every limit.
func BenchmarkApplyGroup(b *testing.B) {
	cfg, err := pgxpool.ParseConfig(testserver.StartPostgres(b).URL)
	if err != nil {
		b.Fatal(err)
	}
	trips := &roundTrips{}
	cfg.ConnConfig.Tracer = trips
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	ctx := context.Background()
	limits := []engine.Params{
		{Kind: engine.KindGCRA, Limit: 1e6, Interval: int64(time.Nanosecond)},
		{Kind: engine.KindFixedWindow, Limit: 1e12, Interval: int64(24 * time.Hour)},
		{Kind: engine.KindTokenBucket, Limit: 1e6, Interval: int64(time.Millisecond), Amount: 1e6},
	}
	for _, clock := range []string{"DatabaseClock", "CallerClock"} {
		var opts []pgstore.Option
		if clock == "CallerClock" {
			opts = append(opts, pgstore.WithCallerClock())
		}
		st, _ := newStore(b, pool, opts...)
		for _, n := range []int{2, 3} {
			ops := make([]engine.GroupOp, n)
			for i := range ops {
				ops[i] = engine.GroupOp{Key: fmt.Sprintf("%s%d.%d", clock, n, i), Params: &limits[i], Op: engine.Op{Verb: engine.VerbAllow, Cost: 1}}
			}
			each := make([]engine.Decision, n)
			// run decides the limits once, as one group or separately.
			run := func(b *testing.B, group bool) {
				now := time.Now().UnixNano()
				for i := range ops {
					ops[i].Op.Now = now
				}
				if group {
					if _, err := st.ApplyGroup(ctx, ops, each); err != nil {
						b.Fatal(err)
					}
					return
				}
				for _, g := range ops {
					if _, err := st.Apply(ctx, g.Key, g.Params, g.Op); err != nil {
						b.Fatal(err)
					}
				}
			}
			for _, group := range []bool{true, false} {
				name := fmt.Sprintf("%s/Limits%d/Group", clock, n)
				if !group {
					name = fmt.Sprintf("%s/Limits%d/SeparateApplies", clock, n)
				}
				b.Run(name, func(b *testing.B) {
					for range 10 { // each connection's statements prepared
						run(b, group)
					}
					trips.n.Store(0)
					b.ReportAllocs()
					for b.Loop() {
						run(b, group)
					}
					b.ReportMetric(float64(trips.n.Load())/float64(b.N), "round-trips/op")
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/limit")
				})
			}
		}
	}
}

// BenchmarkNew measures creating a store, which reads only the statements
// that decide nothing (each algorithm's are read on its first decision).
// It needs no server: the pool dials on first use.
func BenchmarkNew(b *testing.B) {
	pool, err := pgxpool.New(b.Context(), "postgres://sluice@127.0.0.1:1/sluice")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pgstore.New(pool); err != nil {
			b.Fatal(err)
		}
	}
}
