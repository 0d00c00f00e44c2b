package nearcache_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/nearcache"
)

// BenchmarkCachedDenial measures a limiter's Allow on a key the cache
// answers: a client flooding one key, sequential and from every core.
func BenchmarkCachedDenial(b *testing.B) {
	remote := sluice.NewMemStore(sluice.MemStoreConfig{})
	defer remote.Close()
	st, err := nearcache.New(remote, nearcache.Config{})
	if err != nil {
		b.Fatal(err)
	}
	lim, err := sluice.NewGCRA(sluice.Per(1, time.Hour), 1, sluice.WithStore(st))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for range 2 { // admitted, then denied for an hour
		if _, err := lim.Allow(ctx, "flood", 1); err != nil {
			b.Fatal(err)
		}
	}
	deny := func() {
		d, err := lim.Allow(ctx, "flood", 1)
		if err != nil || d.Allowed {
			b.Fatal("not a denial", d, err)
		}
	}
	b.Run("seq", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			deny()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				deny()
			}
		})
	})
	if s := st.Stats(); s.Remote != 2 {
		b.Fatalf("%d round trips, want the 2 before the flood", s.Remote)
	}
}
