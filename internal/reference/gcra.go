package reference

import (
	"math"
	"math/big"

	"github.com/sluice-go/sluice/engine"
)

// gcra is the generic cell rate algorithm in integer nanoseconds, with
// emission interval T = Interval, cT = round(c*T) and bT = round(burst*T)
// rounded half away from zero. With base = max(TAT, now) (now for a fresh
// key), c conforms from allowAt = base + cT - bT on:
//
//   - Allow and Check admit c iff now >= allowAt, and then TAT = base + cT;
//   - Reserve books allowAt if it is at most MaxDelay after now (Delay
//     allowAt-now, At allowAt when it must wait), and then TAT = base + cT
//     too: the next booking comes cT after it. Otherwise it says to come
//     back MaxDelay before allowAt. Given Op.At, the earliest instant to
//     book, later than both allowAt and now, it books Op.At instead, as an
//     arrival then: TAT = max(TAT, Op.At) + cT, and At is the mark a
//     cancel finds, TAT - bT, at or before Op.At.
//   - Cancel gives a reservation's cost back iff now < At and the TAT is
//     still the one the reservation left, At + bT, a nanosecond late:
//     TAT -= cT - 1, so that the instant it frees comes a nanosecond after
//     the reservation's own, and a booking of that instant leaves another
//     TAT, which the same cancel, made again, cannot mistake for its own.
type gcra struct {
	interval *big.Rat
	limit    *big.Rat
	burst    int64 // bT
	margin   float64
	tat      int64
	fresh    bool
}

func newGCRA(p engine.Params) *gcra {
	g := &gcra{interval: ratInt(p.Interval), limit: rat(p.Limit)}
	burst, exact := g.nanos(g.limit)
	g.burst, g.margin = burst, roundingMargin(exact)
	g.Reset()
	return g
}

func (g *gcra) Reset() { g.tat, g.fresh = 0, true }

func (g *gcra) Load(s engine.State) { g.tat, g.fresh = s.Time, isFresh(s) }

// nanos returns round(amount*T), half away from zero (amounts are never
// negative), and the exact product.
func (g *gcra) nanos(amount *big.Rat) (int64, *big.Rat) {
	x := mul(amount, g.interval)
	return floorInt(add(x, big.NewRat(1, 2))).Int64(), x
}

// roundingMargin is how far x is from the nearest half-integer, relative to
// x: a float product that close to the exact one may round either way. A
// product that a float64 holds exactly is computed exactly in float, so
// its margin is infinite.
func roundingMargin(x *big.Rat) float64 {
	if _, exact := x.Float64(); exact || x.Sign() == 0 {
		return math.Inf(1)
	}
	frac := sub(x, new(big.Rat).SetInt(floorInt(x)))
	f, _ := x.Float64()
	return relative(sub(frac, big.NewRat(1, 2)), f)
}

func (g *gcra) Apply(op engine.Op) Decision {
	ct, exact := g.nanos(rat(op.Cost))
	d := Decision{Margin: min(g.margin, roundingMargin(exact))}
	base := op.Now
	if !g.fresh {
		base = max(g.tat, op.Now)
	}
	if op.Verb == engine.VerbCancel {
		if !g.fresh && op.Now < op.At && g.tat == op.At+g.burst {
			d.Allowed = true
			g.tat -= ct - 1
			base = max(g.tat, op.Now)
		}
		return g.describe(d, base, op.Now)
	}
	allowAt, next := base+ct-g.burst, base+ct
	later := op.Verb == engine.VerbReserve && op.At > max(allowAt, op.Now)
	if later {
		allowAt, next = op.At, op.At+ct
		if !g.fresh {
			next = max(g.tat, op.At) + ct
		}
	}
	tat := base
	switch {
	case op.Now >= allowAt:
		d.Allowed = true
		tat = next
	case op.Verb != engine.VerbReserve:
		d.RetryAfter = allowAt - op.Now
	case allowAt-op.Now <= op.MaxDelay:
		d.Allowed, d.Delay, d.At = true, allowAt-op.Now, allowAt
		if later {
			d.At = 0 // booked later than needed: cannot be given back
		}
		tat = next
	default:
		d.RetryAfter = allowAt - op.MaxDelay - op.Now
	}
	if d.Allowed && op.Verb != engine.VerbCheck {
		g.tat, g.fresh = tat, false
	}
	return g.describe(d, tat, op.Now)
}

// describe fills in the amounts of d from the TAT as it stands at now.
func (g *gcra) describe(d Decision, tat, now int64) Decision {
	d.ResetAfter = max(tat-now, 0)
	d.Used = quo(ratInt(d.ResetAfter), g.interval)
	return d
}
