package sluice_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
)

// A settler is a limiter that settles, with the cost of one turn and how
// long the key takes to free it.
type settler struct {
	name  string
	lim   *sluice.Limiter
	turn  float64
	frees time.Duration
}

// settlers returns one settler of each algorithm that settles.
func settlers(t *testing.T, opts ...sluice.Option) []settler {
	t.Helper()
	build := func(l *sluice.Limiter, err error) *sluice.Limiter {
		require.NoError(t, err)
		return l
	}
	return []settler{
		{"GCRA", build(sluice.NewGCRA(sluice.PerSecond(10), 10, opts...)), 1, 100 * time.Millisecond},
		{"leaky bucket", build(sluice.NewLeakyBucket(10, sluice.PerSecond(10), opts...)), 1, 100 * time.Millisecond},
		{"token bucket", build(sluice.NewTokenBucket(sluice.PerSecond(10), 10, opts...)), 1, 100 * time.Millisecond},
		{"token bucket with interval refill", build(sluice.NewTokenBucket(sluice.Per(2, 200*time.Millisecond), 10,
			append(opts, sluice.WithIntervalRefill())...)), 2, 200 * time.Millisecond},
	}
}

func TestSettleGivesBackWhatTheEstimateDidNotUse(t *testing.T) {
	ctx := context.Background()
	for _, s := range settlers(t, sluice.WithClock(clock.NewMock())) {
		t.Run(s.name, func(t *testing.T) {
			_, err := s.lim.Allow(ctx, "k", 10)
			require.NoError(t, err)
			d, err := s.lim.Settle(ctx, "k", 10, 10-s.turn)
			require.NoError(t, err)
			require.True(t, d.Allowed)
			require.Equal(t, s.turn, d.Granted, "given back")
			require.Equal(t, s.turn, d.Remaining)
			d, err = s.lim.Allow(ctx, "k", s.turn)
			require.NoError(t, err)
			require.True(t, d.Allowed, "the freed turn admitted")
			d, err = s.lim.Allow(ctx, "k", s.turn)
			require.NoError(t, err)
			require.False(t, d.Allowed, "nothing more")
		})
	}
}

func TestSettleNeverGivesBackMoreThanTheKeyHolds(t *testing.T) {
	ctx := context.Background()
	mock := clock.NewMock()
	for _, s := range settlers(t, sluice.WithClock(mock)) {
		t.Run(s.name, func(t *testing.T) {
			_, err := s.lim.Allow(ctx, "k", 3*s.turn)
			require.NoError(t, err)
			mock.Add(s.frees) // one turn of the estimate freed by time already
			d, err := s.lim.Settle(ctx, "k", 3*s.turn, 0)
			require.NoError(t, err)
			require.Equal(t, 2*s.turn, d.Granted, "what the key still held")
			require.Equal(t, 10.0, d.Remaining, "no more than the whole allowance")
		})
	}
}

func TestSettleChargesTheExcessAsADebtRepaidAtTheRate(t *testing.T) {
	ctx := context.Background()
	mock := clock.NewMock()
	for _, s := range settlers(t, sluice.WithClock(mock)) {
		t.Run(s.name, func(t *testing.T) {
			_, err := s.lim.Allow(ctx, "k", 10)
			require.NoError(t, err)
			d, err := s.lim.Settle(ctx, "k", 10, 10+3*s.turn)
			require.NoError(t, err)
			require.False(t, d.Allowed, "in debt")
			require.Equal(t, 3*s.turn, d.Granted, "the excess charged")
			require.Equal(t, 3*s.frees, d.RetryAfter, "repaid at the rate")
			mock.Add(d.RetryAfter - time.Nanosecond)
			d, err = s.lim.Allow(ctx, "k", 0)
			require.NoError(t, err)
			require.False(t, d.Allowed, "still in debt a nanosecond before")
			mock.Add(time.Nanosecond)
			d, err = s.lim.Allow(ctx, "k", 0)
			require.NoError(t, err)
			require.True(t, d.Allowed, "repaid")
			mock.Add(s.frees)
			d, err = s.lim.Allow(ctx, "k", s.turn)
			require.NoError(t, err)
			require.True(t, d.Allowed, "then frees as after a burst")
		})
	}
}

func TestSettleOfTheEstimateChangesNothing(t *testing.T) {
	ctx := context.Background()
	for _, s := range settlers(t, sluice.WithClock(clock.NewMock())) {
		t.Run(s.name, func(t *testing.T) {
			_, err := s.lim.Allow(ctx, "k", 4)
			require.NoError(t, err)
			d, err := s.lim.Settle(ctx, "k", 4, 4)
			require.NoError(t, err)
			require.True(t, d.Allowed)
			require.Zero(t, d.Granted)
			require.Equal(t, 6.0, d.Remaining)
		})
	}
}

func TestSettleRefusesInvalidCostsAndWindowAlgorithms(t *testing.T) {
	ctx := context.Background()
	gcra, err := sluice.NewGCRA(sluice.PerSecond(10), 10, sluice.WithClock(clock.NewMock()))
	require.NoError(t, err)
	window, err := sluice.NewFixedWindow(10, time.Second, sluice.WithClock(clock.NewMock()))
	require.NoError(t, err)
	for _, tc := range []struct {
		name           string
		lim            *sluice.Limiter
		booked, actual float64
		want           error
	}{
		{"negative estimate", gcra, -1, 1, sluice.ErrInvalidCost},
		{"negative actual cost", gcra, 1, -1, sluice.ErrInvalidCost},
		{"NaN actual cost", gcra, 1, math.NaN(), sluice.ErrInvalidCost},
		{"infinite estimate", gcra, math.Inf(1), 1, sluice.ErrInvalidCost},
		{"infinite actual cost", gcra, 1, math.Inf(1), sluice.ErrInvalidCost},
		{"fixed window", window, 1, 2, sluice.ErrUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.lim.Settle(ctx, "k", tc.booked, tc.actual)
			require.ErrorIs(t, err, tc.want)
		})
	}
}

func TestSettleIsObservedAsAChargeOrARefund(t *testing.T) {
	ctx := context.Background()
	var events []sluice.Event
	lim, err := sluice.NewGCRA(sluice.PerSecond(10), 10, sluice.WithClock(clock.NewMock()),
		sluice.WithObserver(func(_ context.Context, e sluice.Event) { events = append(events, e) }))
	require.NoError(t, err)
	_, err = lim.Settle(ctx, "k", 2, 5)
	require.NoError(t, err)
	_, err = lim.Settle(ctx, "k", 5, 1)
	require.NoError(t, err)
	require.Len(t, events, 2)
	require.Equal(t, engine.VerbCharge, events[0].Verb)
	require.Equal(t, 3.0, events[0].Cost)
	require.Equal(t, engine.VerbRefund, events[1].Verb)
	require.Equal(t, 4.0, events[1].Cost)
	require.Equal(t, 3.0, events[1].Decision.Granted, "what the key held")
}
