package reference

import (
	"math"
	"math/big"

	"github.com/sluice-go/sluice/engine"
)

// meter is the leaky bucket, and the continuous token bucket counting the
// tokens in use. Its state is a point (last, A) on the key's level over
// time, a line of slope -r (r = Amount/Interval) that stops at zero going
// forward:
//
//	level(t) = max(0, A - (t-last)*r)   for t >= last
//	level(t) = A + (last-t)*r           for t < last
//
// so that a decision made before the point (a clock that stepped back, or
// a request behind a booked reservation) sees the level the key had then.
// The zero state (0, 0) is a fresh key.
//
// A cost c conforms at t iff c <= Limit and level(t)+c <= Limit, that is
// from the instant last + (A+c-Limit)/r on; fitAt is the first whole
// nanosecond of that. Allow and Check admit c iff now >= fitAt. Reserve
// books fitAt (or Op.At, the earliest instant to book, if that is later
// than both fitAt and now) when it is at most MaxDelay after now (Delay
// fitAt-now, At fitAt when it must wait), and otherwise says to come back
// MaxDelay before fitAt. A recorded cost at the instant at (now, or the booked fitAt) moves
// the point to last' = max(last, at) with level(last')+c there (a fill-up
// clamping at the limit, and always recorded). A reservation's cost is
// given back (Cancel) iff now < At and the point is still at At, a
// nanosecond late: the point moves to (At+1, max(A-c, 0)), so that the
// instant it frees comes a nanosecond after the reservation's own, and a
// booking of that instant leaves another point, which the same cancel,
// made again, cannot mistake for its own. An exhaust raises the level to
// that of the point (now + MaxDelay, Limit) wherever that is higher (see
// [meter.fullAt]), and decides as a check.
type meter struct {
	limit    *big.Rat
	limitF   float64
	perNanos *big.Rat // r = Amount/Interval: what leaks per nanosecond
	drain    float64  // Interval/Amount: nanoseconds per unit
	level    *big.Rat // A, the level at last
	last     int64
}

func newMeter(p engine.Params) *meter {
	m := &meter{
		limit:    rat(p.Limit),
		limitF:   p.Limit,
		perNanos: quo(rat(p.Amount), ratInt(p.Interval)),
		drain:    float64(p.Interval) / p.Amount,
	}
	m.Reset()
	return m
}

func (m *meter) Reset() { m.level, m.last = new(big.Rat), 0 }

func (m *meter) Load(s engine.State) { m.level, m.last = rat(s.A), s.Time }

// levelAt returns the level at t of the point (last, a).
func (m *meter) levelAt(last int64, a *big.Rat, t int64) *big.Rat {
	x := sub(a, mul(ratInt(t-last), m.perNanos))
	if t >= last && x.Sign() < 0 {
		return new(big.Rat)
	}
	return x
}

// emptyAfter returns how long from now until the point (last, a) has
// leaked to zero: the first whole nanosecond at or after last + a/r.
func (m *meter) emptyAfter(last int64, a *big.Rat, now int64) int64 {
	return max(ceilNanos(add(ratInt(last-now), quo(a, m.perNanos))), 0)
}

// zeroMargin is how close a level at now is to zero, relative to the
// limit: a float level within rounding of zero may leave the key fresh (and
// forgotten) where the exact one does not.
func (m *meter) zeroMargin(level *big.Rat) float64 {
	if level.Sign() == 0 {
		return math.Inf(1)
	}
	return relative(level, m.limitF)
}

func (m *meter) Apply(op engine.Op) Decision {
	if op.Verb == engine.VerbCancel {
		return m.cancel(op)
	}
	c := rat(op.Cost)
	d := Decision{Margin: math.Inf(1), Drain: m.drain}
	// The real instant from which c conforms, and its first nanosecond.
	fitReal := add(ratInt(m.last), quo(sub(add(m.level, c), m.limit), m.perNanos))
	fitAt := ceilNanos(fitReal)
	// A fill-up may cost more than the limit: that never conforms.
	conforms := op.Cost <= m.limitF
	if conforms {
		// How far now is from the threshold, as an amount.
		d.Margin = relative(mul(sub(ratInt(op.Now), fitReal), m.perNanos), m.limitF)
	}
	later := op.Verb == engine.VerbReserve && op.At > max(fitAt, op.Now)
	if later {
		// Booked no earlier than op.At: whether fitAt comes before it is
		// a threshold too.
		d.Margin = min(d.Margin, relative(mul(sub(ratInt(op.At), fitReal), m.perNanos), m.limitF))
		fitAt = op.At
	}
	at := op.Now // when the cost is recorded
	switch {
	case conforms && op.Now >= fitAt:
		d.Allowed = true
	case op.Verb == engine.VerbReserve:
		if !later {
			// Whether fitAt comes within MaxDelay is a threshold too.
			d.Margin = min(d.Margin, relative(mul(sub(ratInt(op.Now+op.MaxDelay), fitReal), m.perNanos), m.limitF))
		}
		if fitAt-op.Now <= op.MaxDelay {
			d.Allowed, d.Delay, d.At = true, fitAt-op.Now, fitAt
			at = fitAt
		} else {
			d.RetryAfter = fitAt - op.MaxDelay - op.Now
		}
	case op.Verb != engine.VerbFill:
		// A fill-up is recorded whatever it costs: it has nothing to retry.
		d.RetryAfter = fitAt - op.Now
	}
	if op.Verb != engine.VerbFill && !d.Allowed {
		d.Used = m.levelAt(m.last, m.level, op.Now)
		d.ResetAfter = m.emptyAfter(m.last, m.level, op.Now)
		if m.last <= op.Now {
			d.Margin = min(d.Margin, m.zeroMargin(d.Used))
		}
		return d
	}
	last := max(m.last, at)
	filled := add(m.levelAt(m.last, m.level, last), c)
	if filled.Cmp(m.limit) > 0 { // only a fill-up that did not fit
		filled = m.limit
	}
	d.Used = m.levelAt(last, filled, op.Now)
	d.ResetAfter = m.emptyAfter(last, filled, op.Now)
	if last == op.Now {
		d.Margin = min(d.Margin, m.zeroMargin(filled))
	}
	if op.Verb != engine.VerbCheck {
		m.last, m.level = last, filled
	}
	return d
}

// cancel gives a reservation's cost back if the point is still at its
// instant and the instant is still to come.
func (m *meter) cancel(op engine.Op) Decision {
	d := Decision{Margin: math.Inf(1), Drain: m.drain}
	if op.Now < op.At && m.last == op.At {
		d.Allowed = true
		left := sub(m.level, rat(op.Cost))
		if left.Sign() < 0 {
			left = new(big.Rat)
		}
		m.last, m.level = op.At+1, left
	}
	d.Used = m.levelAt(m.last, m.level, op.Now)
	d.ResetAfter = m.emptyAfter(m.last, m.level, op.Now)
	if m.last <= op.Now {
		d.Margin = m.zeroMargin(d.Used)
	}
	return d
}
