package calendar

import (
	"math"
	"testing"
	"time"
	_ "time/tzdata" // the zones, on machines without /usr/share/zoneinfo

	"github.com/stretchr/testify/require"
)

// zones are the zones the brute-force tests walk: each has a trait that
// trips naive code (midnight skipped or repeated, a skipped day, offsets of
// 30 or 45 minutes or odd seconds, rules that change year to year).
var zones = []string{
	"UTC", "Europe/Paris", "America/New_York", "America/Santiago",
	"America/Havana", "Asia/Beirut", "Pacific/Apia", "Australia/Lord_Howe",
	"Asia/Kolkata", "Pacific/Chatham", "America/St_Johns", "Africa/Casablanca",
	"Asia/Tehran", "Pacific/Kiritimati", "America/Sao_Paulo",
	"Pacific/Kwajalein", "Africa/Monrovia", "America/Asuncion",
}

var periods = []Period{Day, Week, Month, Year}

func load(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

func instant(t testing.TB, s string) int64 {
	t.Helper()
	at, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return at.UnixNano()
}

func show(loc *time.Location, ns int64) string {
	return time.Unix(0, ns).In(loc).Format("2006-01-02 15:04:05.999999999 -07:00:00")
}

func TestPeriodStringAndValid(t *testing.T) {
	for _, tc := range []struct {
		p     Period
		name  string
		valid bool
	}{
		{0, "period(0)", false}, {Day, "day", true}, {Week, "week", true},
		{Month, "month", true}, {Year, "year", true}, {5, "period(5)", false},
		{255, "period(255)", false},
	} {
		require.Equal(t, tc.name, tc.p.String())
		require.Equal(t, tc.valid, tc.p.Valid(), "%v", tc.p)
	}
}

func TestWindowsKnownBoundaries(t *testing.T) {
	const h = time.Hour
	for _, tc := range []struct {
		name, zone string
		p          Period
		now        string        // an instant in the window
		start, end string        // the window's bounds
		length     time.Duration // end - start, for the reader
	}{
		{"Paris day of spring forward is 23h", "Europe/Paris", Day, "2026-03-29T12:00:00+02:00",
			"2026-03-29T00:00:00+01:00", "2026-03-30T00:00:00+02:00", 23 * h},
		{"Paris day of fall back is 25h", "Europe/Paris", Day, "2026-10-25T02:30:00+01:00",
			"2026-10-25T00:00:00+02:00", "2026-10-26T00:00:00+01:00", 25 * h},
		{"Paris February of leap 2028 is 29 whole days", "Europe/Paris", Month, "2028-02-29T23:59:59+01:00",
			"2028-02-01T00:00:00+01:00", "2028-03-01T00:00:00+01:00", 29 * 24 * h},
		{"Paris March 2026 is 31 days less an hour", "Europe/Paris", Month, "2026-03-01T00:00:00+01:00",
			"2026-03-01T00:00:00+01:00", "2026-04-01T00:00:00+02:00", 31*24*h - h},
		{"Santiago day whose midnight is skipped starts at 01:00", "America/Santiago", Day, "2022-09-11T01:00:00-03:00",
			"2022-09-11T01:00:00-03:00", "2022-09-12T00:00:00-03:00", 23 * h},
		{"Santiago day before a skipped midnight ends at the jump", "America/Santiago", Day, "2022-09-10T23:59:59-04:00",
			"2022-09-10T00:00:00-04:00", "2022-09-11T01:00:00-03:00", 24 * h},
		{"Santiago day whose 24:00 falls back to 23:00 is 25h", "America/Santiago", Day, "2022-04-02T23:30:00-04:00",
			"2022-04-02T00:00:00-03:00", "2022-04-03T00:00:00-04:00", 25 * h},
		{"St Johns minutes shown as the day before after 00:01 fall back belong to the new day", "America/St_Johns", Day, "2006-10-28T23:15:00-03:30",
			"2006-10-29T00:00:00-02:30", "2006-10-30T00:00:00-03:30", 25 * h},
		{"St Johns day before an 00:01 fall back ends at its first midnight", "America/St_Johns", Day, "2006-10-28T23:59:00-02:30",
			"2006-10-28T00:00:00-02:30", "2006-10-29T00:00:00-02:30", 24 * h},
		{"Havana day starts at the first of its two midnights", "America/Havana", Day, "2026-11-01T00:30:00-05:00",
			"2026-11-01T00:00:00-04:00", "2026-11-02T00:00:00-05:00", 25 * h},
		{"Havana day whose midnight is skipped starts at 01:00", "America/Havana", Day, "2026-03-08T12:00:00-04:00",
			"2026-03-08T01:00:00-04:00", "2026-03-09T00:00:00-04:00", 23 * h},
		{"Beirut day whose 24:00 falls back to 23:00 is 25h", "Asia/Beirut", Day, "2026-10-24T23:30:00+02:00",
			"2026-10-24T00:00:00+03:00", "2026-10-25T00:00:00+02:00", 25 * h},
		{"Paris day of 1976-09-26 starts at the first of its two midnights", "Europe/Paris", Day, "1976-09-26T12:00:00+01:00",
			"1976-09-26T00:00:00+02:00", "1976-09-27T00:00:00+01:00", 25 * h},
		{"Kiritimati day before the skipped 1994-12-31 ends at 1995-01-01", "Pacific/Kiritimati", Day, "1994-12-30T12:00:00-10:00",
			"1994-12-30T00:00:00-10:00", "1995-01-01T00:00:00+14:00", 24 * h},
		{"Apia day before the skipped 2011-12-30 ends at December 31", "Pacific/Apia", Day, "2011-12-29T12:00:00-10:00",
			"2011-12-29T00:00:00-10:00", "2011-12-31T00:00:00+14:00", 24 * h},
		{"Apia December 31 2011 starts where December 29 ended", "Pacific/Apia", Day, "2011-12-31T12:00:00+14:00",
			"2011-12-31T00:00:00+14:00", "2012-01-01T00:00:00+14:00", 24 * h},
		{"Apia week of the skipped day is six days", "Pacific/Apia", Week, "2011-12-31T12:00:00+14:00",
			"2011-12-26T00:00:00-10:00", "2012-01-02T00:00:00+14:00", 6 * 24 * h},
		{"Kwajalein day before the skipped 1993-08-21 ends at August 22", "Pacific/Kwajalein", Day, "1993-08-20T12:00:00-12:00",
			"1993-08-20T00:00:00-12:00", "1993-08-22T00:00:00+12:00", 24 * h},
		{"Lord Howe day of fall back is 24.5h", "Australia/Lord_Howe", Day, "2026-04-05T12:00:00+10:30",
			"2026-04-05T00:00:00+11:00", "2026-04-06T00:00:00+10:30", 24*h + 30*time.Minute},
		{"Lord Howe day of spring forward is 23.5h", "Australia/Lord_Howe", Day, "2026-10-04T12:00:00+11:00",
			"2026-10-04T00:00:00+10:30", "2026-10-05T00:00:00+11:00", 23*h + 30*time.Minute},
		{"New York week of spring forward is 167h from Monday", "America/New_York", Week, "2026-03-08T03:00:00-04:00",
			"2026-03-02T00:00:00-05:00", "2026-03-09T00:00:00-04:00", 167 * h},
		{"Tokyo leap year 2024 is 366 days", "Asia/Tokyo", Year, "2024-07-01T00:00:00+09:00",
			"2024-01-01T00:00:00+09:00", "2025-01-01T00:00:00+09:00", 366 * 24 * h},
		{"UTC February 2026 is 28 days", "UTC", Month, "2026-02-14T00:00:00Z",
			"2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z", 28 * 24 * h},
		{"UTC ISO week of 2027-01-01 starts Monday 2026-12-28", "UTC", Week, "2027-01-01T00:00:00Z",
			"2026-12-28T00:00:00Z", "2027-01-04T00:00:00Z", 7 * 24 * h},
		{"Los Angeles day is at its negative offset", "America/Los_Angeles", Day, "2026-07-04T23:59:59.999999999-07:00",
			"2026-07-04T00:00:00-07:00", "2026-07-05T00:00:00-07:00", 24 * h},
		{"Monrovia day at -0:44:30 starts at an odd second", "Africa/Monrovia", Day, "1971-06-15T12:00:00Z",
			"1971-06-15T00:44:30Z", "1971-06-16T00:44:30Z", 24 * h},
		{"Monrovia day of the move to GMT starts at the jump", "Africa/Monrovia", Day, "1972-01-07T12:00:00Z",
			"1972-01-07T00:44:30Z", "1972-01-08T00:00:00Z", 23*h + 15*time.Minute + 30*time.Second},
		{"Paris year 2041 starts past the zone table after a leap year", "Europe/Paris", Year, "2041-06-01T00:00:00Z",
			"2041-01-01T00:00:00+01:00", "2042-01-01T00:00:00+01:00", 365 * 24 * h},
		{"Paris day of 2040-12-31 ends past the zone table", "Europe/Paris", Day, "2040-12-31T12:00:00Z",
			"2040-12-31T00:00:00+01:00", "2041-01-01T00:00:00+01:00", 24 * h},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loc := load(t, tc.zone)
			w := checkWindows(t, tc.p, loc, instant(t, tc.now))
			require.Equal(t, show(loc, instant(t, tc.start)), show(loc, w[1]), "start")
			require.Equal(t, show(loc, instant(t, tc.end)), show(loc, w[2]), "end")
			require.Equal(t, tc.length, time.Duration(w[2]-w[1]))
		})
	}
}

