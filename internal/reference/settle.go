package reference

import (
	"fmt"
	"math"
	"math/big"

	"github.com/sluice-go/sluice/engine"
)

// A settler is a model whose key settles costs (VerbCharge, VerbRefund):
// the GCRA and the buckets, whose state is the key's latest point (now,
// or the later instant a reservation booked ahead: the GCRA's TAT, a
// bucket's point), which a settlement keeps.
//
// charge records cost at that point whatever the key holds, beyond its
// limit if need be, up to the ceiling of what the key's rate frees in
// 2^60 ns (see [maxSpan]); refund gives cost back, at most what the key
// holds at that point, so that it is never left fresher than empty there.
// settle does the one or the other, as charge says, and returns the cost
// moved (recorded, or given back), exactly, what the key held at its
// point before, and the margin of the new state (+Inf when no threshold
// is near).
type settler interface {
	settle(charge bool, now int64, cost *big.Rat) (moved, held *big.Rat, margin float64)
}

// settle is VerbCharge and VerbRefund, as package engine defines them: the
// cost charged to the key's latest point or refunded there (see
// [settler]), a state kept under another limit carried over first, at
// now, as by every decision but a check (see [key.Apply]); and the
// decision is that of a check of a zero cost at now on the key so left,
// with Granted the cost moved. It always records (see [Records]). Under a
// penalty, [Strict] describes the key as a check does, a block in force
// included, and leaves the block as it is.
//
// Granted is the exact cost moved, rounded to the nearest float64; Held is
// the most the key held at its point, before or after (which [key.Apply]
// raises to the most it has held, see [peaker]), which bounds the float
// rounding of the production's Granted (see [Compare]).
func (k *key) settle(op engine.Op) Decision {
	s, ok := k.Model.(settler)
	if !ok {
		panic(fmt.Sprintf("reference: a model of %v settles no costs", k.p.Kind)) // p must be valid for op
	}
	charge := op.Verb == engine.VerbCharge
	moved, held, margin := s.settle(charge, op.Now, rat(op.Cost))
	d := k.Model.Apply(engine.Op{Verb: engine.VerbCheck, Now: op.Now})
	d.Granted, _ = moved.Float64()
	if charge {
		held = add(held, moved)
	}
	d.Held, _ = held.Float64()
	d.Margin = min(d.Margin, margin)
	return d
}

// settle moves the TAT by the cost's nanoseconds, cT = round(c*T) half away
// from zero, on the key's latest point, base = max(TAT, now) (now for a
// fresh key), which holds (base - now)/T:
//
//   - a charge makes TAT = base + cT, unless c*T reaches the room left
//     below the ceiling, now + 2^60 - base: then TAT = now + 2^60, and the
//     cost recorded is the room, room/T. A key at the ceiling or beyond
//     it (a booking may lie up to 2^60 + bT ahead) records nothing.
//   - a refund makes TAT = base - cT, unless c*T reaches what the key
//     holds, base - now: then TAT = now, and the cost given back is what
//     it held, (base - now)/T. A key that holds nothing gives nothing
//     back.
//
// Where c*T lies within rounding of a half nanosecond, cT may round
// either way; where it lies within float rounding of the room or of what
// the key holds (a float64 holds neither exactly above 2^53 ns), the
// float comparison may land either side of it, to a TAT a few
// nanoseconds apart: the margin says so. The key carried a TAT of another
// interval over before (see [key.Apply]).
func (g *gcra) settle(charge bool, now int64, cost *big.Rat) (moved, held *big.Rat, margin float64) {
	base := now
	if !g.fresh {
		base = max(g.tat, now)
	}
	held = quo(ratInt(base-now), g.interval)
	span := base - now // how far the TAT may move: what the key holds, for a refund
	if charge {
		span = now + maxSpan - base // the room below the ceiling
	}
	if span <= 0 {
		// Nothing to move: the TAT stays where it is (a fresh key stays
		// fresh, and a TAT at or before now holds nothing).
		if !g.fresh {
			g.a = float64(g.t)
		}
		return new(big.Rat), held, math.Inf(1)
	}
	x := mul(cost, g.interval) // c*T, exactly
	margin = spanMargin(x, span)
	step := span
	if x.Cmp(ratInt(span)) >= 0 {
		moved = quo(ratInt(span), g.interval)
	} else {
		// c*T < span, so cT <= span: it fits an int64.
		moved, step = cost, floorInt(add(x, big.NewRat(1, 2))).Int64()
		margin = min(margin, roundingMargin(x))
	}
	if charge {
		g.tat = base + step
	} else {
		g.tat = base - step
	}
	g.a, g.fresh = float64(g.t), false
	return moved, held, margin
}

