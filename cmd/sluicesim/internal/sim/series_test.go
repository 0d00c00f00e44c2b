package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestThinnedKeepsEveryStrideThEventOfTheWholeRun offers events of width
// points each and requires what a thinned keeps to be every multiple of
// its stride, from the first event to within a stride of the last, in at
// most max points, with a stride no coarser than max needs.
func TestThinnedKeepsEveryStrideThEventOfTheWholeRun(t *testing.T) {
	tests := map[string]struct {
		events     int64
		max, width int
		stride     int64
	}{
		"fewer than max: every one": {10, 100, 1, 1},
		"exactly max: every one":    {5000, 5000, 1, 1},
		"one over max: every other": {5001, 5000, 1, 2},
		"a million denials":         {1_000_000, 5000, 1, 256},
		"requests of three points":  {100_000, 20_000, 3, 16},
		"room for one event only":   {7, 3, 3, 8},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			th := thinned{stride: 1, max: tt.max}
			for e := range tt.events {
				if th.keep(tt.width) {
					for range tt.width {
						th.add(Point{At: time.Duration(e)})
					}
				}
			}
			require.Equal(t, tt.stride, th.stride)
			require.LessOrEqual(t, len(th.points), tt.max)
			var kept []int64
			for i, p := range th.points {
				if i%tt.width == 0 {
					kept = append(kept, int64(p.At))
				}
			}
			var want []int64
			for e := int64(0); e < tt.events; e += tt.stride {
				want = append(want, e)
			}
			require.Equal(t, want, kept, "every multiple of the stride, in order")
			if tt.stride > 1 {
				half := tt.stride / 2
				require.Greater(t, int((tt.events+half-1)/half)*tt.width, tt.max, "half the stride would not fit")
			}
		})
	}
}

// TestALongSteadyRunIsDrawnEvenlyToItsEnd runs steady traffic long enough
// to fill the state panel's caps, and requires its state line and denial
// marks to span the whole run evenly, each tenth of the run holding about
// a tenth of them, and the panel's title to say what was thinned. Before,
// the panel stopped drawing requests' states and denials part way through,
// as if the traffic had changed.
func TestALongSteadyRunIsDrawnEvenlyToItsEnd(t *testing.T) {
	const d = 1000 * time.Second
	r := simulateOne(t, "gcra rate=5/s burst=5", d, "uniform rate=20/s")
	s := r.Series
	require.Greater(t, s.StateStride, int64(1), "the state was thinned")
	require.Greater(t, s.DenialStride, int64(1), "the denials were thinned")
	require.LessOrEqual(t, len(s.Denials), maxDenialMarks)
	for what, ps := range map[string][]Point{"state": s.State, "denials": s.Denials} {
		require.Less(t, ps[0].At, d/100, "%s start at the start", what)
		require.Greater(t, ps[len(ps)-1].At, d-d/100, "%s end at the end", what)
		var tenths [10]int
		for _, p := range ps {
			tenths[min(int(p.At*10/d), 9)]++
		}
		for i, n := range tenths {
			require.InEpsilon(t, len(ps)/10, n, 0.1, "%s in tenth %d of the run: %v", what, i, tenths)
		}
		var widest time.Duration
		for i := 1; i < len(ps); i++ {
			widest = max(widest, ps[i].At-ps[i-1].At)
		}
		require.Less(t, widest, 4*d/time.Duration(len(ps)), "%s: no gap much wider than the mean", what)
	}
	require.Equal(t, "TAT − now, in emission intervals of 200ms, key client\n"+
		"(state drawn around every 4th request, every 4th denial shown)", stateTitle(s))

	short := simulateOne(t, "gcra rate=5/s burst=5", 10*time.Second, "uniform rate=20/s")
	require.Equal(t, "TAT − now, in emission intervals of 200ms, key client", stateTitle(short.Series), "nothing thinned, nothing said")
}