// TestWindowsSkippedMidnightStartsTheDayAtTheJump finds, rather than trusts,
// the days of 2022-2026 whose midnight the clocks skip, in zones that move
// them forward at midnight: such a day starts at the jump and is short.
func TestWindowsSkippedMidnightStartsTheDayAtTheJump(t *testing.T) {
	for _, zone := range []string{"America/Santiago", "America/Havana", "Asia/Beirut", "America/Asuncion"} {
		t.Run(zone, func(t *testing.T) {
			loc := load(t, zone)
			found := 0
			for _, c := range changes(loc, time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)) {
				jump, before := time.Unix(c, 0).In(loc), time.Unix(c-1, 0).In(loc)
				if key(Day, before) == key(Day, jump) || jump.Format(time.TimeOnly) == "00:00:00" {
					continue
				}
				found++
				_, off0 := before.Zone()
				_, off1 := jump.Zone()
				w := checkWindows(t, Day, loc, jump.UnixNano())
				require.Equal(t, show(loc, jump.UnixNano()), show(loc, w[1]))
				require.Equal(t, 24*time.Hour-time.Duration(off1-off0)*time.Second, time.Duration(w[2]-w[1]), "%s", jump)
				require.Equal(t, w[1], Windows(Day, loc, w[1]-1)[2])
			}
			require.Positive(t, found, "no skipped midnight found")
		})
	}
}

