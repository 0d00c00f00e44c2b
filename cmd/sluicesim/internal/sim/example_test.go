package sim_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sluice-go/sluice/cmd/sluicesim/internal/sim"
)

// A GCRA limit of 5 per second with bursts of 5, against a client that
// asks again the instant it is told it may: 5 at once, then one every
// 200ms.
func ExampleSimulate() {
	c, err := sim.ParseConfig(strings.NewReader(`
limiter gcra rate=5/s burst=5
traffic greedy
duration 2s
`), "")
	if err != nil {
		panic(err)
	}
	runs, err := sim.Simulate(context.Background(), &c, sim.Options{})
	if err != nil {
		panic(err)
	}
	s := runs[0].Summary
	fmt.Println("admitted", s.Admitted, "of", s.Offered, "- largest burst", s.LargestBurst, "- most in any", s.Window, s.MaxInWindow)
	fmt.Println("denied requests were told to retry after", s.RetryP50)
	// Output:
	// admitted 14 of 24 - largest burst 5 - most in any 1s 9
	// denied requests were told to retry after 200ms
}

func ExampleWriteTable() {
	c := sim.Config{Duration: 10 * time.Second}
	for _, l := range []string{"fixedwindow limit=5 window=1s", "slidinglog limit=5 window=1s"} {
		if err := c.Set("limiter", l, ""); err != nil {
			panic(err)
		}
	}
	if err := c.Set("traffic", "edge n=5", ""); err != nil {
		panic(err)
	}
	runs, err := sim.Simulate(context.Background(), &c, sim.Options{})
	if err != nil {
		panic(err)
	}
	sums := []sim.Summary{runs[0].Summary, runs[1].Summary}
	if err := sim.WriteTable(os.Stdout, sums); err != nil {
		panic(err)
	}
	// Output:
	// limiter                        offered  admitted  denied  largest burst  most in any 1s  long-run rate  RetryAfter p50    p99
	// fixedwindow limit=5 window=1s       95        50      45              5              10         5.00/s             1ms    1ms
	// slidinglog limit=5 window=1s        95        50      45              5               5         5.00/s           999ms  999ms
}
