package sluice_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
	_ "time/tzdata" // the tests' zones, wherever they run

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
)

// zone loads a time zone of the tests.
func zone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

// mockAt returns a fake clock at the local time given in loc.
func mockAt(loc *time.Location, year int, month time.Month, day, hour, min, sec, nsec int) *clock.Mock {
	m := clock.NewMock()
	m.Set(time.Date(year, month, day, hour, min, sec, nsec, loc))
	return m
}

func TestCalendarMonthInParisStartsAgainAtLocalMidnightOnThe1st(t *testing.T) {
	paris := zone(t, "Europe/Paris")
	mock := mockAt(paris, 2026, time.March, 31, 23, 59, 59, 999999999)
	quota, err := sluice.NewCalendarWindow(1000, sluice.Month, paris, sluice.WithClock(mock))
	require.NoError(t, err)
	ctx := context.Background()

	d, err := quota.Allow(ctx, "acct", 1000)
	require.NoError(t, err)
	require.True(t, d.Allowed)
	require.Equal(t, time.Nanosecond, d.ResetAfter, "March ends in a nanosecond")
	d, err = quota.Allow(ctx, "acct", 1)
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.Equal(t, time.Nanosecond, d.RetryAfter)

	mock.Add(time.Nanosecond) // April 1, 00:00 in Paris: 22:00 UTC
	d, err = quota.Allow(ctx, "acct", 1000)
	require.NoError(t, err)
	require.True(t, d.Allowed, "the quota started again")
	require.Equal(t, 30*24*time.Hour, d.ResetAfter, "April in Paris: 30 days, no change of offset")
}

func TestCalendarWindowsFollowTheZonesDaysMonthsAndYears(t *testing.T) {
	paris, newYork, santiago := zone(t, "Europe/Paris"), zone(t, "America/New_York"), zone(t, "America/Santiago")
	tests := []struct {
		name   string
		period sluice.Period
		loc    *time.Location
		clock  *clock.Mock
		reset  time.Duration // from the window's first instant to its end
	}{
		{"day of 23 hours when Paris springs forward", sluice.Day, paris, mockAt(paris, 2026, time.March, 29, 0, 0, 0, 0), 23 * time.Hour},
		{"day of 25 hours when Paris falls back", sluice.Day, paris, mockAt(paris, 2026, time.October, 25, 0, 0, 0, 0), 25 * time.Hour},
		{"March in Paris loses an hour", sluice.Month, paris, mockAt(paris, 2026, time.March, 1, 0, 0, 0, 0), 31*24*time.Hour - time.Hour},
		{"February of a leap year", sluice.Month, paris, mockAt(paris, 2028, time.February, 1, 0, 0, 0, 0), 29 * 24 * time.Hour},
		{"February of a common year", sluice.Month, paris, mockAt(paris, 2027, time.February, 1, 0, 0, 0, 0), 28 * 24 * time.Hour},
		{"week from Monday across New York's fall back", sluice.Week, newYork, mockAt(newYork, 2026, time.October, 26, 0, 0, 0, 0), 7*24*time.Hour + time.Hour},
		{"leap year", sluice.Year, newYork, mockAt(newYork, 2028, time.January, 1, 0, 0, 0, 0), 366 * 24 * time.Hour},
		// Chile springs forward at midnight: September 6, 2026 starts at
		// 01:00, the instant midnight is skipped, and lasts 23 hours.
		{"day whose midnight Santiago skips", sluice.Day, santiago, mockAt(santiago, 2026, time.September, 6, 1, 0, 0, 0), 23 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := sluice.NewCalendarWindow(2, tt.period, tt.loc, sluice.WithClock(tt.clock))
			require.NoError(t, err)
			d, err := l.Allow(context.Background(), "k", 2)
			require.NoError(t, err)
			require.True(t, d.Allowed)
			require.Equal(t, tt.reset, d.ResetAfter)

			tt.clock.Add(-time.Nanosecond) // the window before
			p, fixed := l.Params()
			require.False(t, fixed, "the windows move with the clock")
			require.Equal(t, tt.clock.Now().UnixNano()+1, p.Windows[2], "the windows follow the clock")
			tt.clock.Add(tt.reset + time.Nanosecond) // the next window
			d, err = l.Allow(context.Background(), "k", 2)
			require.NoError(t, err)
			require.True(t, d.Allowed, "a new window")
		})
	}
}