func TestWindowsTreatsInvalidPeriodAsDayAndNilLocationAsUTC(t *testing.T) {
	for _, now := range []int64{0, 1, 1e18, 1 << 62} {
		require.Equal(t, Windows(Day, time.UTC, now), Windows(0, nil, now))
		require.Equal(t, Windows(Day, time.UTC, now), Windows(9, time.UTC, now))
	}
}

func TestStartIsTheWindowStartInLoc(t *testing.T) {
	paris := load(t, "Europe/Paris")
	at := time.Date(2026, 3, 15, 12, 0, 0, 0, time.UTC)
	got := Start(Month, paris, at)
	require.True(t, time.Date(2026, 3, 1, 0, 0, 0, 0, paris).Equal(got), "%s", got)
	require.Equal(t, paris, got.Location())
	for _, zone := range zones {
		loc := load(t, zone)
		for _, p := range periods {
			for now := int64(0); now < 1<<62; now += 1<<62/97 + 12345 {
				require.Equal(t, Windows(p, loc, now)[1], Start(p, loc, time.Unix(0, now)).UnixNano(), "%s %v %d", zone, p, now)
			}
		}
	}
	// Times outside int64 nanoseconds work too.
	got = Start(Year, time.UTC, time.Time{})
	require.True(t, time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Equal(got), "%s", got)
	got = Start(Month, paris, time.Date(9999, 12, 31, 23, 0, 0, 0, paris))
	require.True(t, time.Date(9999, 12, 1, 0, 0, 0, 0, paris).Equal(got), "%s", got)
}

