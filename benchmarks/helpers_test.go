package benchmarks

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// newKeyed builds p's limiter for l, closed when b ends.
func newKeyed(b *testing.B, p peer, l limit) keyed {
	b.Helper()
	lim, err := p.new(l)
	if err != nil {
		b.Fatalf("%s: %v", p.name, err)
	}
	b.Cleanup(func() {
		if err := lim.Close(); err != nil {
			b.Errorf("%s: close: %v", p.name, err)
		}
	})
	return lim
}

// warm makes one request of cost n on every key, so that the keys exist.
// It takes the keys in a shuffled order, the same for every library:
// requests come from clients in no particular order, and warming them in
// the order the timed loops take them would lay out the objects of a
// library that allocates one per key in that order, so that the loops
// read them as a stream the processor prefetches.
func warm(b *testing.B, lim keyed, ks []string, n int) {
	b.Helper()
	ctx := context.Background()
	order := rand.New(rand.NewPCG(1, 2)).Perm(len(ks))
	for _, i := range order {
		if err := lim.Warm(ctx, ks[i], n); err != nil {
			b.Fatalf("warming %q: %v", ks[i], err)
		}
	}
}

// expect checks, on the first and last keys, that a request takes the
// path the scenario measures: that the admit path admits and the deny
// path denies.
func expect(b *testing.B, lim keyed, pa path, ks []string) {
	b.Helper()
	ctx := context.Background()
	for _, k := range []string{ks[0], ks[len(ks)-1]} {
		allowed, err := lim.Allow(ctx, k)
		if err != nil {
			b.Fatalf("%q: %v", k, err)
		}
		if allowed != pa.admits {
			b.Fatalf("%q: allowed = %v on the %s path", k, allowed, pa.name)
		}
	}
}

// expectTracked checks that a limiter that can count its keys holds n,
// so that what is measured is the path of an existing key.
func expectTracked(b *testing.B, lim keyed, n int) {
	b.Helper()
	if c, ok := lim.(interface{ Len() int }); ok {
		if got := c.Len(); got != n {
			b.Fatalf("the store holds %d keys, not %d: keys expired before the timed loop came back to them", got, n)
		}
	}
}

// errorCount counts the decisions that fail in a parallel loop, where a
// library may give up on a contended key, and keeps the first error.
type errorCount struct {
	n     atomic.Int64
	once  sync.Once
	first error
}

func (c *errorCount) add(err error) {
	c.n.Add(1)
	c.once.Do(func() { c.first = err })
}

// report adds the failures, if any, to b's results as errors/op.
func (c *errorCount) report(b *testing.B) {
	if n := c.n.Load(); n > 0 {
		b.ReportMetric(float64(n)/float64(b.N), "errors/op")
		b.Logf("%d of %d decisions failed; the first: %v", n, b.N, c.first)
	}
}

// heap is what the runtime reports of the heap after a full collection.
type heap struct {
	live    uint64 // bytes of live objects
	mallocs uint64 // objects allocated so far
}

// collect collects until a collection frees almost nothing, yielding in
// between, so that objects kept only by a finalizer that has not run yet
// (ulule's store has one) are gone too, and returns the heap's state.
func collect() heap {
	const settled = 64 << 10
	var ms runtime.MemStats
	prev := ^uint64(0)
	for range 10 {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc+settled >= prev {
			break
		}
		prev = ms.HeapAlloc
		runtime.Gosched()
	}
	return heap{live: ms.HeapAlloc, mallocs: ms.Mallocs}
}

// runSeq times lim's decisions on ks in turn from one goroutine, checking
// before and after that they take pa.
func runSeq(b *testing.B, lim keyed, pa path, ks []string) {
	ctx := context.Background()
	expect(b, lim, pa, ks)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := lim.Allow(ctx, ks[i]); err != nil {
			b.Fatal(err)
		}
		if i++; i == len(ks) {
			i = 0
		}
	}
	expect(b, lim, pa, ks)
}

// runParallel times lim's decisions on ks from parallelism × GOMAXPROCS
// goroutines, each taking the keys in turn from its own starting point,
// and checks before and after that they take pa.
func runParallel(b *testing.B, lim keyed, pa path, ks []string, parallelism int) {
	ctx := context.Background()
	expect(b, lim, pa, ks)
	b.ReportAllocs()
	b.SetParallelism(parallelism)
	var next atomic.Int64
	var failed errorCount
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(7919)) % len(ks)
		for pb.Next() {
			if _, err := lim.Allow(ctx, ks[i]); err != nil {
				failed.add(err)
			}
			if i++; i == len(ks) {
				i = 0
			}
		}
	})
	b.StopTimer()
	failed.report(b)
	expect(b, lim, pa, ks)
}
