package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/sluice-go/sluice"

	"github.com/sluice-go/sluice/engine"
)

// The examples run on a fake clock so that their output is exact; drop
// sluice.WithClock to use the system clock.

// A per-client limit of 10 requests per second with bursts of 5.
func Example() {
	ctx := context.Background()
	fake := newExampleClock()
	lim, err := sluice.NewGCRA(sluice.PerSecond(10), 5, sluice.WithClock(fake))
	if err != nil {
		panic(err)
	}
	for i := range 7 {
		d, err := lim.Allow(ctx, "203.0.113.7", 1)
		if err != nil {
			panic(err)
		}
		fmt.Printf("request %d: allowed=%v remaining=%v retry after %v\n", i, d.Allowed, d.Remaining, d.RetryAfter)
	}
	// Output:
	// request 0: allowed=true remaining=4 retry after 0s
	// request 1: allowed=true remaining=3 retry after 0s
	// request 2: allowed=true remaining=2 retry after 0s
	// request 3: allowed=true remaining=1 retry after 0s
	// request 4: allowed=true remaining=0 retry after 0s
	// request 5: allowed=false remaining=0 retry after 100ms
	// request 6: allowed=false remaining=0 retry after 100ms
}

func newExampleClock() *clock.Mock {
	c := clock.NewMock()
	c.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return c
}

func ExampleNewGCRA() {
	fake := newExampleClock()
	lim, err := sluice.NewGCRA(sluice.PerMinute(60), 2, sluice.WithClock(fake))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for range 3 {
		d, _ := lim.Allow(ctx, "user:42", 1)
		fmt.Println(d.Allowed, d.RetryAfter, d.ResetAfter)
	}
	fake.Add(time.Second)
	d, _ := lim.Allow(ctx, "user:42", 1)
	fmt.Println(d.Allowed, d.RetryAfter, d.ResetAfter)
	// Output:
	// true 0s 1s
	// true 0s 2s
	// false 1s 2s
	// true 0s 2s
}

// A monthly budget of 1000 units, spent in amounts of money.
func ExampleNewLeakyBucket() {
	fake := newExampleClock()
	budget, err := sluice.NewLeakyBucket(1000, sluice.Per(1000, 30*24*time.Hour), sluice.WithClock(fake))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	d, _ := budget.Allow(ctx, "team-a", 930.50)
	fmt.Println("spend 930.50:", d.Allowed, "left:", d.Remaining)
	d, _ = budget.Allow(ctx, "team-a", 100)
	fmt.Println("spend 100:", d.Allowed, "possible in:", d.RetryAfter.Round(time.Minute))
	// Output:
	// spend 930.50: true left: 69.5
	// spend 100: false possible in: 21h58m0s
}

// Fillup records work that already happened, whether or not it fitted.
func ExampleLimiter_Fillup() {
	fake := newExampleClock()
	meter, err := sluice.NewLeakyBucket(3, sluice.PerSecond(1.5), sluice.WithClock(fake))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, cost := range []float64{1, 1.5, 2} {
		d, _ := meter.Fillup(ctx, "job", cost)
		fmt.Printf("level %.1f full=%v empty in %v\n", d.Used, d.Remaining <= 0, d.ResetAfter)
	}
	// Output:
	// level 1.0 full=false empty in 666.666667ms
	// level 2.5 full=false empty in 1.666666667s
	// level 3.0 full=true empty in 2s
}

// CanAccept checks without spending; Allow checks and spends atomically.
func ExampleLimiter_CanAccept() {
	fake := newExampleClock()
	budget, err := sluice.NewLeakyBucket(100, sluice.Per(100, time.Hour), sluice.WithClock(fake))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	d, _ := budget.CanAccept(ctx, "card", 60)
	fmt.Println("60 would fit:", d.Allowed)
	d, _ = budget.Allow(ctx, "card", 60)
	fmt.Println("spent 60:", d.Allowed)
	d, _ = budget.CanAccept(ctx, "card", 60)
	fmt.Println("60 more would fit:", d.Allowed)
	// Output:
	// 60 would fit: true
	// spent 60: true
	// 60 more would fit: false
}

func ExampleNewTokenBucket() {
	fake := newExampleClock()
	lim, err := sluice.NewTokenBucket(sluice.PerSecond(2), 4, sluice.WithClock(fake))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	d, _ := lim.Allow(ctx, "k", 4)
	fmt.Println(d.Allowed, d.Remaining)
	d, _ = lim.Allow(ctx, "k", 1)
	fmt.Println(d.Allowed, "next token in", d.RetryAfter)
	fake.Add(750 * time.Millisecond)
	d, _ = lim.Allow(ctx, "k", 1)
	fmt.Println(d.Allowed, d.Remaining)
	// Output:
	// true 0
	// false next token in 500ms
	// true 0.5
}

func ExampleWithIntervalRefill() {
	fake := newExampleClock()
	lim, err := sluice.NewTokenBucket(sluice.PerMinute(10), 10, sluice.WithIntervalRefill(), sluice.WithClock(fake))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	d, _ := lim.Allow(ctx, "k", 10)
	fmt.Println(d.Allowed, "refilled in", d.ResetAfter)
	fake.Add(59 * time.Second)
	d, _ = lim.Allow(ctx, "k", 1)
	fmt.Println(d.Allowed, "tokens arrive in", d.RetryAfter)
	// Output:
	// true refilled in 1m0s
	// false tokens arrive in 1s
}

