package reference

import (
	"math/big"

	"github.com/sluice-go/sluice"
)

// meter is the leaky bucket, and the continuous token bucket counting the
// tokens in use:
//
//	level(t) = max(0, level0 - (t-last)*Amount/Interval)   for t > last
//	level(t) = level0                                      for t <= last
//
// Allow and Check admit c iff level(now)+c <= Limit; an admitted Allow sets
// level = level(now)+c and last = max(last, now). Fill always sets level =
// min(level(now)+c, Limit), and its RetryAfter is zero.
type meter struct {
	limit    *big.Rat
	limitF   float64
	perNanos *big.Rat // Amount/Interval: what leaks per nanosecond
	drain    float64  // Interval/Amount: nanoseconds per unit
	level    *big.Rat // zero for a fresh key
	last     int64    // meaningful only while level > 0
}

func newMeter(p sluice.Params) *meter {
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

func (m *meter) Load(s sluice.State) { m.level, m.last = rat(s.A), s.Time }

// levelAt returns the level at t.
func (m *meter) levelAt(t int64) *big.Rat {
	if m.level.Sign() == 0 || t <= m.last {
		return m.level
	}
	x := sub(m.level, mul(ratInt(t-m.last), m.perNanos))
	if x.Sign() < 0 {
		return new(big.Rat)
	}
	return x
}

// leakTime returns how long an amount x takes to leak away: the smallest
// whole number of nanoseconds after which it has.
func (m *meter) leakTime(x *big.Rat) int64 {
	if x.Sign() <= 0 {
		return 0
	}
	return ceilNanos(quo(x, m.perNanos))
}

func (m *meter) Apply(op sluice.Op) Decision {
	c := rat(op.Cost)
	x := m.levelAt(op.Now)
	sum := add(x, c)
	excess := sub(sum, m.limit)
	d := Decision{
		Allowed: excess.Sign() <= 0,
		Margin:  relative(excess, m.limitF),
		Drain:   m.drain,
	}
	// The level leaks from the later of now and last: a clock that
	// stepped back sees no leak until it passes last again.
	wait := max(m.last-op.Now, 0)
	if m.level.Sign() == 0 {
		wait = 0
	}
	if !d.Allowed && op.Verb != sluice.VerbFill {
		// A fill-up is recorded whatever it costs, so it has nothing to
		// retry. Another cost fits once the excess has leaked away.
		d.RetryAfter = wait + m.leakTime(excess)
	}
	level := x
	switch {
	case op.Verb == sluice.VerbFill:
		level = sum
		if !d.Allowed {
			level = m.limit
		}
	case d.Allowed:
		level = sum
	}
	d.Used = level
	if level.Sign() > 0 {
		d.ResetAfter = wait + m.leakTime(level)
		// A level within float noise of zero may be forgotten as fresh.
		d.Margin = min(d.Margin, relative(level, m.limitF))
	}
	if op.Verb == sluice.VerbFill || op.Verb == sluice.VerbAllow && d.Allowed {
		m.level, m.last = level, max(m.last, op.Now)
	}
	return d
}
