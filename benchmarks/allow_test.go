package benchmarks

import (
	"runtime"
	"strconv"
	"testing"
)

// BenchmarkAllow measures one decision of cost one on an existing key, for
// each library: on one hot key, on 10,000 keys and on 1,000,000 keys taken
// in turn, sequentially and from GOMAXPROCS goroutines, on the admit path
// and on the deny path. Names read path/keys/lib/mode, so that benchstat
// -col /lib puts the libraries side by side.
func BenchmarkAllow(b *testing.B) {
	for _, pa := range paths() {
		b.Run("path="+pa.name, func(b *testing.B) {
			for _, n := range []int{1, 10_000, 1_000_000} {
				ks := keys(n)
				b.Run("keys="+strconv.Itoa(n), func(b *testing.B) {
					for _, p := range peers() {
						if p.keyless && n > 1 {
							continue
						}
						b.Run("lib="+p.name, func(b *testing.B) { benchAllow(b, p, pa, ks) })
					}
				})
			}
		})
	}
}

// benchAllow builds p's limiter, warms every key before timing, and
// runs the sequential and parallel loops on it.
func benchAllow(b *testing.B, p peer, pa path, ks []string) {
	lim := newKeyed(b, p, pa.limit)
	warm(b, lim, ks, pa.warm)
	expectTracked(b, lim, len(ks))
	// Start timing on a heap that holds this library's keys, and not the
	// previous library's garbage.
	runtime.GC()

	b.Run("mode=seq", func(b *testing.B) { runSeq(b, lim, pa, ks) })
	b.Run("mode=par", func(b *testing.B) { runParallel(b, lim, pa, ks, 1) })
	expectTracked(b, lim, len(ks))
}
