package sim

import (
	"testing"
	"time"
)

// BenchmarkSimulate measures a simulated request: the traffic's next
// request, a decision of the real limiter on the in-memory store, and the
// summary's and figures' bookkeeping.
func BenchmarkSimulate(b *testing.B) {
	for _, spec := range []string{"gcra rate=1000/s burst=50", "slidinglog limit=1000 window=1s"} {
		b.Run(spec, func(b *testing.B) {
			b.ReportAllocs()
			c := Config{Duration: 100 * time.Second}
			if err := c.Set("limiter", spec, ""); err != nil {
				b.Fatal(err)
			}
			if err := c.Set("traffic", "poisson rate=2000/s clients=10", ""); err != nil {
				b.Fatal(err)
			}
			var requests int64
			for b.Loop() {
				runs, err := Simulate(b.Context(), &c, Options{})
				if err != nil {
					b.Fatal(err)
				}
				requests += runs[0].Summary.Offered
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(requests), "ns/request")
		})
	}
}
