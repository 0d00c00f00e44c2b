package sluice

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/calendar"
)

// A Period is the calendar period of a [NewCalendarWindow].
type Period uint8

// The calendar's periods, each from its first instant in the window's
// time zone: a local day from midnight (or from the instant a
// daylight-saving change skips midnight), a week from Monday (ISO 8601),
// a month from the 1st, a year from January 1.
const (
	Day Period = iota + 1
	Week
	Month
	Year
)

// String returns "day", "week", "month" or "year".
func (p Period) String() string { return calendar.Period(p).String() }

// NewCalendarWindow returns a limiter admitting up to limit per calendar
// period in loc, a quota that starts again at the first instant of each
// day, week, month or year there:
//
//	paris, _ := time.LoadLocation("Europe/Paris")
//	quota, err := sluice.NewCalendarWindow(1000, sluice.Month, paris)
//
// It is a fixed window whose windows are the calendar's: a day of 23 or
// 25 hours across a daylight-saving change, months of 28 to 31 days.
// Decision.ResetAfter and RetryAfter say exactly when the quota starts
// again, and so do the RateLimit fields of the HTTP and gRPC adapters.
// Denied requests are not counted. A key is forgotten when its window
// ends.
//
// The limiter computes each decision's windows from its clock, in loc, and
// hands the store the window that holds its time with the one before and
// the one after (see engine.Params.Windows). A store that reads its own
// clock (Redis TIME, PostgreSQL clock_timestamp()) counts in the one of
// the three that holds its time, so that the limiter's and the store's
// clocks may differ by up to a window, and refuses a time outside them
// with [ErrTimeOutOfRange]: it never decides by the caller's clock
// instead.
//
// A key's calendar may change (a daily quota made monthly): its count
// carries into the window of the new calendar that holds the end of the
// window it was counted in, and is fresh from that end on if the new
// window ends first.
//
// Guarantee: at most limit per calendar window; an interval across a
// boundary can hold up to 2*limit (a window's worth just before it and
// again just after). The time zone database must be available: import
// time/tzdata in a program that runs where it may not be.
func NewCalendarWindow(limit float64, period Period, loc *time.Location, opts ...Option) (*Limiter, error) {
	switch {
	case !calendar.Period(period).Valid():
		return nil, fmt.Errorf("%w: calendar window: unknown period %v", ErrInvalidConfig, period)
	case loc == nil:
		return nil, fmt.Errorf("%w: calendar window: no time zone", ErrInvalidConfig)
	}
	cal := &calendarWindows{period: calendar.Period(period), loc: loc}
	return newLimiter(engine.Params{Kind: engine.KindFixedWindow, Limit: limit}, append(opts, withCalendar(cal)))
}

// withCalendar makes the limiter a calendar window of cal.
func withCalendar(cal *calendarWindows) Option {
	return optionFunc(func(s *settings) error {
		s.cal = cal
		return nil
	})
}

// calendarWindows computes a calendar window's Params: those in force
// until the limiter's time leaves their middle window, computed once per
// window and shared by every decision in it.
type calendarWindows struct {
	period  calendar.Period
	loc     *time.Location
	current atomic.Pointer[engine.Params]
}

// start sets the Params of the windows around now from p, which are those
// of every window but for the windows themselves.
func (c *calendarWindows) start(p engine.Params, now int64) engine.Params {
	q := c.around(&p, min(max(now, 0), maxTime))
	c.current.Store(q)
	return *q
}

// at returns the Params of the windows around now. A time out of range
// keeps the last ones, whose Check refuses it.
func (c *calendarWindows) at(now int64) *engine.Params {
	p := c.current.Load()
	if now >= p.Windows[1] && now < p.Windows[2] || engine.CheckTime(now) != nil {
		return p
	}
	// Callers that race here compute the same windows.
	q := c.around(p, now)
	c.current.Store(q)
	return q
}

// around returns p with the windows around now.
func (c *calendarWindows) around(p *engine.Params, now int64) *engine.Params {
	q := calendar.Around(*p, c.period, c.loc, now)
	return &q
}
