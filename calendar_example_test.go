package sluice_test

import (
	"context"
	"fmt"
	"log"
	"time"
	_ "time/tzdata" // the zone database, wherever the program runs

	"github.com/benbjohnson/clock"

	"github.com/sluice-go/sluice"
)

// 1,000 units per calendar month in Paris: the quota starts again at
// midnight on the 1st there, as ResetAfter and RetryAfter say.
func ExampleNewCalendarWindow() {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		log.Fatal(err)
	}
	mock := clock.NewMock() // a fake clock, for the example's output
	mock.Set(time.Date(2026, time.March, 31, 23, 0, 0, 0, paris))
	quota, err := sluice.NewCalendarWindow(1000, sluice.Month, paris, sluice.WithClock(mock))
	if err != nil {
		log.Fatal(err)
	}
	defer quota.Close()
	ctx := context.Background()

	d, _ := quota.Allow(ctx, "customer-42", 990)
	fmt.Println("990:", d.Allowed, d.Remaining, "left until", mock.Now().Add(d.ResetAfter).In(paris).Format(time.DateTime))
	d, _ = quota.Allow(ctx, "customer-42", 20)
	fmt.Println("20:", d.Allowed, "retry in", d.RetryAfter)
	mock.Add(d.RetryAfter)
	d, _ = quota.Allow(ctx, "customer-42", 20)
	fmt.Println("20:", d.Allowed, d.Remaining, "left until", mock.Now().Add(d.ResetAfter).In(paris).Format(time.DateTime))
	// Output:
	// 990: true 10 left until 2026-04-01 00:00:00
	// 20: false retry in 1h0m0s
	// 20: true 980 left until 2026-05-01 00:00:00
}
