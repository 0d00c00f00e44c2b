// Package calendar computes the boundaries of calendar windows (a local
// day, an ISO week, a month, a year) in an IANA time zone, exact to the
// nanosecond, for quotas that start again at the first instant of each
// period.
//
// A period starts at the first instant whose local date is its first day or
// later. So a day whose midnight does not exist starts at the transition
// that skips it, and a skipped day (Pacific/Apia, 2011-12-30) has no window:
// the window before it ends where the next existing day begins. Windows are
// defined by their starts alone: the window holding an instant is the one
// whose [start, next start) holds it, even if clocks went back and the
// instant shows the date of the window before.
package calendar

import (
	"strconv"
	"time"

	"github.com/sluice-go/sluice/engine"
)

// Period is a calendar period.
type Period uint8

// The periods; the zero Period is invalid.
const (
	Day   Period = iota + 1 // a local day, from its first instant
	Week                    // an ISO 8601 week, from Monday
	Month                   // a calendar month, from the 1st
	Year                    // a calendar year, from January 1
)

// String returns "day", "week", "month" or "year", or "period(N)" for an
// invalid period.
func (p Period) String() string {
	switch p {
	case Day:
		return "day"
	case Week:
		return "week"
	case Month:
		return "month"
	case Year:
		return "year"
	}
	return "period(" + strconv.Itoa(int(p)) + ")"
}

// Valid reports whether p is one of Day, Week, Month and Year.
func (p Period) Valid() bool { return p >= Day && p <= Year }

// Windows returns the boundaries of three consecutive windows of period p in
// loc: w[0] is the start of the window before the one holding now, w[1] the
// start of the window holding now, w[2] its end (the start of the next),
// w[3] the end of the next. So w[0] < w[1] <= now < w[2] < w[3]. Times are
// nanoseconds since the Unix epoch; now may be anywhere in [0, 2^62], w[0]
// may be negative and w[3] past 2^62. An invalid p counts as Day and a nil
// loc as UTC.
func Windows(p Period, loc *time.Location, now int64) [4]int64 {
	w := windows(p, loc, time.Unix(0, now))
	return [4]int64{w[0].UnixNano(), w[1].UnixNano(), w[2].UnixNano(), w[3].UnixNano()}
}

// Around returns p, a fixed window, as a calendar window of period p in
// loc at now: its Windows those around now, and its Interval the middle
// window's length (see engine.Params.Windows).
func Around(p engine.Params, period Period, loc *time.Location, now int64) engine.Params {
	p.Windows = Windows(period, loc, now)
	p.Interval = p.Windows[2] - p.Windows[1]
	return p
}

// Start returns the first instant of the window of period p in loc that
// holds t, as Windows defines windows, expressed in loc. It accepts any t,
// not only those of Windows's range. An invalid p counts as Day and a nil
// loc as UTC.
func Start(p Period, loc *time.Location, t time.Time) time.Time {
	return windows(p, loc, t)[1]
}

// windows is Windows in time.Time, which holds the years outside int64
// nanoseconds that Start may meet.
func windows(p Period, loc *time.Location, t time.Time) [4]time.Time {
	if !p.Valid() {
		p = Day
	}
	if loc == nil {
		loc = time.UTC
	}
	// List the distinct starts of the periods from the one before that of t's
	// date until two starts lie after t. The start of t's date's period is at
	// or before t; the next one may be too, if the clocks went back. Days
	// start two back, to leave a window before t's if a day was skipped (no
	// zone skips two running); max only keeps broken zone data from panics.
	back := -1
	if p == Day {
		back = -2
	}
	k := step(p, first(p, date(t.In(loc))), back)
	w := walker{loc: loc}
	w.enter(k.Add(-48 * time.Hour))
	var s [8]time.Time
	n := 0
	for ; n < len(s) && (n < 2 || !s[n-2].After(t)); k = step(p, k, 1) {
		if x := w.start(k); n == 0 || x.After(s[n-1]) { // a skipped day adds no start
			s[n] = x
			n++
		}
	}
	return [4]time.Time{s[max(n-4, 0)], s[max(n-3, 0)], s[n-2], s[n-1]}
}

// date returns the local date of t as midnight UTC, the form of a day that
// time.Date and AddDate compute with and that no zone rule can disturb.
func date(t time.Time) time.Time {
	y, m, d := t.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// first returns the first day of the period of p holding the day d.
func first(p Period, d time.Time) time.Time {
	switch p {
	case Week:
		return d.AddDate(0, 0, -(int(d.Weekday())+6)%7) // ISO weeks start on Monday
	case Month:
		return d.AddDate(0, 0, 1-d.Day())
	case Year:
		return d.AddDate(0, 0, 1-d.YearDay())
	}
	return d
}

// step returns the first day of the period n periods after the one starting
// on the day k.
func step(p Period, k time.Time, n int) time.Time {
	switch p {
	case Week:
		return k.AddDate(0, 0, 7*n)
	case Month:
		return k.AddDate(0, n, 0)
	case Year:
		return k.AddDate(n, 0, 0)
	}
	return k.AddDate(0, 0, n)
}

// A walker finds the first instants of ascending days in one zone. It walks
// the zone's spans of constant offset, and looks the zone up only to enter
// a span, so the days of nearby windows cost a lookup or two in all.
// time.Date is no help: at a missing or repeated midnight it may pick either
// offset.
type walker struct {
	loc *time.Location
	t   time.Time // where the walk stands: every instant before shows an earlier day
	off int       // the offset of t's span
	end time.Time // where t's span ends, or zero if it never does
}

// enter moves the walk to t, which must show an earlier day than those to come.
func (w *walker) enter(t time.Time) {
	w.t = t.In(w.loc)
	_, w.off = w.t.Zone()
	_, w.end = w.t.ZoneBounds()
	if !w.end.IsZero() && !w.end.After(w.t) {
		// Past a zone's table Go reckons by its rule, and in a leap year ends
		// the last span on December 31 (UTC), before t: it lasts the year out
		// (golang.org/issue/81583).
		w.end = time.Date(w.t.UTC().Year()+1, 1, 1, 0, 0, 0, 0, time.UTC)
	}
}

// start returns the first instant whose local date is the day d or later,
// for d no earlier than the day of the previous call. The walk goes on from
// the previous start, or jumps to two days before d's midnight in UTC, which
// every offset (all within ±16h) shows as an earlier day, and stops in the
// first span that shows d's midnight or starts past it.
func (w *walker) start(d time.Time) time.Time {
	if from := d.Add(-48 * time.Hour); !w.end.IsZero() && !from.Before(w.end) {
		w.enter(from) // skip the spans between
	}
	for {
		c := d.Add(-time.Duration(w.off) * time.Second) // shows d's midnight in this span
		if !c.After(w.t) {
			return w.t // w.t already shows d or a later day
		}
		if w.end.IsZero() || c.Before(w.end) {
			w.t = c.In(w.loc)
			return w.t
		}
		w.enter(w.end)
	}
}