func ExampleNewFixedWindow() {
	fake := newExampleClock()
	lim, err := sluice.NewFixedWindow(3, time.Minute, sluice.WithClock(fake))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	fake.Add(50 * time.Second)
	d, _ := lim.Allow(ctx, "k", 3)
	fmt.Println(d.Allowed, "window ends in", d.ResetAfter)
	d, _ = lim.Allow(ctx, "k", 1)
	fmt.Println(d.Allowed, "retry in", d.RetryAfter)
	// Output:
	// true window ends in 10s
	// false retry in 10s
}

func ExampleWithAnchoredWindows() {
	fake := newExampleClock()
	lim, err := sluice.NewFixedWindow(3, time.Minute, sluice.WithAnchoredWindows(), sluice.WithClock(fake))
	if err != nil {
		panic(err)
	}
	fake.Add(50 * time.Second)
	d, _ := lim.Allow(context.Background(), "k", 3)
	fmt.Println(d.Allowed, "window ends in", d.ResetAfter)
	// Output:
	// true window ends in 1m0s
}

func ExampleNewSlidingLog() {
	fake := newExampleClock()
	lim, err := sluice.NewSlidingLog(2, time.Minute, sluice.WithClock(fake))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	lim.Allow(ctx, "k", 1)
	fake.Add(20 * time.Second)
	lim.Allow(ctx, "k", 1)
	d, _ := lim.Allow(ctx, "k", 1)
	fmt.Println(d.Allowed, "retry in", d.RetryAfter) // when the first leaves the window
	// Output:
	// false retry in 40s
}

func ExampleNewSlidingCounter() {
	fake := newExampleClock()
	lim, err := sluice.NewSlidingCounter(10, time.Minute, sluice.WithClock(fake))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	lim.Allow(ctx, "k", 10)
	fake.Add(90 * time.Second) // half way through the next window
	d, _ := lim.Allow(ctx, "k", 1)
	fmt.Println(d.Allowed, d.Used) // 10 * 0.5 + 1
	// Output:
	// true 6
}

func ExampleLimiter_Wait() {
	fake := newExampleClock()
	lim, err := sluice.NewGCRA(sluice.PerMinute(1), 1, sluice.WithClock(fake))
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fmt.Println(lim.Wait(ctx, "api", 1)) // admitted at once
	err = lim.Wait(ctx, "api", 1)        // would need a minute
	fmt.Println(errors.Is(err, context.DeadlineExceeded))
	// Output:
	// <nil>
	// true
}

func ExampleLimiter_Reset() {
	fake := newExampleClock()
	logins, err := sluice.NewGCRA(sluice.Per(5, time.Hour), 5, sluice.WithClock(fake))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	logins.Allow(ctx, "alice@example.com", 5)
	d, _ := logins.CanAccept(ctx, "alice@example.com", 1)
	fmt.Println("can try again:", d.Allowed)
	logins.Reset(ctx, "alice@example.com") // after a successful login
	d, _ = logins.CanAccept(ctx, "alice@example.com", 1)
	fmt.Println("can try again:", d.Allowed)
	// Output:
	// can try again: false
	// can try again: true
}

// Step is the algorithm as a pure function: keep the State anywhere.
func ExampleParams_Step() {
	lim, err := sluice.NewGCRA(sluice.PerSecond(2), 1)
	if err != nil {
		panic(err)
	}
	p, _ := lim.Params()
	var s engine.State
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for _, at := range []time.Duration{0, 100 * time.Millisecond, 500 * time.Millisecond} {
		var d engine.Decision
		s, d, err = p.Step(s, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now + int64(at)})
		if err != nil {
			panic(err)
		}
		fmt.Println(at, d.Allowed)
	}
	// Output:
	// 0s true
	// 100ms false
	// 500ms true
}

// Limiters can share one store; give their keys distinct prefixes.
func ExampleNewMemStore() {
	st := sluice.NewMemStore(sluice.MemStoreConfig{MaxKeys: 1_000_000})
	defer st.Close()
	perIP, err := sluice.NewGCRA(sluice.PerSecond(100), 20, sluice.WithStore(st))
	if err != nil {
		panic(err)
	}
	perUser, err := sluice.NewFixedWindow(1000, time.Hour, sluice.WithStore(st))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	a, _ := perIP.Allow(ctx, "ip:198.51.100.4", 1)
	b, _ := perUser.Allow(ctx, "user:42", 1)
	fmt.Println(a.Allowed, b.Allowed, st.Len())
	// Output:
	// true true 2
}

// Allow admits and records a request if it fits; a denial records nothing
// and says when to come back.
func ExampleLimiter_Allow() {
	fake := newExampleClock()
	lim, err := sluice.NewGCRA(sluice.PerSecond(1), 1, sluice.WithClock(fake))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for range 2 {
		d, err := lim.Allow(ctx, "203.0.113.7", 1)
		if err != nil {
			panic(err) // invalid input or a failing store, never a denial
		}
		fmt.Println(d.Allowed, d.RetryAfter)
	}
	_, err = lim.Allow(ctx, "203.0.113.7", 2)
	fmt.Println(errors.Is(err, sluice.ErrCostExceedsLimit))
	// Output:
	// true 0s
	// false 1s
	// true
}

func ExamplePer() {
	fmt.Println(sluice.Per(1000, 30*24*time.Hour), sluice.PerSecond(10), sluice.PerMinute(2.5), sluice.Per(60, time.Hour))
	// Output:
	// 1000/720h0m0s 10/1s 2.5/1m0s 60/1h0m0s
}
