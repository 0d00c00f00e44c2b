package benchmarks

import (
	"runtime"
	"testing"
)

// BenchmarkMemory measures the heap each library retains per tracked key
// after one request on each of 1,000,000 distinct keys (bytes/key), and
// what adding a key costs (allocs/new-key, ns/new-key; ns/op, B/op and
// allocs/op are per 1,000,000 keys). It uses the deny path, under which every library keeps
// every key for an hour.
func BenchmarkMemory(b *testing.B) {
	const n = 1_000_000
	ks := keys(n)
	deny := paths()[1]
	for _, p := range peers() {
		if p.keyless {
			continue
		}
		b.Run("lib="+p.name, func(b *testing.B) {
			b.ReportAllocs()
			var added heap
			for b.Loop() {
				added = fill(b, p, deny, ks)
			}
			b.ReportMetric(float64(added.live)/n, "bytes/key")
			b.ReportMetric(float64(added.mallocs)/n, "allocs/new-key")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/new-key")
		})
	}
}

// fill builds p's limiter for pa, warms every key, and returns the live
// heap and the allocations that added. Only building the limiter and the
// requests are timed.
func fill(b *testing.B, p peer, pa path, ks []string) heap {
	b.StopTimer()
	before := collect()
	b.StartTimer()
	lim, err := p.new(pa.limit)
	if err != nil {
		b.Fatalf("%s: %v", p.name, err)
	}
	warm(b, lim, ks, pa.warm)
	b.StopTimer()
	after := collect()
	expectTracked(b, lim, len(ks))
	runtime.KeepAlive(lim)
	if err := lim.Close(); err != nil {
		b.Fatalf("%s: close: %v", p.name, err)
	}
	b.StartTimer()
	return heap{live: after.live - min(before.live, after.live), mallocs: after.mallocs - before.mallocs}
}
