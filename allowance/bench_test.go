package allowance_test

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/allowance"
	"github.com/sluice-go/sluice/engine"
)

// BenchmarkAllow is an admission on keys whose block covers it, beside
// the same admission on the in-memory store: 1 and 10,000 keys, one
// caller and every core. The limit (GCRA, 10^9 per 10^9 ns, whole
// blocks) never runs out, so every decision is an admission.
func BenchmarkAllow(b *testing.B) {
	p := engine.Params{Kind: engine.KindGCRA, Limit: 1e9, Interval: 1}
	for _, keys := range []int{1, 10_000} {
		names := make([]string, keys)
		for i := range names {
			names[i] = "k" + strconv.Itoa(i)
		}
		for _, via := range []string{"memstore", "allowance"} {
			mem := sluice.NewMemStore(sluice.MemStoreConfig{})
			b.Cleanup(func() { mem.Close() })
			var st engine.Store = mem
			if via == "allowance" {
				a, err := allowance.New(mem, allowance.Config{LeaseTime: time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				st = a
			}
			for _, name := range names { // a block for each key
				for range 8 {
					admit(b, st, &p, name)
				}
			}
			b.Run("keys="+strconv.Itoa(keys)+"/store="+via+"/seq", func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					admit(b, st, &p, names[i%keys])
					i++
				}
			})
			b.Run("keys="+strconv.Itoa(keys)+"/store="+via+"/parallel", func(b *testing.B) {
				b.ReportAllocs()
				var callers atomic.Int64
				b.RunParallel(func(pb *testing.PB) {
					i := int(callers.Add(1)) * keys / 2 // apart from the other callers
					for pb.Next() {
						admit(b, st, &p, names[i%keys])
						i += 7
					}
				})
			})
		}
	}
}

func admit(b *testing.B, st engine.Store, p *engine.Params, key string) {
	if d, err := st.Apply(ctx, key, p, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: start}); err != nil || !d.Allowed {
		b.Fatal("not admitted", d, err)
	}
}
