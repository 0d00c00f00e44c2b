package sluice_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/storetest"
)

// TestClockSteppingBackNeverLoosensALimit pins what the package doc says
// of a clock that steps backwards, on every algorithm: from any state
// (built of admissions and, for the algorithms that reserve, reservations
// with delays and cancels of them), a request δ earlier than another is
// never admitted where the later one is denied, and when both are denied
// they are told to come back at the same instant, so the earlier one's
// RetryAfter is δ longer. GCRA, the buckets, the sliding log and the
// sliding counter see more backlog at the earlier instant (for a bucket,
// what leaks or refills between it and the state's point, which a
// reservation may have placed after both), and are stricter; the windows
// never go back, and the fixed window decides the same within one.
func TestClockSteppingBackNeverLoosensALimit(t *testing.T) {
	base := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC).UnixNano()
	for ai, p := range storetest.Algorithms() {
		t.Run(fmt.Sprintf("%d_%v", ai, p.Kind), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(ai), 7))
			stricter := 0
			for trace := range 200 {
				var s engine.State
				now := base
				var booked []engine.Op // cancels of the reservations booked
				for range rng.IntN(12) {
					now += rng.Int64N(p.Interval)
					op := engine.Op{Verb: engine.VerbAllow, Cost: min(float64(1+rng.IntN(3)), p.Limit), Now: now}
					if p.Reservable() {
						switch r := rng.IntN(3); {
						case r == 0:
							op.Verb, op.MaxDelay = engine.VerbReserve, rng.Int64N(4*p.Interval)
						case r == 1 && len(booked) > 0:
							op = booked[rng.IntN(len(booked))]
							op.Now = now
						}
					}
					var (
						d   engine.Decision
						err error
					)
					s, d, err = p.Step(s, op)
					require.NoError(t, err)
					if d.At != 0 {
						booked = append(booked, engine.Op{Verb: engine.VerbCancel, Cost: op.Cost, At: d.At})
					}
				}
				later := now + rng.Int64N(2*p.Interval)
				delta := rng.Int64N(2 * p.Interval)
				for _, cost := range []float64{0.5, 1, p.Limit} {
					_, atLater, err := p.Step(s, engine.Op{Verb: engine.VerbCheck, Cost: cost, Now: later})
					require.NoError(t, err)
					_, atEarlier, err := p.Step(s, engine.Op{Verb: engine.VerbCheck, Cost: cost, Now: later - delta})
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
