package sim

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/guarantees"
	"github.com/sluice-go/sluice/internal/simclock"
)

// specsOfTable are the simulator's words for the algorithms of the proof
// suite's table (guarantees.Algorithms), in its order.
var specsOfTable = []string{
	"leakybucket capacity=5 leak=5/s",
	"gcra rate=5/s burst=5",
	"tokenbucket rate=5/s",
	"tokenbucket rate=5/s intervalrefill",
	"fixedwindow limit=5 window=1s",
	"fixedwindow limit=5 window=1s anchored",
	"slidinglog limit=5 window=1s",
	"slidingcounter limit=5 window=1s",
}

// simulateOne runs one limiter on traffic, keeping its trace.
func simulateOne(t *testing.T, limiter string, duration time.Duration, traffic ...string) Run {
	t.Helper()
	c := Config{Duration: duration, Window: time.Second}
	require.NoError(t, c.Set("limiter", limiter, ""))
	for _, tr := range traffic {
		require.NoError(t, c.Set("traffic", tr, ""))
	}
	runs, err := Simulate(context.Background(), &c, Options{Trace: true})
	require.NoError(t, err)
	require.Len(t, runs, 1)
	return runs[0]
}

// replay offers a run's requests, in its order, to the proof suite's keys,
// which run the algorithm's step function, and requires the same decision
// for each. It returns the keys.
func replay(t *testing.T, r Run) map[string]*guarantees.Key {
	t.Helper()
	keys := map[string]*guarantees.Key{}
	for i, d := range r.Trace {
		k := keys[d.Key]
		if k == nil {
			k = guarantees.NewKey(r.Params)
			keys[d.Key] = k
		}
		want, err := k.Apply(engine.VerbAllow, Epoch.UnixNano()+int64(d.Request.At), d.Cost)
		require.NoError(t, err)
		require.Equal(t, sluice.Decision(want), d.Decision, "request %d at %v on %q", i, d.Request.At, d.Key)
	}
	return keys
}

// largestBurst returns the most cost admitted at one instant.
func largestBurst(admitted []guarantees.Admission) float64 {
	var best, sum float64
	for i, a := range admitted {
		if i == 0 || a.Time != admitted[i-1].Time {
			sum = 0
		}
		sum += a.Cost
		best = max(best, sum)
	}
	return best
}

// TestSummaryAgreesWithTheProofSuite drives every algorithm of the proof
// suite's table, configured as it is there, with greedy, cross-window,
// random and bursty traffic, and requires the simulator's summary to agree
// with the proof suite: the same decisions as the step functions for every
// request, the same most-in-any-window as its checker computes from them,
// the table's burst from rest, never more in any second than the table's
// worst case, and the table's long-run rate.
func TestSummaryAgreesWithTheProofSuite(t *testing.T) {
	rows, err := guarantees.Table()
	require.NoError(t, err)
	require.Len(t, rows, len(specsOfTable))
	for i, row := range rows {
		t.Run(row.Name, func(t *testing.T) {
			ls, err := ParseLimiter(specsOfTable[i])
			require.NoError(t, err)
			l, err := ls.New(simclock.New(Epoch))
			require.NoError(t, err)
			p, _ := l.Params()
			require.Equal(t, row.Params, p, "the simulator's words build the table's configuration")
			require.NoError(t, l.Close())

			for _, traffic := range [][]string{
				{"greedy"},
				{"edge n=5 window=1s gap=1ns"},
				{"edge n=5 window=1s gap=1ms"},
				{"poisson rate=20/s seed=7"},
				{"bursts n=8 every=700ms", "uniform rate=3/s"},
				{"greedy start=999999999ns"},
			} {
				r := simulateOne(t, specsOfTable[i], 10*time.Second, traffic...)
				keys := replay(t, r)
				require.Len(t, keys, 1)
				admitted := keys["client"].Admitted()
				require.Equal(t, int64(len(admitted)), r.Summary.Admitted, "%v", traffic)
				require.Equal(t, guarantees.MaxInWindow(admitted, int64(time.Second)), r.Summary.MaxInWindow, "%v", traffic)
				require.Equal(t, largestBurst(admitted), r.Summary.LargestBurst, "%v", traffic)
				require.LessOrEqual(t, r.Summary.MaxInWindow, float64(row.MaxPerPeriod),
					"%v: more in one second than the proof suite's worst case", traffic)
				if traffic[0] == "greedy" {
					require.Equal(t, float64(row.Burst), r.Summary.LargestBurst, "burst from rest")
				}
			}

			// The table's long run: 10 per second offered for 1000 s,
			// measured over the last 900 s.
			r := simulateOne(t, specsOfTable[i], 1000*time.Second, "uniform rate=10/s")
			require.InDelta(t, row.Rate, r.Summary.LongRunRate, 1e-12)
		})
	}
}

// TestEdgeTrafficReachesTheWorstCaseOfAlignedWindows pins that the
// cross-window pattern does what it is for: an aligned fixed window admits
// twice its limit within a few milliseconds around each boundary, the
// proof suite's worst case, while the sliding log never exceeds its limit.
func TestEdgeTrafficReachesTheWorstCaseOfAlignedWindows(t *testing.T) {
	rows, err := guarantees.Table()
	require.NoError(t, err)
	for i, spec := range specsOfTable {
		r := simulateOne(t, spec, 5*time.Second, "edge n=5 window=1s")
		switch rows[i].Name {
		case "Fixed window":
			require.Equal(t, float64(rows[i].MaxPerPeriod), r.Summary.MaxInWindow)
			require.Equal(t, 10.0, r.Summary.MaxInWindow)
		case "Sliding log":
			require.Equal(t, 5.0, r.Summary.MaxInWindow)
		}
	}
}
