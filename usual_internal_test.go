package sluice

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
)

// FuzzFixedUsualIsUsualOfParamsThatAreNotACalendar keeps the fast path's
// copy of Params.Usual in step with it.
func FuzzFixedUsualIsUsualOfParamsThatAreNotACalendar(f *testing.F) {
	f.Add(uint8(1), 1.0, int64(0), 5.0)
	f.Add(uint8(2), 5.0, int64(maxTime), 5.0)
	f.Add(uint8(3), 0.0, int64(maxTime+1), 5.0)
	f.Add(uint8(1), math.NaN(), int64(-1), 1.0)
	f.Add(uint8(0), -0.0, int64(1), 0.5)
	f.Fuzz(func(t *testing.T, verb uint8, cost float64, now int64, limit float64) {
		p := engine.Params{Kind: engine.KindGCRA, Limit: limit, Interval: 1}
		require.Equal(t, p.Usual(engine.Verb(verb), cost, now), fixedUsual(&p, engine.Verb(verb), cost, now))
	})
}
