package reference

import (
	"math"
	"math/big"

	"github.com/sluice-go/sluice"
)

// gcra is the generic cell rate algorithm in integer nanoseconds, with
// emission interval T = Interval, cT = round(c*T) and bT = round(burst*T)
// rounded half away from zero: c is admitted at now iff
//
//	now >= max(TAT, now) + cT - bT
//
// and then TAT = max(TAT, now) + cT.
type gcra struct {
	interval *big.Rat
	limit    *big.Rat
	burst    int64 // bT
	margin   float64
	tat      int64
	fresh    bool
}

func newGCRA(p sluice.Params) *gcra {
	g := &gcra{interval: ratInt(p.Interval), limit: rat(p.Limit)}
	burst, exact := g.nanos(g.limit)
	g.burst, g.margin = burst, roundingMargin(exact)
	g.Reset()
	return g
}

func (g *gcra) Reset() { g.tat, g.fresh = 0, true }

func (g *gcra) Load(s sluice.State) { g.tat, g.fresh = s.Time, isFresh(s) }

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

func (g *gcra) Apply(op sluice.Op) Decision {
	ct, exact := g.nanos(rat(op.Cost))
	base := op.Now
	if !g.fresh {
		base = max(g.tat, op.Now)
	}
	allowAt := base + ct - g.burst
	d := Decision{Allowed: op.Now >= allowAt, Margin: min(g.margin, roundingMargin(exact))}
	tat := g.tat
	if g.fresh {
		tat = op.Now
	}
	if d.Allowed {
		tat = base + ct
	} else {
		d.RetryAfter = allowAt - op.Now
	}
	d.ResetAfter = max(tat-op.Now, 0)
	d.Used = quo(ratInt(d.ResetAfter), g.interval)
	if op.Verb == sluice.VerbAllow && d.Allowed {
		g.tat, g.fresh = tat, d.ResetAfter == 0
	}
	return d
}
