package vectors

import (
	"time"

	"github.com/sluice-go/sluice/engine"
)

// hour is an hour in nanoseconds.
const hour = int64(time.Hour)

// withCalendar makes p a calendar window of days of 25, 23 and 25 hours
// (daylight-saving changes both ways), the middle one holding the case's
// start an hour after it began: run places them at the case's start.
func withCalendar(p *engine.Params) {
	p.Windows = [4]int64{-26 * hour, -hour, 22 * hour, 47 * hour}
	p.Interval = 23 * hour
}

// at returns p's calendar windows moved to start at t0: the windows a
// caller computes around a time of its clock.
func at(p engine.Params, t0 int64) engine.Params {
	for i := range p.Windows {
		p.Windows[i] += t0
	}
	return p
}

// calendarWindow reports whether a is the aligned fixed window, whose
// rules the calendar's windows take as a mode of their own.
var calendarWindow = kind(engine.KindFixedWindow, false)

// following returns the Params of the moment with the windows a caller
// computes once its clock is in the next window: the next two, and one
// more of 24 hours.
func (b *builder) following() engine.Params {
	q := b.p
	w := q.Windows
	q.Windows = [4]int64{w[1], w[2], w[3], w[3] + 24*hour}
	q.Interval = w[3] - w[2]
	return q
}

// calendarRecipes are the rules of calendar windows (engine.Params.Windows),
// each on a fixed window that the recipe makes a calendar window.
var calendarRecipes = []recipe{
	{verb: "allow", rule: "calendar-window-counts-until-its-end", applies: calendarWindow, with: withCalendar, everywhere: true,
		build: func(b *builder) {
			end := b.p.Windows[2]
			b.admit(b.allow(b.limit()))
			b.expect(int64(b.deny(b.allow(1)).RetryAfter) == end-b.now, "told to retry when the window of 23 hours ends")
			b.now = end - 1
			d := b.deny(b.check(1))
			b.expect(d.RetryAfter == 1 && d.ResetAfter == 1, "full until its last nanosecond")
			b.now = end
			b.as(b.following())
			d = b.admit(b.allow(b.limit()))
			b.expect(int64(d.ResetAfter) == b.p.Windows[2]-b.now, "the whole limit again, until the next window of 25 hours ends")
		}},
	{verb: "allow", rule: "calendar-window-of-a-clock-ahead-is-the-next-of-the-callers", applies: calendarWindow, with: withCalendar,
		everywhere: true, build: func(b *builder) {
			// A store's clock an hour into the next window, with the
			// windows a caller computed an hour before it: the next window
			// counts.
			b.admit(b.allow(b.limit()))
			b.now = b.p.Windows[2] + hour
			d := b.admit(b.allow(2))
			b.expect(d.Used == 2 && int64(d.ResetAfter) == b.p.Windows[3]-b.now, "counted in the next window, until its end")
		}},
	{verb: "allow", rule: "calendar-clock-stepped-back-stays-in-the-stored-window", applies: calendarWindow, with: withCalendar,
		everywhere: true, build: func(b *builder) {
			later := b.p.Windows[3]
			b.now = b.p.Windows[2] + hour
			b.admit(b.allow(2))
			b.now -= 2 * hour // back into the window before
			d := b.admit(b.allow(b.limit() - 2))
			b.expect(d.Remaining == 0 && int64(d.ResetAfter) == later-b.now, "the stored window's count, until its end")
			b.expect(int64(b.deny(b.allow(1)).RetryAfter) == later-b.now, "told to retry when the stored window ends")
		}},
	{verb: "allow", rule: "calendar-time-outside-the-windows-is-refused", applies: calendarWindow, with: withCalendar,
		build: func(b *builder) {
			start := b.now
			for _, t := range []int64{b.p.Windows[0] - 1, b.p.Windows[3]} {
				b.now = t
				b.refuse(b.allow(1), engine.ErrTimeOutOfRange)
				b.refuse(b.check(1), engine.ErrTimeOutOfRange)
			}
			b.now = b.p.Windows[0]
			b.expect(b.admit(b.allow(b.limit())).Remaining == 0, "the first window's whole limit: nothing recorded")
			b.now = start
			b.expect(b.admit(b.allow(b.limit())).Remaining == 0, "the next window's whole limit")
		}},
	{verb: "at-most", rule: "calendar-grants-what-is-left-until-the-end", applies: calendarWindow, with: withCalendar,
		everywhere: true, build: func(b *builder) {
			b.admit(b.allow(b.limit() - 2))
			d := b.admit(b.atMost(b.limit()))
			b.expect(d.Granted == 2 && int64(d.ResetAfter) == b.p.Windows[2]-b.now, "the two units left, until the end")
			b.expect(int64(b.deny(b.atMost(1)).RetryAfter) == b.p.Windows[2]-b.now, "nothing left until the end")
		}},
	{verb: "allow", rule: "calendar-count-carries-into-a-longer-window-that-holds-its-end", applies: calendarWindow, with: withCalendar,
		everywhere: true, build: func(b *builder) {
			day := b.p
			b.admit(b.allow(b.limit()))
			// A month of 30 days that holds the day: a limit changed from
			// a daily to a monthly quota, twice as large.
			month := b.changed(func(q *engine.Params) {
				first := day.Windows[1] - 10*24*hour
				q.Windows = [4]int64{first - 31*24*hour, first, first + 30*24*hour, first + 61*24*hour}
				q.Interval, q.Limit = 30*24*hour, 2*day.Limit
			})
			b.as(month)
			d := b.admit(b.allow(1))
			b.expect(d.Used == day.Limit+1 && int64(d.ResetAfter) == month.Windows[2]-b.now, "the day's count kept, until the month ends")
			b.now = day.Windows[2] // the day's end, in the month
			b.expect(b.deny(b.allow(day.Limit)).Used == day.Limit+1, "still counted after the day ended")
		}},
	{verb: "allow", rule: "calendar-count-in-a-shorter-window-after-its-end-is-fresh", applies: calendarWindow, with: withCalendar,
		everywhere: true, build: func(b *builder) {
			b.admit(b.allow(b.limit()))
			b.now = b.p.Windows[2]
			next := b.following()
			b.as(next)
			b.expect(b.admit(b.allow(b.limit())).Remaining == 0, "the next window's whole limit")
		}},
	{verb: "allow", rule: "calendar-penalty-blocks-past-the-window-end", applies: calendarWindow,
		with: func(p *engine.Params) { withCalendar(p); p.Penalty = 2 * 24 * hour }, build: func(b *builder) {
			b.admit(b.allow(b.limit()))
			d := b.deny(b.allow(1))
			b.expect(d.Blocked && int64(d.RetryAfter) == 2*24*hour, "blocked for the penalty, past the window's end")
			b.now = b.p.Windows[2]
			b.as(b.following())
			b.expect(b.deny(b.allow(1)).Blocked, "still blocked in the next window")
		}},
	{verb: "allow", rule: "calendar-counted-denial-fills-the-window", applies: calendarWindow,
		with: func(p *engine.Params) { withCalendar(p); p.CountDenied = true }, build: func(b *builder) {
			b.admit(b.allow(b.limit() - 1))
			d := b.deny(b.allow(2))
			b.expect(d.Remaining == 0 && int64(d.RetryAfter) == b.p.Windows[2]-b.now, "filled to the limit until the end")
			b.deny(b.allow(1))
		}},
}
