package sluice_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-go/sluice"
)

// The shaping verbs on existing keys of a limiter's default in-memory
// store, as BenchmarkAllow measures Allow: one hot key and 10,000 keys,
// from one goroutine (seq) and from GOMAXPROCS goroutines (parallel). Each
// scenario builds a limiter of its own, which its sequential and parallel
// runs share, so that no scenario inherits the queue another booked, and
// checks on every call that the call took the path the scenario names.
//
// The limiters are called through the Limiter interface, as code written
// against it calls them: there Reserve's *Reservation escapes to the heap.
// Called on a concrete limiter (*sluice.Limiter, ...) whose reservation does
// not outlive the caller, Reserve is inlined and the reservation may stay
// on the stack: no allocation.

// reservable lists the algorithms that book reservations; the window
// algorithms return ErrUnsupported.
var reservable = []string{"GCRA", "LeakyBucket", "TokenBucket", "TokenBucketInterval"}

// longDelay is a maxDelay no queue in these benchmarks reaches: ten years,
// well inside the 2^60 ns a reservation may wait.
const longDelay = 10 * 365 * 24 * time.Hour

// newShaper returns a limiter of alg on its own in-memory store, closed
// when b ends, allowing burst units, one coming back every per; a window
// algorithm allows burst per window of the time the burst takes to come
// back, at most an hour.
func newShaper(b *testing.B, alg string, burst float64, per time.Duration) *sluice.Limiter {
	b.Helper()
	rate := sluice.Per(1, per)
	window := min(time.Duration(burst*float64(per)), time.Hour)
	var (
		lim *sluice.Limiter
		err error
	)
	switch alg {
	case "GCRA":
		lim, err = sluice.NewGCRA(rate, burst)
	case "LeakyBucket":
		lim, err = sluice.NewLeakyBucket(burst, rate)
	case "TokenBucket":
		lim, err = sluice.NewTokenBucket(rate, burst)
	case "TokenBucketInterval":
		lim, err = sluice.NewTokenBucket(rate, burst, sluice.WithIntervalRefill())
	case "FixedWindow":
		lim, err = sluice.NewFixedWindow(burst, window)
	case "SlidingLog":
		lim, err = sluice.NewSlidingLog(burst, window, sluice.WithMaxEntries(64))
	case "SlidingCounter":
		lim, err = sluice.NewSlidingCounter(burst, window)
	default:
		b.Fatalf("unknown algorithm %q", alg)
	}
	if err != nil {
		b.Fatalf("%s: %v", alg, err)
	}
	b.Cleanup(func() {
		// Every limiter closes the default store it made.
		if err := lim.Close(); err != nil {
			b.Errorf("%s: close: %v", alg, err)
		}
	})
	return lim
}

// spend makes every key exist before timing with one Allow of cost,
// which on a limit of cost spends the key's whole allowance.
func spend(b *testing.B, lim *sluice.Limiter, ks []string, cost float64) {
	b.Helper()
	for _, k := range ks {
		if _, err := lim.Allow(context.Background(), k, cost); err != nil {
			b.Fatal(err)
		}
	}
}

// eachKey times call on the keys of ks in turn, sequentially (seq) and
// from GOMAXPROCS goroutines (parallel), each goroutine starting at its own
// place. A call that fails fails the benchmark. If unit is not empty, the
// amounts call returns are reported in it, per call.
func eachKey(b *testing.B, ks []string, unit string, call func(ctx context.Context, key string) (float64, error)) {
	ctx := context.Background()
	n := len(ks)
	report := func(b *testing.B, sum float64) {
		if unit != "" {
			b.ReportMetric(sum/float64(b.N), unit)
		}
	}
	b.Run("seq", func(b *testing.B) {
		b.ReportAllocs()
		sum, i := 0.0, 0
		for b.Loop() {
			v, err := call(ctx, ks[i%n])
			if err != nil {
				b.Fatal(err)
			}
			sum += v
			i++
		}
		report(b, sum)
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		var (
			next  atomic.Int64
			mu    sync.Mutex
			total float64
		)
		b.RunParallel(func(pb *testing.PB) {
			sum, i := 0.0, int(next.Add(7919))
			defer func() {
				mu.Lock()
				total += sum
				mu.Unlock()
			}()
			for pb.Next() {
				v, err := call(ctx, ks[i%n])
				if err != nil {
					b.Error(err)
					return
				}
				sum += v
				i++
			}
		})
		report(b, total)
	})
}

