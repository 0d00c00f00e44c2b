package sluice_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/storetest"
)

// TestClockSteppingBackNeverLoosensALimit pins what the package doc says
// of a clock that steps backwards, on every algorithm: from any state, a
// request δ earlier than another is never admitted where the later one is
// denied, and when both are denied they are told to come back at the same
// instant, so the earlier one's RetryAfter is δ longer. For the buckets
// this is time standing still before their last update; for GCRA, the
// sliding log and the sliding counter, whose states are weighed against
// now, the earlier request sees more backlog and is stricter.
func TestClockSteppingBackNeverLoosensALimit(t *testing.T) {
	base := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC).UnixNano()
	for ai, p := range storetest.Algorithms() {
		t.Run(fmt.Sprintf("%d_%v", ai, p.Kind), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(ai), 7))
			stricter := 0
			for trace := range 200 {
				var s sluice.State
				now := base
				for range rng.IntN(12) {
					now += rng.Int64N(p.Interval)
					s, _, _ = p.Step(s, sluice.Op{Verb: sluice.VerbAllow, Cost: float64(1 + rng.IntN(3)), Now: now})
				}
				later := now + rng.Int64N(2*p.Interval)
				delta := rng.Int64N(2 * p.Interval)
				for _, cost := range []float64{0.5, 1, p.Limit} {
					_, atLater, err := p.Step(s, sluice.Op{Verb: sluice.VerbCheck, Cost: cost, Now: later})
					require.NoError(t, err)
					_, atEarlier, err := p.Step(s, sluice.Op{Verb: sluice.VerbCheck, Cost: cost, Now: later - delta})
					require.NoError(t, err)
					where := fmt.Sprintf("trace %d cost %v: at %d %+v, %v earlier %+v", trace, cost, later, atLater, time.Duration(delta), atEarlier)
					if atEarlier.Allowed {
						require.True(t, atLater.Allowed, where)
						continue
					}
					if atLater.Allowed {
						stricter++
						continue
					}
					require.Equal(t, atLater.RetryAfter+time.Duration(delta), atEarlier.RetryAfter, where)
				}
			}
			require.Positive(t, stricter, "some earlier requests were denied where later ones were admitted")
		})
	}
}
