package engine_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
)

// day returns a calendar window of limit 3 over days of 24, 23 and 25
// hours from t0: a daylight-saving change in the middle.
func day(t0 int64) engine.Params {
	h := int64(time.Hour)
	w := [4]int64{t0, t0 + 24*h, t0 + 47*h, t0 + 72*h}
	return engine.Params{Kind: engine.KindFixedWindow, Limit: 3, Interval: w[2] - w[1], Windows: w}
}

func TestCalendarWindowsThatCannotBeAreInvalid(t *testing.T) {
	const t0 = int64(1_800_000_000e9)
	tests := []struct {
		name   string
		change func(p *engine.Params)
	}{
		{"not a fixed window", func(p *engine.Params) { p.Kind = engine.KindSlidingCounter }},
		{"anchored", func(p *engine.Params) { p.Anchored = true }},
		{"no last boundary", func(p *engine.Params) { p.Windows[3] = 0 }},
		{"not ascending", func(p *engine.Params) { p.Windows[1], p.Windows[2] = p.Windows[2], p.Windows[1] }},
		{"an empty window", func(p *engine.Params) { p.Windows[1] = p.Windows[0] }},
		{"an interval that is not the middle window's", func(p *engine.Params) { p.Interval++ }},
		{"before -2^60 ns", func(p *engine.Params) { p.Windows[0] = -1<<60 - 1 }},
		{"after 2^62 + 2^60 ns", func(p *engine.Params) { p.Windows[3] = 1<<62 + 1<<60 + 1 }},
		{"a window longer than 2^60 ns", func(p *engine.Params) { p.Windows[0] = p.Windows[1] - 1<<60 - 1 }},
	}
	valid := day(t0)
	require.NoError(t, valid.Validate())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := day(t0)
			tt.change(&p)
			require.ErrorIs(t, p.Validate(), engine.ErrInvalidConfig)
		})
	}
}

func TestCalendarWindowDecidesOnlyInItsWindows(t *testing.T) {
	const t0 = int64(1_800_000_000e9)
	p := day(t0)
	require.True(t, p.Usual(engine.VerbAllow, 1, t0+1), "the usual request in its windows")
	require.False(t, p.Usual(engine.VerbAllow, 1, p.Windows[3]), "never the usual request after its windows")
	for _, now := range []int64{t0 - 1, p.Windows[3], p.Windows[3] + 1} {
		_, _, err := p.Step(engine.State{}, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now})
		require.ErrorIs(t, err, engine.ErrTimeOutOfRange, "at %d", now)
		require.ErrorIs(t, p.CheckWindows(now), engine.ErrTimeOutOfRange)
	}
	for _, now := range []int64{t0, p.Windows[1], p.Windows[3] - 1} {
		s, d, err := p.Step(engine.State{}, engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now})
		require.NoError(t, err)
		require.True(t, d.Allowed)
		require.Equal(t, s.Time-now, int64(d.ResetAfter), "the state keeps the end of the window holding %d", now)
	}
	aligned := engine.Params{Kind: engine.KindFixedWindow, Limit: 3, Interval: int64(time.Hour)}
	require.NoError(t, aligned.CheckWindows(-1), "any time lies in the windows of Params that are not a calendar's")
}