// TestWindowsInvariantsFrom1970To2035 walks every zone and period through
// 1970..2035 at a step that drifts across hours, weekdays and nanoseconds,
// checks Windows at each instant, and checks each window it meets from its
// start, its last nanosecond and its end. Under the race detector the step
// is 100 times longer, to keep the package's tests within two seconds.
func TestWindowsInvariantsFrom1970To2035(t *testing.T) {
	step := int64(7*time.Hour + 13*time.Minute + 17*time.Second + 123456789)
	if raceEnabled {
		step *= 100
	}
	end := time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for _, zone := range zones {
		t.Run(zone, func(t *testing.T) {
			t.Parallel()
			loc := load(t, zone)
			for _, p := range periods {
				seen := int64(math.MinInt64)
				for now := int64(0); now < end; now += step {
					w := Windows(p, loc, now)
					if !(w[0] < w[1] && w[1] <= now && now < w[2] && w[2] < w[3]) {
						require.Failf(t, "windows out of order", "%v at %s: %v", p, show(loc, now), showAll(loc, w))
					}
					if w[1] != seen { // a new window: check it once
						seen = w[1]
						checkBoundary(t, p, loc, w[1])
						checkBoundary(t, p, loc, w[2])
						checkChain(t, p, loc, w)
					}
				}
			}
		})
	}
}

// TestWindowsMatchReferenceNearEveryTransition compares Day windows near
// every offset change of 1970..2035 against a reference built from the
// definition, and checks weeks, months and years that start near one.
func TestWindowsMatchReferenceNearEveryTransition(t *testing.T) {
	const day = 24 * 60 * 60
	for _, zone := range zones {
		t.Run(zone, func(t *testing.T) {
			t.Parallel()
			loc := load(t, zone)
			near, tested := 0, 0
			all := changes(loc, time.Date(1969, 12, 20, 0, 0, 0, 0, time.UTC), time.Date(2036, 1, 10, 0, 0, 0, 0, time.UTC))
			for _, c := range all {
				if c < 0 || c >= time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC).Unix() {
					continue
				}
				near++
				first := time.Unix(c-c%day-4*day, 0).UTC() // 9 days around c, by UTC date
				var starts []int64                         // ascending and distinct: a skipped day adds none
				for i := range 9 {
					d := first.AddDate(0, 0, i)
					s := refStart(loc, all, d)
					if n := len(starts); n > 0 {
						require.GreaterOrEqual(t, s, starts[n-1], "reference starts go back")
					}
					if n := len(starts); n == 0 || s > starts[n-1] {
						starts = append(starts, s)
					}
					for _, p := range periods {
						// s starts a period of p even if d is skipped.
						if isFirstDay(p, d) && (Windows(p, loc, s)[1] != s || Windows(p, loc, s-1)[2] != s) {
							require.Failf(t, "period start missed", "%v of %s starts at %s", p, d, show(loc, s))
						}
					}
				}
				var instants []int64
				for k := int64(-13); k <= 13; k++ {
					instants = append(instants, (c+k*113*60)*1e9) // ±24.5h, at drifting minutes
				}
				for _, s := range starts {
					instants = append(instants, s-1, s, s+1)
				}
				for _, now := range append(instants, c*1e9-1, c*1e9+1) {
					j := len(starts) - 3
					if now < starts[1] || now >= starts[j+1] {
						continue // the reference lacks a window before or after
					}
					for starts[j] > now {
						j--
					}
					tested++
					want := [4]int64{starts[j-1], starts[j], starts[j+1], starts[j+2]}
					if got := Windows(Day, loc, now); got != want {
						require.Equal(t, showAll(loc, want), showAll(loc, got), "at %s", show(loc, now))
					}
				}
			}
			require.GreaterOrEqual(t, tested, 29*near, "instants near a change left untested")
			t.Logf("%d offset changes, %d instants", near, tested)
		})
	}
}

