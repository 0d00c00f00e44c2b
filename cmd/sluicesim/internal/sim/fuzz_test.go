package sim

import "testing"

// FuzzParse feeds arbitrary words to every parser: each returns a value
// or an error, and never panics.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"gcra rate=10/s burst=5", "fixedwindow limit=10 window=1s anchored", "tokenbucket rate=1e300/1ns burst=1e-300",
		"slidinglog limit=3 window=1s maxentries=99999999999", "uniform rate=10/s clients=3", "edge n=5 gap=1ns window=2ns",
		"poisson rate=NaN/s", "bursts n=1 every=-1s", "greedy cost=Inf", "leakybucket capacity=1 leak=1/0s", "= =", "gcra rate=/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ParseLimiter(s)
		ParseTraffic(s, t.TempDir())
		parseRate(s)
		parseDuration(s)
	})
}
