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
// period in loc: a fixed window whose windows start at the first instant of
// each day, week, month or year there, days of 23 or 25 hours across a
// daylight-saving change, months of 28 to 31 days. Decision.ResetAfter and
// RetryAfter say exactly when the quota starts again. Denied requests are
// not counted, and a key is forgotten when its window ends. The limiter
// computes the windows from its clock, in loc, and hands the store three of
// them: a store that reads its own clock refuses a time outside them with
// [ErrTimeOutOfRange] ([engine.Params.Windows]). A key's count under
// another calendar carries over as package engine's "Limits that change"
// states.
//
// Guarantee: at most limit per calendar window; an interval across a
// boundary can hold up to 2*limit. Import time/tzdata where zone data may
// be missing.
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