// spanMargin is the margin of the comparison of c*T, x exactly, with span
// ns, which the production code makes in float arithmetic: the product
// and span each within 2^-53 of their value, so the comparison is exact
// unless x lies within 2^-51 of span (twice the worst case), and then the
// margin is x's distance to span relative to span, at most 2^-51, well
// within [Band]. A span below 2^53 is a float64, and the float product
// only reaches it from an x within half a nanosecond below it, which cT
// rounds to span too: the TAT comes out the same either way, and Granted
// (cost, or span/T) a float rounding apart, which [Compare] forgives.
func spanMargin(x *big.Rat, span int64) float64 {
	if span <= 1<<53 {
		return math.Inf(1)
	}
	s := ratInt(span)
	diff := sub(x, s)
	if new(big.Rat).Abs(diff).Cmp(mul(s, big.NewRat(1, 1<<51))) > 0 {
		return math.Inf(1)
	}
	return relative(diff, float64(span))
}

// settle moves the level at the key's latest point, last' = max(last,
// now), by the cost: up for a charge, to the ceiling 2^60 * r at most, the
// level that leaks in 2^60 ns; down for a refund, to zero at the least.
// The point becomes (last', level'), on the line of the key's level from
// then on. The level moved is continuous in the level read, so no
// threshold is near beyond the check's (see [key.settle]).
func (m *meter) settle(charge bool, now int64, cost *big.Rat) (moved, held *big.Rat, margin float64) {
	at := max(m.last, now)
	held = m.levelAt(m.last, m.level, at)
	if charge {
		room := sub(mul(ratInt(maxSpan), m.perNanos), held)
		if room.Sign() < 0 {
			room = new(big.Rat)
		}
		moved = minRat(cost, room)
		m.level = add(held, moved)
	} else {
		moved = minRat(cost, held)
		m.level = sub(held, moved)
	}
	m.last = at
	return moved, held, math.Inf(1)
}

// settle moves the tokens in use at the key's point as seen at now (see
// [refill.point]: its last refill at or before now, or now itself for a
// bucket full again, whose refill clock starts over; or a booking's point
// after now) by the cost: up for a charge, to the refills of 2^60 ns at
// most, floor(2^60 / Interval) * Amount tokens; down for a refund, to none
// at the least. The point keeps its instant, empty or not. The margin is
// that of the point seen at now.
func (r *refill) settle(charge bool, now int64, cost *big.Rat) (moved, held *big.Rat, margin float64) {
	used, last, margin := r.point(r.used, r.last, now)
	held = used
	if charge {
		ceiling := mul(ratInt(maxSpan/r.interval), r.amount)
		room := sub(ceiling, used)
		if room.Sign() < 0 {
			room = new(big.Rat)
		}
		moved = minRat(cost, room)
		used = add(used, moved)
	} else {
		moved = minRat(cost, used)
		used = sub(used, moved)
	}
	r.used, r.last = used, last
	return moved, held, margin
}

// minRat returns the smaller of a and b.
func minRat(a, b *big.Rat) *big.Rat {
	if a.Cmp(b) <= 0 {
		return a
	}
	return b
}

// A peaker is a model whose production counterpart keeps its state in
// float arithmetic that a debt (a charge beyond the limit, see [settler])
// rounds relative to more than the limit: the buckets, whose level or
// tokens in use may reach what the rate frees in 2^60 ns, a billion times
// the limit or more. A float amount rounded at that scale keeps its
// absolute error as the key repays its debt (the production state's
// amount is the float one, leaked or refilled from there), so the
// production's amounts lie within a few units in the last place of the
// most the state has held since the key was fresh (the zero State, exact
// on both sides) or loaded from the production state: its peak.
//
// A meter also computes its durations from its point, forgiving 2^-48 of
// the time from it (see arith.CeilNanos), which a debt makes up to 2^60
// ns: its peak is the most its level has been, rounded or not (loaded, the
// level loaded). The interval refill counts whole refills, with no such
// forgiveness, and its float tokens in use are exact as long as the exact
// ones are float64 values (each takes a correctly rounded operation or
// two on float64 amounts, whole refills of Amount and costs): its peak is
// the most its tokens in use have been where the exact amount is not a
// float64, and the float one then rounded (zero once loaded). The GCRA
// keeps integer nanoseconds: it has no such rounding.
//
// note takes the amount the key holds at its point into that peak, and
// returns the peak, which [key.Apply] reports as [Decision.Held].
type peaker interface {
	note() float64
}

func (m *meter) note() float64 {
	a, _ := m.level.Float64()
	m.peak = max(m.peak, a)
	return m.peak
}

func (r *refill) note() float64 {
	if a, exact := r.used.Float64(); !exact {
		r.peak = max(r.peak, a)
	}
	return r.peak
}

// note takes the amount the key's model holds into its peak, if it keeps
// one (see [peaker]), and returns the peak (zero for none).
func (k *key) note() float64 {
	if p, ok := k.Model.(peaker); ok {
		return p.note()
	}
	return 0
}
