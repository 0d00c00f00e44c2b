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
//   - Exhaust makes TAT = max(TAT, now + MaxDelay + bT), the burst in use
//     at now + MaxDelay, and decides as a check (see [key.exhaust]).
//   - Charge moves the TAT from base by cT later, to now + 2^60 at most,
//     and Refund by cT earlier, to now at the earliest; both decide as a
//     check of nothing (see [gcra.settle] and [key.settle]).
//
// The TAT is a time, not a cost: the key records beside it the emission
// interval it was computed with, A (as State.A holds it, a float64; zero
// for a state written before intervals were recorded, which is read as
// computed with T). The TAT of a key whose limit changed to another
// interval (see [Change]) holds (TAT - now)/A units at now; the first
// decision under T at a now before the TAT converts them to T:
//
//	TAT' = now + round((TAT - now) * T / A),   at most now + 2^60
//
// rounded half away from zero, and decides from TAT'. Every decision but a
// check records TAT' (and A = T), whatever it decides; a check decides from
// TAT' and records nothing, so that the next decision converts the TAT
// again, at its own now. A TAT at or before now holds nothing and is not
// converted.
type gcra struct {
	t        int64 // T
	interval *big.Rat
	limit    *big.Rat
	burst    int64 // bT
	margin   float64
	tat      int64
	a        float64 // the interval the TAT was computed with; zero for T
	fresh    bool
}

func newGCRA(p engine.Params) *gcra {
	g := &gcra{t: p.Interval, interval: ratInt(p.Interval), limit: rat(p.Limit)}
	burst, exact := g.nanos(g.limit)
	g.burst, g.margin = burst, roundingMargin(exact)
	g.Reset()
	return g
}

func (g *gcra) Reset() { g.tat, g.a, g.fresh = 0, 0, true }

func (g *gcra) Load(s engine.State) { g.tat, g.a, g.fresh = s.Time, s.A, isFresh(s) }

// change returns the model of p holding g's TAT, still computed with the
// interval it was: the first decision under p converts it.
func (g *gcra) change(p engine.Params) Model {
	h := newGCRA(p)
	h.tat, h.a, h.fresh = g.tat, g.a, g.fresh
	return h
}

// maxSpan is the furthest ahead of now a converted TAT may lie: 2^60 ns,
// the longest a request may wait or book ahead.
const maxSpan = 1 << 60

// seen returns the TAT as a decision at now under T reads it: converted
// from the interval it was computed with, if that is another and the TAT
// lies after now, with the margin of the conversion (+Inf when none).
func (g *gcra) seen(now int64) (tat int64, converted bool, margin float64) {
	if g.fresh || g.a == 0 || g.a == float64(g.t) || g.tat <= now {
		return g.tat, false, math.Inf(1)
	}
	held := g.tat - now
	x := mul(quo(ratInt(held), rat(g.a)), g.interval) // the backlog at T, in ns
	margin = conversionMargin(held, g.a, g.t, x)
	if x.Cmp(ratInt(maxSpan)) >= 0 {
		return now + maxSpan, true, margin
	}
	return now + floorInt(add(x, big.NewRat(1, 2))).Int64(), true, margin
}

// carry records the conversion of a TAT computed with another interval,
// if a decision at now makes one, and reports whether it did, with its
// margin.
func (g *gcra) carry(now int64) (bool, float64) {
	tat, converted, margin := g.seen(now)
	if converted {
		g.tat, g.a = tat, float64(g.t)
	}
	return converted, margin
}

// conversionMargin is the margin of GCRA's conversion of a backlog of
// held ns computed with interval a to interval t, x = held*t/a ns exactly.
// The production code computes float64(held)/a*float64(t) in float
// arithmetic, caps it at 2^60 and rounds it half away from zero: each of
// those steps is exact or within 2^-53 of its result, so the float backlog
// lies within 2^-50 of x (twice the worst case). Unless x lies that close
// to a threshold (2^60, where the backlog caps, and below it a
// half-integer, where it rounds to the next nanosecond), the float
// conversion comes out as the exact one, and the margin is +Inf;
// otherwise it is x's distance to the threshold relative to x, at most
// 2^-50, well within [Band]. When every step is exact (the inputs, the
// quotient and the product are float64 values), so is the result: +Inf.
func conversionMargin(held int64, a float64, t int64, x *big.Rat) float64 {
	_, exactHeld := ratInt(held).Float64()
	_, exactT := ratInt(t).Float64()
	if qf, exactQ := quo(ratInt(held), rat(a)).Float64(); exactHeld && exactT && exactQ {
		if _, exact := mul(rat(qf), ratInt(t)).Float64(); exact {
			return math.Inf(1)
		}
	}
	f, _ := x.Float64()
	near := mul(x, big.NewRat(1, 1<<50)) // how far the float backlog may lie from x
	toCap := sub(x, ratInt(maxSpan))
	margin := math.Inf(1)
	if new(big.Rat).Abs(toCap).Cmp(near) <= 0 {
		margin = relative(toCap, f)
	}
	if x.Cmp(ratInt(maxSpan)) >= 0 {
		return margin // capped: how it would round does not matter
	}
	toHalf := sub(sub(x, new(big.Rat).SetInt(floorInt(x))), big.NewRat(1, 2))
	if new(big.Rat).Abs(toHalf).Cmp(near) <= 0 {
		margin = min(margin, relative(toHalf, f))
	}
	return margin
}

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
	if op.Verb != engine.VerbCheck {
		_, margin := g.carry(op.Now)
		d.Margin = min(d.Margin, margin)
	}
	// A check decides from the TAT converted, and records nothing.
	read, _, margin := g.seen(op.Now)
	d.Margin = min(d.Margin, margin)
	base := op.Now
	if !g.fresh {
		base = max(read, op.Now)
	}
	if op.Verb == engine.VerbCancel {
		if !g.fresh && op.Now < op.At && g.tat == op.At+g.burst {
			d.Allowed = true
			g.tat, g.a = g.tat-(ct-1), float64(g.t)
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
		g.tat, g.a, g.fresh = tat, float64(g.t), false
	}
	return g.describe(d, tat, op.Now)
}

// describe fills in the amounts of d from the TAT as it stands at now.
func (g *gcra) describe(d Decision, tat, now int64) Decision {
	d.ResetAfter = max(tat-now, 0)
	d.Used = quo(ratInt(d.ResetAfter), g.interval)
	return d
}
