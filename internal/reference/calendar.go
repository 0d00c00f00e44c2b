package reference

import (
	"math"
	"math/big"
	"time"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/calendar"
)

// Calendar is the exact model of a calendar window: cost per local day,
// ISO week, month or year of a time zone, admitted iff the window's count
// plus the cost is at most the limit. It finds its windows from the
// definition, by searching the local dates of instants, rather than as
// package calendar computes them: a period starts at the first instant
// whose local date is in it or later, and the window holding an instant
// is the one whose [start, next start) holds it. A window's count lasts
// until the window's end: a clock that steps back into an earlier window
// stays in the stored one. The limit may change between requests
// ([Calendar.SetLimit]): the count is kept, and the new limit decides
// from it.
type Calendar struct {
	period calendar.Period
	loc    *time.Location
	limit  *big.Rat
	limitF float64
	count  *big.Rat            // zero when no window is open
	end    int64               // the open window's end
	starts map[time.Time]int64 // each period's start, by its first day, once searched
}

// NewCalendar returns the model of limit per period in loc.
func NewCalendar(limit float64, period calendar.Period, loc *time.Location) *Calendar {
	c := &Calendar{period: period, loc: loc, starts: map[time.Time]int64{}}
	c.SetLimit(limit)
	c.Reset()
	return c
}

// SetLimit changes the key's limit, keeping its count.
func (c *Calendar) SetLimit(limit float64) { c.limit, c.limitF = rat(limit), limit }

// Reset forgets the key.
func (c *Calendar) Reset() { c.count, c.end = new(big.Rat), 0 }

// Load replaces the key's state by a production state's.
func (c *Calendar) Load(s engine.State) { c.count, c.end = rat(s.A), s.Time }

// Window returns the window that holds now, by the definition.
func (c *Calendar) Window(now int64) (start, end int64) {
	k := c.firstDay(time.Unix(0, now).In(c.loc))
	for {
		start, end = c.start(k), c.start(c.next(k))
		switch {
		case now < start:
			k = c.prev(k)
		case now >= end:
			k = c.next(k)
		default:
			return start, end
		}
	}
}

// Apply decides op, an Allow, a check or a partial grant at op.Now.
func (c *Calendar) Apply(op engine.Op) Decision {
	ws, we := c.Window(op.Now)
	count, end := c.count, we
	switch {
	case c.end <= ws:
		count = new(big.Rat)
	case c.end > we:
		end = c.end
	}
	if op.Verb == engine.VerbAtMost {
		return c.atMost(op, count, end)
	}
	d := c.decide(op.Cost, count, end, op.Now)
	if op.Verb == engine.VerbAllow && d.Allowed {
		c.record(d.Used, end)
	}
	return d
}

// record keeps count in the window ending at end: no window at all for a
// count of zero, which is a fresh key's.
func (c *Calendar) record(count *big.Rat, end int64) {
	if count.Sign() == 0 {
		c.Reset()
		return
	}
	c.count, c.end = count, end
}

// decide admits cost iff count+cost is at most the limit.
func (c *Calendar) decide(cost float64, count *big.Rat, end, now int64) Decision {
	sum := add(count, rat(cost))
	d := Decision{Allowed: sum.Cmp(c.limit) <= 0, Used: count, Margin: relative(sub(sum, c.limit), c.limitF)}
	if d.Allowed {
		d.Used = sum
	} else {
		d.RetryAfter = end - now
	}
	if d.Used.Sign() > 0 {
		d.ResetAfter = end - now
	}
	return d
}

// atMost grants the whole cost if it fits, or else the most whole units
// less than it that fit, recording what it granted; a cost of zero admits
// nothing.
func (c *Calendar) atMost(op engine.Op, count *big.Rat, end int64) Decision {
	grant := func(cost float64) Decision {
		d := c.decide(cost, count, end, op.Now)
		d.Granted = cost
		c.record(d.Used, end)
		return d
	}
	if whole := c.decide(op.Cost, count, end, op.Now); whole.Allowed {
		if op.Cost == 0 {
			whole.Allowed = false
			return whole
		}
		return grant(op.Cost)
	}
	room, _ := new(big.Float).SetInt(floorInt(sub(c.limit, count))).Float64()
	if units := min(math.Ceil(op.Cost)-1, room); units >= 1 {
		return grant(units)
	}
	return c.decide(min(op.Cost, 1), count, end, op.Now)
}

// start returns the first instant whose local date is day or later: a
// search of the local dates of instants, forward in steps of ten minutes
// from a time before any zone's midnight of day, then by halves within the
// step where the date reaches it, in which no zone changes its offset
// twice.
func (c *Calendar) start(day time.Time) int64 {
	if t, ok := c.starts[day]; ok {
		return t
	}
	const step = int64(10 * time.Minute)
	lo := time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, time.UTC).UnixNano() - int64(27*time.Hour)
	for !c.reached(lo+step, day) {
		lo += step
	}
	hi := lo + step // reached at hi, not at lo
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if c.reached(mid, day) {
			hi = mid
		} else {
			lo = mid
		}
	}
	c.starts[day] = hi
	return hi
}

// reached reports whether the local date of t is day or later.
func (c *Calendar) reached(t int64, day time.Time) bool {
	y, m, d := time.Unix(0, t).In(c.loc).Date()
	return !time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Before(day)
}

// firstDay returns the first day, as a UTC midnight, of the period of t's
// local date.
func (c *Calendar) firstDay(t time.Time) time.Time {
	y, m, d := t.Date()
	day := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	switch c.period {
	case calendar.Week:
		return day.AddDate(0, 0, -(int(day.Weekday())+6)%7) // back to Monday
	case calendar.Month:
		return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
	case calendar.Year:
		return time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return day
}

// next and prev return the first day of the period after and before the
// one that starts on k.
func (c *Calendar) next(k time.Time) time.Time { return c.shift(k, 1) }
func (c *Calendar) prev(k time.Time) time.Time { return c.shift(k, -1) }

func (c *Calendar) shift(k time.Time, n int) time.Time {
	switch c.period {
	case calendar.Week:
		return k.AddDate(0, 0, 7*n)
	case calendar.Month:
		return k.AddDate(0, n, 0)
	case calendar.Year:
		return k.AddDate(n, 0, 0)
	}
	return k.AddDate(0, 0, n)
}
