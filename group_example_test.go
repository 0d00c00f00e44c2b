package sluice_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-go/sluice"
)

// An API's limits, "10 per second and 1,000 per day per API key, and 50 per
// second for everyone", decided as one: a request is charged to every
// limit or to none.
func ExampleNewGroup() {
	fake := newExampleClock()
	st := sluice.NewMemStore(sluice.MemStoreConfig{})
	defer st.Close()
	opts := []sluice.Option{sluice.WithStore(st), sluice.WithClock(fake)}
	perSecond, _ := sluice.NewGCRA(sluice.PerSecond(10), 10, opts...)
	perDay, _ := sluice.NewFixedWindow(1000, 24*time.Hour, opts...)
	global, _ := sluice.NewTokenBucket(sluice.PerSecond(50), 50, opts...)
	api, err := sluice.NewGroup(perSecond, perDay, global)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	keys := func(apiKey string) []string {
		return []string{"second:" + apiKey, "day:" + apiKey, "global"}
	}
	admitted := 0
	for range 12 {
		d, err := api.Allow(ctx, keys("k-123"), 1)
		if err != nil {
			panic(err)
		}
		if d.Allowed {
			admitted++
		}
	}
	d, _ := api.CanAccept(ctx, keys("k-123"), 1)
	fmt.Println("admitted:", admitted, "then retry after", d.RetryAfter)
	fmt.Println("left today:", d.Limits()[1].Remaining, "left for everyone:", d.Limits()[2].Remaining)
	// Output:
	// admitted: 10 then retry after 100ms
	// left today: 990 left for everyone: 40
}

// A penalty blocks a client that overflows its limit for a set time,
// however fast its bucket would drain.
func ExampleWithPenalty() {
	fake := newExampleClock()
	logins, _ := sluice.NewGCRA(sluice.PerMinute(5), 5, sluice.WithClock(fake), sluice.WithPenalty(15*time.Minute))
	ctx := context.Background()
	for range 5 {
		logins.Allow(ctx, "alice", 1)
	}
	d, _ := logins.Allow(ctx, "alice", 1) // the sixth attempt overflows
	fmt.Println(d.Allowed, d.Blocked, d.RetryAfter)
	fake.Add(time.Minute)
	d, _ = logins.Allow(ctx, "alice", 1)
	fmt.Println(d.Allowed, d.Blocked, d.RetryAfter)
	// Output:
	// false true 15m0s
	// false true 14m0s
}