// TestWindowsAtTheEndsOfTime checks the ends of the range, and walks months
// and the turns of years past the zones' tables, where Go computes offsets
// from each zone's rule.
func TestWindowsAtTheEndsOfTime(t *testing.T) {
	for _, zone := range zones {
		t.Run(zone, func(t *testing.T) {
			t.Parallel()
			atTheEndsOfTime(t, load(t, zone))
		})
	}
}

func atTheEndsOfTime(t *testing.T, loc *time.Location) {
	for _, p := range periods {
		for _, now := range []int64{0, 1, 1<<62 - 1, 1 << 62} {
			checkChain(t, p, loc, checkWindows(t, p, loc, now))
		}
		require.Negative(t, Windows(p, loc, 0)[0], "%v", p)
	}
	// Past 2037 Go computes offsets from each zone's rule, and its bounds
	// misbehave at the end of leap years.
	for w := Windows(Month, loc, time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()); w[1] <= 1<<62; w = Windows(Month, loc, w[2]) {
		checkBoundary(t, Month, loc, w[1])
	}
	for y := 2036; y <= 2115; y++ {
		for h := -36; h <= 36; h += 18 {
			checkWindows(t, Day, loc, time.Date(y+1, 1, 1, h, 0, 0, 0, time.UTC).UnixNano())
		}
	}
}

func BenchmarkWindows(b *testing.B) {
	loc := load(b, "Europe/Paris")
	var nows []int64 // from 1970 to 2116, in and past the zone's table
	for now := int64(0); now < 1<<62; now += 1<<62/1000 + 1 {
		nows = append(nows, now)
	}
	for _, p := range periods {
		b.Run(p.String(), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				Windows(p, loc, nows[i%len(nows)])
				i++
			}
		})
	}
}

// checkWindows checks what Windows promises at now, and that each boundary
// starts a period, and returns the windows. The checks run for millions of
// instants, so messages are formatted only on failure.
func checkWindows(t *testing.T, p Period, loc *time.Location, now int64) [4]int64 {
	t.Helper()
	w := Windows(p, loc, now)
	if !(w[0] < w[1] && w[1] <= now && now < w[2] && w[2] < w[3]) {
		require.Failf(t, "windows out of order", "%v in %s at %s: %v", p, loc, show(loc, now), showAll(loc, w))
	}
	for _, b := range w {
		checkBoundary(t, p, loc, b)
	}
	return w
}

// checkBoundary checks that b starts a period of p: the instant before it
// shows an earlier period, and b shows the midnight of the period's first
// day, unless the clocks jump at b (to a later hour, or past the first day).
func checkBoundary(t *testing.T, p Period, loc *time.Location, b int64) {
	t.Helper()
	at, before := wall(loc, b), wall(loc, b-1)
	if key(p, before) >= key(p, at) {
		require.Failf(t, "not a period start", "%v in %s: %s does not follow an earlier period", p, loc, show(loc, b))
	}
	jump, midnight := at.Sub(before) != 1, at.Truncate(24*time.Hour).Equal(at)
	if !jump && (!isFirstDay(p, at) || !midnight) {
		require.Failf(t, "not a period's midnight", "%v in %s: %s, and the clocks do not jump", p, loc, show(loc, b))
	}
}

