package reference

import (
	"testing"
	"time"
	_ "time/tzdata" // the tests' zones, wherever they run

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/calendar"
)

func TestCalendarModelFindsWindowsFromLocalDates(t *testing.T) {
	load := func(name string) *time.Location {
		loc, err := time.LoadLocation(name)
		require.NoError(t, err)
		return loc
	}
	paris, santiago, apia := load("Europe/Paris"), load("America/Santiago"), load("Pacific/Apia")
	tests := []struct {
		name       string
		period     calendar.Period
		loc        *time.Location
		at         time.Time
		start, end time.Time
	}{
		{"Paris's day of 23 hours", calendar.Day, paris, time.Date(2026, 3, 29, 12, 0, 0, 0, paris),
			time.Date(2026, 3, 29, 0, 0, 0, 0, paris), time.Date(2026, 3, 30, 0, 0, 0, 0, paris)},
		{"Santiago's day whose midnight is skipped starts at 01:00", calendar.Day, santiago, time.Date(2026, 9, 6, 12, 0, 0, 0, santiago),
			time.Date(2026, 9, 6, 1, 0, 0, 0, santiago), time.Date(2026, 9, 7, 0, 0, 0, 0, santiago)},
		{"Apia's day before the skipped day ends where the next existing day starts", calendar.Day, apia,
			time.Date(2011, 12, 29, 12, 0, 0, 0, apia), time.Date(2011, 12, 29, 0, 0, 0, 0, apia), time.Date(2011, 12, 31, 0, 0, 0, 0, apia)},
		{"a week from Monday", calendar.Week, paris, time.Date(2026, 11, 29, 23, 0, 0, 0, paris),
			time.Date(2026, 11, 23, 0, 0, 0, 0, paris), time.Date(2026, 11, 30, 0, 0, 0, 0, paris)},
		{"a leap February", calendar.Month, paris, time.Date(2028, 2, 29, 23, 59, 59, 999999999, paris),
			time.Date(2028, 2, 1, 0, 0, 0, 0, paris), time.Date(2028, 3, 1, 0, 0, 0, 0, paris)},
		{"a year", calendar.Year, paris, time.Date(2026, 12, 31, 23, 59, 59, 999999999, paris),
			time.Date(2026, 1, 1, 0, 0, 0, 0, paris), time.Date(2027, 1, 1, 0, 0, 0, 0, paris)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start, end := NewCalendar(1, tt.period, tt.loc).Window(tt.at.UnixNano())
			require.Equal(t, [2]time.Time{tt.start.UTC(), tt.end.UTC()}, [2]time.Time{time.Unix(0, start).UTC(), time.Unix(0, end).UTC()})
		})
	}
}

func TestCalendarModelCountsUntilTheWindowEndsAndKeepsALaterWindow(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	m := NewCalendar(2, calendar.Day, paris)
	at := func(day, hour int) int64 { return time.Date(2026, 3, day, hour, 0, 0, 0, paris).UnixNano() }
	allow := func(now int64) Decision { return m.Apply(engine.Op{Verb: engine.VerbAllow, Cost: 1, Now: now}) }

	require.True(t, allow(at(29, 1)).Allowed)
	require.True(t, allow(at(29, 1)).Allowed)
	d := allow(at(29, 1))
	require.False(t, d.Allowed)
	require.Equal(t, int64(22*time.Hour), d.RetryAfter, "the day of 23 hours ends at midnight")
	require.True(t, allow(at(30, 1)).Allowed, "a new day")
	d = allow(at(29, 23)) // the clock stepped back
	require.True(t, d.Allowed)
	require.Equal(t, int64(25*time.Hour), d.ResetAfter, "counted in the later, stored day")
	require.False(t, allow(at(29, 23)).Allowed)
}
