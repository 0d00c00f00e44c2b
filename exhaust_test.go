package sluice_test

import (
	"context"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
)

// pacers are the limiters that can be exhausted and slowed: 10 per second,
// a burst of 5.
var pacers = []struct {
	name  string
	build func(opts ...sluice.Option) (*sluice.Limiter, error)
}{
	{"gcra", func(opts ...sluice.Option) (*sluice.Limiter, error) {
		return sluice.NewGCRA(sluice.PerSecond(10), 5, opts...)
	}},
	{"leaky-bucket", func(opts ...sluice.Option) (*sluice.Limiter, error) {
		return sluice.NewLeakyBucket(5, sluice.PerSecond(10), opts...)
	}},
	{"token-bucket", func(opts ...sluice.Option) (*sluice.Limiter, error) {
		return sluice.NewTokenBucket(sluice.PerSecond(10), 5, opts...)
	}},
}

func TestExhaustAdmitsNothingUntilItsEndThenPacesFromFull(t *testing.T) {
	for _, pc := range pacers {
		t.Run(pc.name, func(t *testing.T) {
			ctx := context.Background()
			mock := clock.NewMock()
			mock.Set(time.Unix(1_800_000_000, 0))
			lim, err := pc.build(sluice.WithClock(mock))
			require.NoError(t, err)

			d, err := lim.Exhaust(ctx, "api", 30*time.Second)
			require.NoError(t, err)
			require.False(t, d.Allowed, "described as full")
			require.Equal(t, 5.0, d.Limit)

			mock.Add(30*time.Second - time.Nanosecond)
			d, err = lim.Allow(ctx, "api", 1)
			require.NoError(t, err)
			require.False(t, d.Allowed, "a nanosecond before the end")

			// From the end, one unit per 100 ms, as after a burst.
			mock.Add(time.Nanosecond + 100*time.Millisecond)
			d, err = lim.Allow(ctx, "api", 1)
			require.NoError(t, err)
			require.True(t, d.Allowed, "one unit 100 ms after the end")
			d, err = lim.Allow(ctx, "api", 1)
			require.NoError(t, err)
			require.False(t, d.Allowed, "and not two")
			require.Equal(t, 100*time.Millisecond, d.RetryAfter)

			other, err := lim.Allow(ctx, "other", 5)
			require.NoError(t, err)
			require.True(t, other.Allowed, "other keys untouched")
		})
	}
}

func TestExhaustNeverFreesWhatAKeyHolds(t *testing.T) {
	for _, pc := range pacers {
		t.Run(pc.name, func(t *testing.T) {
			ctx := context.Background()
			mock := clock.NewMock()
			lim, err := pc.build(sluice.WithClock(mock))
			require.NoError(t, err)

			_, err = lim.Exhaust(ctx, "api", time.Minute)
			require.NoError(t, err)
			_, err = lim.Exhaust(ctx, "api", time.Second)
			require.NoError(t, err)
			mock.Add(59 * time.Second)
			d, err := lim.Allow(ctx, "api", 1)
			require.NoError(t, err)
			require.False(t, d.Allowed, "the earlier end does not shorten the later")
			require.Greater(t, d.RetryAfter, time.Second)
		})
	}
}

func TestExhaustRefusesWhatItCannotDo(t *testing.T) {
	ctx := context.Background()
	window, err := sluice.NewFixedWindow(10, time.Second)
	require.NoError(t, err)
	_, err = window.Exhaust(ctx, "k", time.Second)
	require.ErrorIs(t, err, sluice.ErrUnsupported)

	gcra, err := sluice.NewGCRA(sluice.PerSecond(10), 5)
	require.NoError(t, err)
	for _, d := range []time.Duration{-1, 1<<60 + 1} {
		_, err = gcra.Exhaust(ctx, "k", d)
		require.ErrorIs(t, err, sluice.ErrInvalidDelay, "%v", d)
	}
	_, err = gcra.Exhaust(ctx, "k", 1<<60)
	require.NoError(t, err, "the longest delay")
}

func TestExhaustIsObservedAsItsVerb(t *testing.T) {
	var events []sluice.Event
	lim, err := sluice.NewGCRA(sluice.PerSecond(10), 5,
		sluice.WithObserver(func(_ context.Context, e sluice.Event) { events = append(events, e) }))
	require.NoError(t, err)
	_, err = lim.Exhaust(context.Background(), "k", time.Second)
	require.NoError(t, err)
	require.Len(t, events, 1)
	require.Equal(t, engine.VerbExhaust, events[0].Verb)
}

func TestSlowedPacesAtItsShareOnTheSameKeys(t *testing.T) {
	for _, pc := range pacers {
		t.Run(pc.name, func(t *testing.T) {
			ctx := context.Background()
			mock := clock.NewMock()
			lim, err := pc.build(sluice.WithClock(mock))
			require.NoError(t, err)
			half, err := lim.Slowed(0.5)
			require.NoError(t, err)

			d, err := half.Allow(ctx, "api", 5)
			require.NoError(t, err)
			require.True(t, d.Allowed, "the whole burst")
			d, err = lim.Allow(ctx, "api", 1)
			require.NoError(t, err)
			require.False(t, d.Allowed, "one key's state for both")

			d, err = half.Allow(ctx, "api", 1)
			require.NoError(t, err)
			require.Equal(t, 200*time.Millisecond, d.RetryAfter, "a unit every 200 ms at half the rate")
		})
	}
}

func TestSlowedRefusesWhatItCannotSlow(t *testing.T) {
	gcra, err := sluice.NewGCRA(sluice.PerSecond(10), 5)
	require.NoError(t, err)
	for _, share := range []float64{0, -1, 1.5, 1e-300} {
		_, err = gcra.Slowed(share)
		require.ErrorIs(t, err, sluice.ErrInvalidConfig, "%v", share)
	}
	window, err := sluice.NewFixedWindow(10, time.Second)
	require.NoError(t, err)
	_, err = window.Slowed(0.5)
	require.ErrorIs(t, err, sluice.ErrUnsupported)
}
