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
// Every duration is at most 2^60 ns ([maxSpan]), as the production's are
// (see arith.CeilNanos): a level that takes longer than that to leak is
// forgiven whole 2^60 ns after its point,
//
//	level(t) = 0                        for t >= last + 2^60
//
// and a wait counts at most 2^60 ns from the point, a reset at most 2^60
// ns from the later of the point and now (see [meter.emptyAfter]). Only a
// key read under a slower rate than it was charged at (see [Change])
// holds so much: a charge leaves at most what the key's rate leaks in
// 2^60 ns (see [meter.settle]). Whatever it holds beyond what the slower
// rate leaks in 2^60 ns is forgiven 2^60 ns after its point (by when a
// store has forgotten the key: its expiry, now plus a reset so capped,
// comes no later).
//
// A cost c conforms at t iff c <= Limit and level(t)+c <= Limit, that is
// from the instant last + (A+c-Limit)/r on, that span capped at 2^60 ns
// either way (a key in debt conforms 2^60 ns after its point at the
// latest, its level forgiven then); fitAt is the first whole nanosecond of
// that. Allow and Check admit c iff now >= fitAt. Reserve
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
// [meter.fullAt]), and decides as a check. A charge raises the level at
// max(last, now) by its cost, beyond the limit if need be, to 2^60 * r at
// most, and a refund lowers it there, to zero at the least; both decide
// as a check of nothing (see [meter.settle] and [key.settle]).
type meter struct {
	limit    *big.Rat
	limitF   float64
	perNanos *big.Rat // r = Amount/Interval: what leaks per nanosecond
	drain    float64  // Interval/Amount: nanoseconds per unit
	level    *big.Rat // A, the level at last
	last     int64
	peak     float64 // the most A has been since the key was fresh or loaded (see [peaker])
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

func (m *meter) Reset() { m.level, m.last, m.peak = new(big.Rat), 0, 0 }

func (m *meter) Load(s engine.State) { m.level, m.last, m.peak = rat(s.A), s.Time, s.A }

// levelAt returns the level at t of the point (last, a): zero from 2^60
// ns after the point on, whatever it holds (see [meter]).
func (m *meter) levelAt(last int64, a *big.Rat, t int64) *big.Rat {
	if t-last >= maxSpan {
		return new(big.Rat)
	}
	x := sub(a, mul(ratInt(t-last), m.perNanos))
	if t >= last && x.Sign() < 0 {
		return new(big.Rat)
	}
	return x
}

// emptyAfter returns how long from now until the point (last, a) has
// leaked to zero: the first whole nanosecond at or after last + a/r, with
// the time the level takes to leak capped at 2^60 ns, counted from the
// point if it lies after now and from now otherwise (the level then that
// at now), as the production counts it.
func (m *meter) emptyAfter(last int64, a *big.Rat, now int64) int64 {
	if last > now {
		return last + min(ceilNanos(quo(a, m.perNanos)), maxSpan) - now
	}
	return min(ceilNanos(quo(m.levelAt(last, a, now), m.perNanos)), maxSpan)
}

// fitSpan returns how long after the point an excess x over the limit has
// leaked, x/r, capped at 2^60 ns either way (see [meter]), and whether it
// is capped beyond the float rounding of the production's span (2^-48 of
// it, forgiven; see arith.CeilNanos): the instant is then exactly 2^60 ns
// after the point on both sides, and a decision's comparison with it is
// exact.
func (m *meter) fitSpan(x *big.Rat) (span *big.Rat, capped bool) {
	span = quo(x, m.perNanos)
	switch {
	case span.Cmp(ratInt(maxSpan)) > 0:
		capped = span.Cmp(ratInt(maxSpan+1<<15)) >= 0
		return ratInt(maxSpan), capped
	case span.Cmp(ratInt(-maxSpan)) < 0:
		return ratInt(-maxSpan), false
	}
	return span, false
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
	span, capped := m.fitSpan(sub(add(m.level, c), m.limit))
	fitReal := add(ratInt(m.last), span)
	fitAt := ceilNanos(fitReal)
	// How far t is from the threshold, as an amount: none for an instant
	// capped exactly, which both sides compare as whole nanoseconds.
	margin := func(t int64) float64 {
		if capped {
			return math.Inf(1)
		}
		return relative(mul(sub(ratInt(t), fitReal), m.perNanos), m.limitF)
	}
	// A fill-up may cost more than the limit: that never conforms.
	conforms := op.Cost <= m.limitF
	if conforms {
		d.Margin = margin(op.Now)
	}
	later := op.Verb == engine.VerbReserve && op.At > max(fitAt, op.Now)
	if later {
		// Booked no earlier than op.At: whether fitAt comes before it is
		// a threshold too.
		d.Margin = min(d.Margin, margin(op.At))
		fitAt = op.At
	}
	at := op.Now // when the cost is recorded
	switch {
	case conforms && op.Now >= fitAt:
		d.Allowed = true
	case op.Verb == engine.VerbReserve:
		if !later {
			// Whether fitAt comes within MaxDelay is a threshold too.
			d.Margin = min(d.Margin, margin(op.Now+op.MaxDelay))
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
