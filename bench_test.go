package sluice_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-go/sluice"
)

// benchLimiters builds one limiter of each algorithm allowing limit per
// hour, with bursts and windows of limit. A huge limit exercises the admit
// path, a limit of one the deny path; either way each key's state lives for
// the whole benchmark, so every call finds an existing key. opts are given
// to every limiter.
func benchLimiters(b *testing.B, limit float64, opts ...sluice.Option) map[string]*sluice.Limiter {
	b.Helper()
	must := func(l *sluice.Limiter, err error) *sluice.Limiter {
		if err != nil {
			b.Fatal(err)
		}
		return l
	}
	rate := sluice.Per(min(limit, 3600), time.Hour)
	with := func(o ...sluice.Option) []sluice.Option { return append(o, opts...) }
	return map[string]*sluice.Limiter{
		"LeakyBucket":    must(sluice.NewLeakyBucket(limit, rate, opts...)),
		"GCRA":           must(sluice.NewGCRA(rate, limit, opts...)),
		"TokenBucket":    must(sluice.NewTokenBucket(rate, limit, with()...)),
		"FixedWindow":    must(sluice.NewFixedWindow(limit, time.Hour, opts...)),
		"SlidingLog":     must(sluice.NewSlidingLog(limit, time.Hour, with(sluice.WithMaxEntries(64))...)),
		"SlidingCounter": must(sluice.NewSlidingCounter(limit, time.Hour, opts...)),
	}
}

var algorithms = []string{"LeakyBucket", "GCRA", "TokenBucket", "FixedWindow", "SlidingLog", "SlidingCounter"}

func keys(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = "client-" + strconv.Itoa(i)
	}
	return ks
}

// BenchmarkAllow measures Allow on existing keys of the default in-memory
// store: one hot key and 10,000 keys, sequential and parallel, on the admit
// path (a limit never reached) and the deny path (a limit always reached).
func BenchmarkAllow(b *testing.B) { benchAllow(b) }

// BenchmarkAllowObserved is BenchmarkAllow with an observer that counts
// the decisions by outcome (allowed or not), as a metrics adapter does.
func BenchmarkAllowObserved(b *testing.B) {
	var allowed, others atomic.Int64
	benchAllow(b, sluice.WithName("bench"), sluice.WithObserver(func(_ context.Context, e sluice.Event) {
		if e.Outcome() == "allowed" {
			allowed.Add(1)
		} else {
			others.Add(1)
		}
	}))
}

func benchAllow(b *testing.B, opts ...sluice.Option) {
	ctx := context.Background()
	for _, path := range []struct {
		name  string
		limit float64
	}{{"admit", 1e9}, {"deny", 1}} {
		lims := benchLimiters(b, path.limit, opts...)
		for _, alg := range algorithms {
			lim := lims[alg]
			for _, n := range []int{1, 10_000} {
				ks := keys(n)
				for _, k := range ks { // the keys exist before timing
					if _, err := lim.Allow(ctx, k, 1); err != nil {
						b.Fatal(err)
					}
				}
				name := path.name + "/" + alg + "/keys=" + strconv.Itoa(n)
				b.Run(name+"/seq", func(b *testing.B) {
					b.ReportAllocs()
					i := 0
					for b.Loop() {
						if _, err := lim.Allow(ctx, ks[i%n], 1); err != nil {
							b.Fatal(err)
						}
						i++
					}
				})
				b.Run(name+"/parallel", func(b *testing.B) {
					b.ReportAllocs()
					var next atomic.Int64
					b.RunParallel(func(pb *testing.PB) {
						i := int(next.Add(7919)) // each goroutine starts elsewhere
						for pb.Next() {
							if _, err := lim.Allow(ctx, ks[i%n], 1); err != nil {
								b.Error(err)
								return
							}
							i++
						}
					})
				})
			}
		}
	}
}

// BenchmarkAllowPerKey measures Allow on a GCRA whose limit is looked up
// per key ([sluice.NewPerKey]) beside the same GCRA with a fixed limit,
// on existing keys of the default in-memory store, admitting: with a
// lookup that returns one limiter (what looking up costs sluice) and one
// that reads each key's plan from a map (a lookup as users write them).
func BenchmarkAllowPerKey(b *testing.B) {
	rate := sluice.Per(3600, time.Hour)
	fixed, err := sluice.NewGCRA(rate, 1e9)
	if err != nil {
		b.Fatal(err)
	}
	ks := keys(10_000)
	plans := make(map[string]*sluice.Limiter, len(ks))
	for _, k := range ks {
		plans[k] = fixed
	}
	one, err := sluice.NewPerKey(func(context.Context, string) (*sluice.Limiter, error) { return fixed, nil })
	if err != nil {
		b.Fatal(err)
	}
	byMap, err := sluice.NewPerKey(func(_ context.Context, key string) (*sluice.Limiter, error) { return plans[key], nil })
	if err != nil {
		b.Fatal(err)
	}
	benchAllowOnKeys(b, ks, namedLimiter{"fixed", fixed}, namedLimiter{"lookup=one", one}, namedLimiter{"lookup=map", byMap})
}

// A namedLimiter is a limiter a benchmark names.
type namedLimiter struct {
	name string
	lim  *sluice.Limiter
}

// benchAllowOnKeys benchmarks Allow on each of lims, in order, over 1 and
// over 10,000 of ks, each key decided once before.
func benchAllowOnKeys(b *testing.B, ks []string, lims ...namedLimiter) {
	ctx := context.Background()
	for _, l := range lims {
		name, lim := l.name, l.lim
		for _, n := range []int{1, 10_000} {
			for _, k := range ks[:n] {
				if _, err := lim.Allow(ctx, k, 1); err != nil {
					b.Fatal(err)
				}
			}
			b.Run(name+"/keys="+strconv.Itoa(n), func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if _, err := lim.Allow(ctx, ks[i%n], 1); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
}

// BenchmarkAllowCalendar decides on a monthly quota in Paris beside an
// aligned fixed window of the same limit: the calendar's windows are
// computed once per month, and a decision allocates nothing.
func BenchmarkAllowCalendar(b *testing.B) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		b.Fatal(err)
	}
	monthly, err := sluice.NewCalendarWindow(1e15, sluice.Month, paris)
	if err != nil {
		b.Fatal(err)
	}
	aligned, err := sluice.NewFixedWindow(1e15, 30*24*time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	benchAllowOnKeys(b, keys(10_000), namedLimiter{"aligned", aligned}, namedLimiter{"calendar", monthly})
}