// BenchmarkReserve measures Reserve of cost one on existing keys, for each
// algorithm that books, on three paths:
//
//   - now: a burst of 1e9 that no run spends, so that every reservation
//     is booked with no delay, as Allow would admit it;
//   - queued: a burst of one coming back every second, spent before
//     timing, with a maxDelay of ten years, so that every reservation is
//     booked a second after the key's last one and none reaches the
//     maxDelay however many a run makes;
//   - refused: a burst of one coming back every hour, spent before timing,
//     with a maxDelay of one minute, so that nothing is booked.
//
// Reserve returns a *Reservation: through the Limiter interface, one
// allocation per call on every path, where Allow makes none. Wait books
// into a Reservation in its own frame and does not pay it.
func BenchmarkReserve(b *testing.B) {
	for _, path := range []struct {
		name            string
		burst           float64
		per, maxDelay   time.Duration
		booked, delayed bool
	}{
		{"now", 1e9, time.Second, longDelay, true, false},
		{"queued", 1, time.Second, longDelay, true, true},
		{"refused", 1, time.Hour, time.Minute, false, false},
	} {
		for _, alg := range reservable {
			for _, n := range []int{1, 10_000} {
				b.Run(path.name+"/"+alg+"/keys="+strconv.Itoa(n), func(b *testing.B) {
					ks := keys(n)
					lim := newShaper(b, alg, path.burst, path.per)
					spend(b, lim, ks, 1)
					eachKey(b, ks, "", func(ctx context.Context, key string) (float64, error) {
						r, err := lim.Reserve(ctx, key, 1, path.maxDelay)
						if err == nil && (r.Allowed != path.booked || (r.Delay > 0) != path.delayed) {
							err = fmt.Errorf("%q: booked %v with a delay of %v on the %s path", key, r.Allowed, r.Delay, path.name)
						}
						return 0, err
					})
				})
			}
		}
	}
}

// BenchmarkCancel measures a turn booked and given back: Reserve of cost
// one on a key whose burst of one, coming back every minute, was spent
// before timing, so that the turn is booked a minute ahead, then Cancel,
// which gives it back and leaves the key as it was, so that every
// iteration books the same turn: two store calls, and the Reservation's
// one allocation. Twice: with a context that can end (ctx=request, as an
// HTTP request's), and with context.Background() (ctx=background), for
// which Cancel sets a timeout of its own.
//
// From several goroutines on one key, a cancel may find a later turn
// booked by another goroutine and give nothing back (see
// Reservation.Cancel); the queue then grows by the turn kept, and the
// ten-year maxDelay keeps every turn booked.
func BenchmarkCancel(b *testing.B) {
	request, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"request", request}, {"background", context.Background()}} {
		for _, alg := range reservable {
			for _, n := range []int{1, 10_000} {
				b.Run("ctx="+c.name+"/"+alg+"/keys="+strconv.Itoa(n), func(b *testing.B) {
					ks := keys(n)
					lim := newShaper(b, alg, 1, time.Minute)
					spend(b, lim, ks, 1)
					eachKey(b, ks, "", func(_ context.Context, key string) (float64, error) {
						r, err := lim.Reserve(c.ctx, key, 1, longDelay)
						if err != nil {
							return 0, err
						}
						if !r.Allowed || r.Delay <= 0 {
							return 0, fmt.Errorf("%q: booked %v with a delay of %v, not a turn ahead", key, r.Allowed, r.Delay)
						}
						return 0, r.Cancel(c.ctx)
					})
				})
			}
		}
	}
}

// BenchmarkAllowAtMost measures AllowAtMost on existing keys, on three
// paths:
//
//   - whole: a cost of one on a burst of 1e9 that no run spends, granted
//     whole (every algorithm; compare BenchmarkAllow's admit path);
//   - partial: a cost of 1e9, the whole burst, on keys drained before
//     timing and refilling one unit per nanosecond, so that each call is
//     granted the units that came back since the key's last call, fewer
//     than the cost; granted/op is the mean grant. Only the algorithms
//     that refill as time passes: a window's allowance comes back only
//     when the window turns, so its calls would be granted nothing;
//   - none: a cost of one on a burst of one coming back every hour, spent
//     before timing: nothing is granted (every algorithm).
func BenchmarkAllowAtMost(b *testing.B) {
	for _, path := range []struct {
		name  string
		algs  []string
		burst float64
		per   time.Duration
		cost  float64 // also what each key is spent by before timing
		check func(granted, cost float64) bool
	}{
		{"whole", algorithms, 1e9, time.Second, 1, func(g, c float64) bool { return g == c }},
		{"partial", reservable, 1e9, time.Nanosecond, 1e9, func(g, c float64) bool { return g < c }},
		{"none", algorithms, 1, time.Hour, 1, func(g, _ float64) bool { return g == 0 }},
	} {
		unit := ""
		if path.name == "partial" {
			unit = "granted/op"
		}
		for _, alg := range path.algs {
			for _, n := range []int{1, 10_000} {
				b.Run(path.name+"/"+alg+"/keys="+strconv.Itoa(n), func(b *testing.B) {
					ks := keys(n)
					lim := newShaper(b, alg, path.burst, path.per)
					spend(b, lim, ks, path.cost)
					eachKey(b, ks, unit, func(ctx context.Context, key string) (float64, error) {
						d, err := lim.AllowAtMost(ctx, key, path.cost)
						if err == nil && !path.check(d.Granted, path.cost) {
							err = fmt.Errorf("%q: granted %v of %v on the %s path", key, d.Granted, path.cost, path.name)
						}
						return d.Granted, err
					})
				})
			}
		}
	}
}
