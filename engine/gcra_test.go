package engine_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
)

func TestDecidesTATOnlyForTheGCRAsPlainAllowAndCheck(t *testing.T) {
	gcra := engine.Params{Kind: engine.KindGCRA, Limit: 5, Interval: 1e8}
	penalty, counted := gcra, gcra
	penalty.Penalty = int64(time.Second)
	counted.CountDenied = true
	bucket := engine.Params{Kind: engine.KindTokenBucket, Limit: 5, Interval: 1e9, Amount: 10}
	for _, c := range []struct {
		name string
		p    engine.Params
		verb engine.Verb
		want bool
	}{
		{"gcra allow", gcra, engine.VerbAllow, true},
		{"gcra check", gcra, engine.VerbCheck, true},
		{"gcra reserve", gcra, engine.VerbReserve, false},
		{"gcra cancel", gcra, engine.VerbCancel, false},
		{"gcra at most", gcra, engine.VerbAtMost, false},
		{"gcra exhaust", gcra, engine.VerbExhaust, false},
		{"gcra no verb", gcra, 0, false},
		{"gcra with a penalty", penalty, engine.VerbAllow, false},
		{"gcra counting denials", counted, engine.VerbCheck, false},
		{"token bucket", bucket, engine.VerbAllow, false},
	} {
		require.Equal(t, c.want, c.p.DecidesTAT(c.verb), c.name)
	}
}

// TestDecideTATDecidesAsStepOnTheTATsState walks bursts and intervals
// whose tolerance is and is not a whole product below 2^53, costs up to
// the burst, and TATs around now: DecideTAT's decision is Step's on the
// state holding the TAT at the limit's interval, and the TAT it returns
// is the one Step records for an admitted Allow (the zero State once it
// is not after now).
func TestDecideTATDecidesAsStepOnTheTATsState(t *testing.T) {
	limits := []float64{0.5, 1, 2.5, 5, 3000, 1e9}
	intervals := []int64{1, 1e6, 1e8 + 7, 1e9, 3.6e12, 1 << 43}
	nows := []int64{0, 1e9, 1 << 61}
	checked := 0
	for _, limit := range limits {
		for _, interval := range intervals {
			p := engine.Params{Kind: engine.KindGCRA, Limit: limit, Interval: interval}
			if p.Validate() != nil {
				continue // a tolerance past the longest span
			}
			tau := int64(math.Round(limit * float64(interval)))
			for _, now := range nows {
				tats := []int64{0, now - 1, now, now + 1, now + interval/3, now + tau/2, now + tau - interval, now + tau, now + tau + 1}
				for _, tat := range tats {
					if tat < 0 {
						continue
					}
					s := engine.State{}
					if tat != 0 {
						s = engine.State{Time: tat, A: float64(interval)}
					}
					for _, verb := range []engine.Verb{engine.VerbAllow, engine.VerbCheck} {
						for _, cost := range []float64{0, 1.0 / 3, 0.5, 1, 2, limit, math.Nextafter(limit, 0)} {
							op := engine.Op{Verb: verb, Cost: cost, Now: now}
							if cost > limit || p.Check(op) != nil {
								continue
							}
							require.True(t, p.DecidesTAT(verb))
							stepped, want, err := p.Step(s, op)
							require.NoError(t, err)
							var got engine.Decision
							next := p.DecideTAT(tat, op, &got)
							require.Equal(t, want, got, "%+v on TAT %d: %+v", p, tat, op)
							recorded := s
							if verb == engine.VerbAllow && got.Allowed {
								recorded = engine.State{}
								if next > now {
									recorded = engine.State{Time: next, A: float64(interval)}
								}
							}
							require.Equal(t, stepped, recorded, "%+v on TAT %d: %+v", p, tat, op)
							checked++
						}
					}
				}
			}
		}
	}
	require.Greater(t, checked, 3000)
}
