package engine

import (
	"testing"
	"time"
)

// BenchmarkDecide measures the step alone, on a state held in memory, as
// MemStore runs it for every decision.
func BenchmarkDecide(b *testing.B) {
	const s = int64(time.Second)
	for _, tc := range []struct {
		name string
		p    Params
	}{
		{"gcra", Params{Kind: KindGCRA, Limit: 1e9, Interval: s}},
		{"token-bucket", Params{Kind: KindTokenBucket, Limit: 1e9, Interval: s, Amount: 1}},
		{"token-bucket-interval-refill", Params{Kind: KindTokenBucket, Limit: 1e9, Interval: s, Amount: 1, IntervalRefill: true}},
		{"fixed-window", Params{Kind: KindFixedWindow, Limit: 1e9, Interval: s}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			var st State
			now := int64(1e18)
			for b.Loop() {
				var d Decision
				now++
				tc.p.Decide(&st, Op{Verb: VerbAllow, Cost: 1, Now: now}, &d)
				if !d.Allowed {
					b.Fatal("denied")
				}
			}
		})
	}
}