// wall returns the local date and time at ns in loc, as a UTC time: its
// fields then cost no zone lookup.
func wall(loc *time.Location, ns int64) time.Time {
	at := time.Unix(0, ns).In(loc)
	_, off := at.Zone()
	return at.UTC().Add(time.Duration(off) * time.Second)
}

// checkChain checks that the window w, found from some instant in it, is
// the one found from its first and last nanoseconds, and that the window
// found from its end is the next.
func checkChain(t *testing.T, p Period, loc *time.Location, w [4]int64) {
	t.Helper()
	if got := Windows(p, loc, w[1]); got != w {
		require.Equal(t, showAll(loc, w), showAll(loc, got), "%v from its start", p)
	}
	if got := Windows(p, loc, w[2]-1); got != w {
		require.Equal(t, showAll(loc, w), showAll(loc, got), "%v from its last nanosecond", p)
	}
	if next := Windows(p, loc, w[2]); [3]int64(next[:3]) != [3]int64(w[1:]) {
		require.Equal(t, showAll(loc, w)[1:], showAll(loc, next)[:3], "%v from its end", p)
	}
}

func showAll(loc *time.Location, w [4]int64) []string {
	return []string{show(loc, w[0]), show(loc, w[1]), show(loc, w[2]), show(loc, w[3])}
}

// key numbers the period of p holding t's local date, increasing with time;
// ISOWeek makes weeks independent of the code under test.
func key(p Period, t time.Time) int {
	y, m, d := t.Date()
	switch p {
	case Week:
		y, w := t.ISOWeek()
		return y*100 + w
	case Month:
		return y*100 + int(m)
	case Year:
		return y
	}
	return y*10000 + int(m)*100 + d
}

func isFirstDay(p Period, t time.Time) bool {
	switch p {
	case Week:
		return t.Weekday() == time.Monday
	case Month:
		return t.Day() == 1
	case Year:
		return t.YearDay() == 1
	}
	return true
}

func offset(loc *time.Location, sec int64) int64 {
	_, off := time.Unix(sec, 0).In(loc).Zone()
	return int64(off)
}

// changes returns, in Unix seconds, every instant in [from, to) at which
// loc's offset changes, found by sampling every 12 hours and bisecting, so
// without the ZoneBounds the code under test relies on. No zone changes its
// offset twice within 12 hours and back.
func changes(loc *time.Location, from, to time.Time) []int64 {
	var out []int64
	lo := from.Unix()
	off := offset(loc, lo)
	for t := lo + 12*3600; t < to.Unix(); t += 12 * 3600 {
		for last := offset(loc, t); off != last; {
			a, b := lo, t // offset(a) == off != offset(b): find the first change after a
			for b-a > 1 {
				if m := a + (b-a)/2; offset(loc, m) == off {
					a = m
				} else {
					b = m
				}
			}
			out = append(out, b)
			lo, off = b, offset(loc, b)
		}
		lo = t
	}
	return out
}

// refStart returns the first instant, in nanoseconds, whose local date is
// the day d or later, from the definition: it is the earliest second at which
// the wall clock reaches d's midnight from before it, either at a change in
// all or at d's midnight in one of the offsets in effect near d.
func refStart(loc *time.Location, all []int64, d time.Time) int64 {
	const near = 3 * 24 * 3600 // past every offset
	mid := d.Unix()
	wall := func(sec int64) int64 { return sec + offset(loc, sec) }
	best := int64(math.MaxInt64)
	try := func(sec int64) {
		if wall(sec) >= mid && wall(sec-1) < mid && sec < best {
			best = sec
		}
	}
	offs := []int64{offset(loc, mid)}
	for _, c := range all {
		if c > mid-near && c < mid+near {
			try(c)
			offs = append(offs, offset(loc, c-1), offset(loc, c))
		}
	}
	for _, off := range offs {
		try(mid - off)
	}
	return best * 1e9
}