func TestCalendarWindowRefusesWhatItCannotBe(t *testing.T) {
	paris := zone(t, "Europe/Paris")
	tests := []struct {
		name   string
		period sluice.Period
		loc    *time.Location
		opts   []sluice.Option
	}{
		{"no time zone", sluice.Month, nil, nil},
		{"no period", 0, paris, nil},
		{"an unknown period", 9, paris, nil},
		{"anchored", sluice.Day, paris, []sluice.Option{sluice.WithAnchoredWindows()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sluice.NewCalendarWindow(10, tt.period, tt.loc, tt.opts...)
			require.ErrorIs(t, err, sluice.ErrInvalidConfig)
		})
	}
	_, err := sluice.NewCalendarWindow(0, sluice.Day, paris)
	require.ErrorIs(t, err, sluice.ErrInvalidConfig, "no limit")
}

func TestCalendarWindowWaitsForTheNextWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		paris := zone(t, "Europe/Paris")
		mock := mockAt(paris, 2026, time.March, 28, 23, 0, 0, 0)
		l, err := sluice.NewCalendarWindow(1, sluice.Day, paris, sluice.WithClock(mock))
		require.NoError(t, err)
		ctx := context.Background()
		require.NoError(t, l.Wait(ctx, "k", 1))
		done := make(chan error)
		go func() { done <- l.Wait(ctx, "k", 1) }()
		synctest.Wait() // asleep until midnight
		mock.Add(time.Hour)
		require.NoError(t, <-done)
		d, err := l.CanAccept(ctx, "k", 0)
		require.NoError(t, err)
		require.Equal(t, 23*time.Hour, d.ResetAfter, "counted in the day of 23 hours")
	})
}

func TestCalendarWindowsCountInGroupsAndPerKey(t *testing.T) {
	paris := zone(t, "Europe/Paris")
	mock := mockAt(paris, 2026, time.November, 30, 23, 59, 0, 0)
	st := sluice.NewMemStore(sluice.MemStoreConfig{})
	t.Cleanup(func() { st.Close() })
	free, err := sluice.NewCalendarWindow(2, sluice.Month, paris)
	require.NoError(t, err)
	pro, err := sluice.NewCalendarWindow(5, sluice.Month, paris)
	require.NoError(t, err)
	quota, err := sluice.NewPerKey(func(_ context.Context, key string) (*sluice.Limiter, error) {
		if key == "pro" {
			return pro, nil
		}
		return free, nil
	}, sluice.WithStore(st), sluice.WithClock(mock))
	require.NoError(t, err)
	burst, err := sluice.NewGCRA(sluice.PerSecond(100), 100, sluice.WithStore(st), sluice.WithClock(mock))
	require.NoError(t, err)
	g, err := sluice.NewGroup(quota, burst)
	require.NoError(t, err)
	ctx := context.Background()

	for _, key := range []string{"free", "pro"} {
		admitted := 0
		for range 10 {
			d, err := g.Allow(ctx, []string{key, "b:" + key}, 1)
			require.NoError(t, err)
			if d.Allowed {
				admitted++
			}
		}
		require.Equal(t, map[string]int{"free": 2, "pro": 5}[key], admitted, key)
	}
	mock.Add(time.Minute) // December in Paris
	d, err := g.Allow(ctx, []string{"free", "b:free"}, 2)
	require.NoError(t, err)
	require.True(t, d.Allowed, "the month started again")
	p, err := quota.ParamsFor(ctx, "free")
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, time.December, 1, 0, 0, 0, 0, paris).UnixNano(), p.Windows[1])
	require.Equal(t, engine.KindFixedWindow, p.Kind)
}
