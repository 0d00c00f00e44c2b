// Package waitbench is the benchmark of Wait that the in-memory store and
// the Redis store both run: the same waiters, the same limit and the same
// metrics, on whichever store it is given.
package waitbench

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
)

// Run measures Wait on one hot key of st: 1, 16 and 64 goroutines each
// call Wait(ctx, key, 1) until b.N waits are done in all, on a GCRA
// admitting one unit per millisecond with a burst of 1, on the system
// clock. Besides time and allocations per Wait, it reports the store calls
// each Wait made (calls/op) and the longest any one Wait took (max-ns),
// which shows whether the waiters are served in turn.
//
// ns/op cannot fall below the key's 1ms per unit, however many waiters
// there are; the excess is what waiting costs. A faster rate would measure
// something else: the runtime's timers fire up to about a millisecond late
// when the process is otherwise idle, and a Redis round trip outlasts a
// 20µs gap.
func Run(b *testing.B, st engine.Store) {
	for _, waiters := range []int{1, 16, 64} {
		b.Run("Waiters"+strconv.Itoa(waiters), func(b *testing.B) {
			counted := &counting{Store: st}
			lim, err := sluice.NewGCRA(sluice.Per(1, time.Millisecond), 1, sluice.WithStore(counted))
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			key := "wait:" + strconv.Itoa(waiters)
			if err := lim.Reset(ctx, key); err != nil { // fresh for each b.N
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			var (
				done    atomic.Int64
				longest atomic.Int64
				wg      sync.WaitGroup
			)
			for range waiters {
				wg.Go(func() {
					var most time.Duration
					for done.Add(1) <= int64(b.N) {
						start := time.Now()
						if err := lim.Wait(ctx, key, 1); err != nil {
							b.Error(err)
							return
						}
						most = max(most, time.Since(start))
					}
					for { // a compare-and-swap loop: atomic.Int64 has no Max
						cur := longest.Load()
						if int64(most) <= cur || longest.CompareAndSwap(cur, int64(most)) {
							break
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(counted.calls.Load())/float64(b.N), "calls/op")
			b.ReportMetric(float64(longest.Load()), "max-ns")
		})
	}
}

// counting is a Store that counts the decisions it passes on to the store
// it wraps.
type counting struct {
	engine.Store
	calls atomic.Int64
}

func (c *counting) Apply(ctx context.Context, key string, p *engine.Params, op engine.Op) (engine.Decision, error) {
	c.calls.Add(1)
	return c.Store.Apply(ctx, key, p, op)
}
