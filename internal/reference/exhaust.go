package reference

import (
	"fmt"
	"math"
	"math/big"

	"github.com/sluice-go/sluice/engine"
)

// An exhauster is a model whose key can be exhausted (VerbExhaust): the
// GCRA and the buckets, whose state describes the key's allowance at
// every instant, a future one included. fullAt makes the key's whole
// limit in use at t, keeping whatever the key holds beyond that: from
// then on the key holds, at every instant, the more of what it held and
// of what a key that took its whole limit at t would hold (the later, or
// fuller, of the two states). It never frees anything. It returns the
// margin of the new state (+Inf when no threshold is near).
type exhauster interface {
	fullAt(t int64) float64
}

// exhaust is VerbExhaust, as package engine defines it: the key's whole
// limit is in use at t = now + MaxDelay (see [exhauster]), a state kept
// under another limit carried over first, at now, as by every decision
// but a check (see [key.Apply]); and the decision is that of a check of
// the cost at now on the key so left. It always records (see [Records]).
// Under a penalty, [Strict] describes the key as a check does, a block in
// force included, and leaves the block as it is.
//
// The key holds its whole limit at now already, or more (what a full key
// frees after t, it held before t): the check admits no cost above zero,
// but for a GCRA cost that rounds to no nanoseconds with no MaxDelay. Its
// ResetAfter reaches t at least.
func (k *key) exhaust(op engine.Op) Decision {
	e, ok := k.Model.(exhauster)
	if !ok {
		panic(fmt.Sprintf("reference: a model of %v cannot be exhausted", k.p.Kind)) // p must be valid for op
	}
	margin := e.fullAt(op.Now + op.MaxDelay)
	d := k.Model.Apply(engine.Op{Verb: engine.VerbCheck, Cost: op.Cost, Now: op.Now})
	d.Margin = min(d.Margin, margin)
	return d
}

// fullAt makes the whole burst in use at t: the TAT of a key that took it
// then, t + bT, unless the key's own is later. The key carried a TAT of
// another interval over before (see [key.Apply]): one still ahead of now
// is in units of T, and one that is not lies before t + bT.
func (g *gcra) fullAt(t int64) float64 {
	if full := t + g.burst; g.fresh || g.tat < full {
		g.tat = full
	}
	g.a, g.fresh = float64(g.t), false
	return g.margin // where bT rounds
}

// fullAt makes the whole limit in use at t: the key's level becomes, at
// every instant, the higher of its own and that of the point (t, Limit).
// Both are lines of slope -r that stop at zero after their point, so the
// higher one is the line of the later point, raised there to the other's
// level if that is higher. No threshold is near: a level a hair either
// side of the other leaves the same line.
func (m *meter) fullAt(t int64) float64 {
	if m.last <= t {
		m.level, m.last = maxRat(m.levelAt(m.last, m.level, t), m.limit), t
	} else {
		// A booking's point after t: the line through (t, Limit) there.
		m.level = maxRat(m.level, m.levelAt(t, m.limit, m.last))
	}
	return math.Inf(1)
}

// fullAt makes the whole burst in use at t, on the key's own refill
// instants: the point seen at t (its last refill at or before t, or t
// itself for a bucket full again by then, whose refill clock starts over
// as a fresh key's does) holds the burst at least. A point after t (a
// booking's) holds at least the burst less the refills that come after t
// and up to it: a bucket whose burst is in use at t holds that much then.
// Either way the key holds, at every instant, the more of its own tokens
// in use and of a bucket that used its burst at t with the same refills.
// The margin is that of the point seen at t: a float count within
// rounding above zero may find the bucket full again at t, and restart
// its refill clock there.
func (r *refill) fullAt(t int64) float64 {
	used, last, margin := r.point(r.used, r.last, t)
	if last <= t {
		r.used, r.last = maxRat(used, r.burst), last
	} else {
		refills := (last - t + r.interval - 1) / r.interval
		r.used = maxRat(used, sub(r.burst, mul(ratInt(refills), r.amount)))
	}
	return margin
}

// maxRat returns the larger of a and b.
func maxRat(a, b *big.Rat) *big.Rat {
	if a.Cmp(b) >= 0 {
		return a
	}
	return b
}
