// Command quickstart shows sluice's decisions over three seconds of
// simulated traffic on the in-memory store: a greedy client sending 20
// requests per second and a polite one sending 4, both limited to 10 per
// second with bursts of 5, per client.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"text/tabwriter"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/sluice-go/sluice"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	// A fake clock makes three simulated seconds take no time at all and
	// the output the same on every run; a real service omits WithClock.
	fake := clock.NewMock()
	fake.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	lim, err := sluice.NewGCRA(sluice.PerSecond(10), 5, sluice.WithClock(fake))
	if err != nil {
		return err
	}
	defer lim.Close()

	ctx := context.Background()
	out := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(out, "time\tclient\tallowed\tremaining\tretry after\t")
	admitted := map[string]int{}
	const step = 50 * time.Millisecond // the greedy client's pace
	for tick := time.Duration(0); tick < 3*time.Second; tick += step {
		clients := []string{"greedy"}
		if tick%(250*time.Millisecond) == 0 {
			clients = append(clients, "polite")
		}
		for _, c := range clients {
			d, err := lim.Allow(ctx, c, 1)
			if err != nil {
				return err
			}
			if d.Allowed {
				admitted[c]++
			}
			if tick < time.Second { // the first second in detail
				fmt.Fprintf(out, "%v\t%s\t%v\t%.1f\t%v\t\n", tick, c, d.Allowed, d.Remaining, d.RetryAfter)
			}
		}
		fake.Add(step)
	}
	if err := out.Flush(); err != nil {
		return err
	}
	fmt.Printf("\nIn 3 s the greedy client sent 60 requests and got %d through: the burst of 5, then 10/s;\n", admitted["greedy"])
	fmt.Printf("the polite client sent 12 and got %d through: one client's flood never spends another's allowance.\n", admitted["polite"])
	return nil
}
