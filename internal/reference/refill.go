package reference

import (
	"math"
	"math/big"

	"github.com/sluice-go/sluice/engine"
)

// refill is the token bucket with interval refill, counting the tokens in
// use. Its state is a point (last, used): used tokens in use at last, a
// refill instant, just after its refill. Amount tokens come back at every
// Interval after it, and before it the refills between a time and the
// point had not come yet:
//
//	used(t) = max(0, used - floor((t-last)/Interval)*Amount)   for t >= last
//	used(t) = used + ceil((last-t)/Interval)*Amount            for t < last
//
// As seen at now >= last the point advances to the last refill at or
// before now, and a bucket that is full there is a fresh key: its refill
// clock restarts at now. The zero state is a fresh key.
//
// A wait or a reset counts at most the refills of 2^60 ns ([maxSpan]) and
// one more, floor(2^60/Interval) + 1, as the production's counts do: the
// n below is that at most. Only a key read under a slower rate than it was
// charged at (see [Change]) holds more than those refills free: a charge
// leaves at most floor(2^60/Interval) * Amount in use (see
// [refill.settle]). Such a key is told to come back, and books, at that
// last counted refill, and nothing is forgiven: its point still holds
// what those refills did not free, and is read from there (a reservation
// booked then records the burst in use at most, see below). A store has
// forgotten such a key by then: its expiry, now plus a reset so capped,
// comes no later.
//
// c conforms from the first refill instant fitAt = last + n*Interval of the
// point seen at now at which used - n*Amount + c <= burst. Allow and Check
// admit c iff now >= fitAt; Reserve books fitAt (or Op.At, the earliest
// instant to book, if that is later than both fitAt and now) if it is at
// most MaxDelay after now, and otherwise says to come back MaxDelay before
// it. A booking that waits has for At the point it leaves: its instant,
// or for one booked at Op.At between refills the last refill before it. A cost
// recorded at an instant at or after the point advances the point there
// and adds c; recorded before it, it adds c at the point; either way the
// tokens in use are then the burst at most (which only a booking at the
// last counted refill of a key in debt reaches: the production's sum
// clamps at the limit, forgiving the rest of the debt). A reservation's
// cost is given back (Cancel) iff now < At and the point is still at At, a
// nanosecond late: the point moves to a nanosecond after the refill before
// At, with max(used-c, 0) + Amount in use (At's refill still to come), so
// that the refills, and the instant it frees, come a nanosecond after the
// reservation's own, and a booking of that instant leaves another point,
// which the same cancel, made again, cannot mistake for its own. An
// exhaust puts the burst in use at now + MaxDelay on the key's refill
// instants, keeping what is in use beyond it (see [refill.fullAt]), and
// decides as a check. A charge adds its cost to the tokens in use at the
// point seen at now, beyond the burst if need be, to floor(2^60 /
// Interval) * Amount at most, and a refund takes it away there, to none
// at the least; both decide as a check of nothing (see [refill.settle]
// and [key.settle]).
type refill struct {
	burst    *big.Rat
	burstF   float64
	amount   *big.Rat
	interval int64
	used     *big.Rat // zero for a fresh key
	last     int64
	peak     float64 // the most used has been, where the float code rounded it, since the key was fresh or loaded (see [peaker])
}

func newRefill(p engine.Params) *refill {
	r := &refill{burst: rat(p.Limit), burstF: p.Limit, amount: rat(p.Amount), interval: p.Interval}
	r.Reset()
	return r
}

func (r *refill) Reset() { r.used, r.last, r.peak = new(big.Rat), 0, 0 }

func (r *refill) Load(s engine.State) { r.used, r.last, r.peak = rat(s.A), s.Time, 0 }

// point returns the point (used, last) as seen at t, and the margin of
// whether the refills due leave the bucket full: a float count within
// rounding above zero may read as full where the exact one does not; and
// one that a debt left rounded relative to more than the burst (see
// [peaker]) may lie above zero where the exact one is zero.
func (r *refill) point(used *big.Rat, last, t int64) (*big.Rat, int64, float64) {
	margin := math.Inf(1)
	if t < last {
		return used, last, margin
	}
	if used.Sign() > 0 {
		n := (t - last) / r.interval
		used = sub(used, mul(ratInt(n), r.amount))
		last += n * r.interval
		if used.Sign() > 0 || r.peak > r.burstF {
			margin = relative(used, r.burstF)
		}
	}
	if used.Sign() <= 0 {
		return new(big.Rat), t, margin
	}
	return used, last, margin
}

// usedAt returns the tokens in use at t of the point (used, last), which
// lies at or after the last refill before t.
func (r *refill) usedAt(used *big.Rat, last, t int64) *big.Rat {
	if last <= t {
		return used
	}
	return add(used, mul(ratInt((last-t+r.interval-1)/r.interval), r.amount))
}

// refillsTo returns ceil(x/Amount), the refills after a point it takes
// for an excess of x tokens to be gone (zero or fewer when there is room
// already), and its margin. The float code subtracts its slack before
// rounding up, so an excess exactly on a multiple of Amount is safe and
// only one just above it (by less than the slack) may count a refill
// fewer. A bucket that has held more than its burst (a debt, see
// [peaker]) carries float rounding beyond the slack, which may take an
// excess on a multiple of Amount, or just below it, above it: a refill
// more. The count is capped at floor(2^60/Interval) + 1 (see [refill]):
// a count the float rounding may move only between counts at or beyond
// the cap has no margin.
func (r *refill) refillsTo(x *big.Rat) (int64, float64) {
	q := quo(x, r.amount)
	n := floorInt(q)
	if !q.IsInt() {
		n.Add(n, big.NewInt(1))
	}
	most := maxSpan/r.interval + 1
	if n.Sign() > 0 && (!n.IsInt64() || n.Int64()-1 >= most) {
		return most, math.Inf(1) // n-1, n and n+1 all count as the cap
	}
	above := sub(x, mul(new(big.Rat).SetInt(n), r.amount))
	above.Add(above, r.amount) // x - (n-1)*Amount, in (0, Amount]
	margin := relative(above, r.burstF)
	if r.peak > r.burstF && n.Int64() < most {
		margin = min(margin, relative(sub(r.amount, above), r.burstF))
	}
	return min(n.Int64(), most), margin
}

// resetAfter returns how long from now until the point (used, last) is
// full again, and its margin.
func (r *refill) resetAfter(used *big.Rat, last, now int64) (int64, float64) {
	if used.Sign() <= 0 {
		return max(last-now, 0), math.Inf(1)
	}
	n, m := r.refillsTo(used)
	return max(last+n*r.interval-now, 0), m
}

func (r *refill) Apply(op engine.Op) Decision {
	d := Decision{Margin: math.Inf(1)}
	if op.Verb == engine.VerbCancel {
		if op.Now < op.At && r.last == op.At {
			d.Allowed = true
			left := sub(r.used, rat(op.Cost))
			if left.Sign() < 0 {
				left = new(big.Rat)
			}
			r.used, r.last = add(left, r.amount), op.At-r.interval+1
		}
		used, last, m := r.point(r.used, r.last, op.Now)
		d.Used = r.usedAt(used, last, op.Now)
		var mr float64
		d.ResetAfter, mr = r.resetAfter(used, last, op.Now)
		d.Margin = min(m, mr)
		return d
	}
	c := rat(op.Cost)
	used, last, margin := r.point(r.used, r.last, op.Now)
	n, m := r.refillsTo(sub(add(used, c), r.burst))
	d.Margin = min(margin, m)
	fitAt := last + n*r.interval
	later := op.Verb == engine.VerbReserve && op.At > max(fitAt, op.Now)
	if later {
		fitAt = op.At
	}
	at := op.Now // when the cost is recorded
	switch {
	case op.Now >= fitAt:
		d.Allowed = true
	case op.Verb == engine.VerbReserve && fitAt-op.Now <= op.MaxDelay:
		d.Allowed, d.Delay, d.At = true, fitAt-op.Now, fitAt
		at = fitAt
	case op.Verb == engine.VerbReserve:
		d.RetryAfter = fitAt - op.MaxDelay - op.Now
	default:
		d.RetryAfter = fitAt - op.Now
	}
	if d.Allowed {
		if at >= last {
			used, last, m = r.point(used, last, at)
			d.Margin = min(d.Margin, m)
		}
		if later {
			d.At = 0 // booked from a later instant: cannot be given back
		}
		used = minRat(add(used, c), r.burst)
		if op.Verb != engine.VerbCheck {
			r.used, r.last = used, last
		}
	}
	d.Used = r.usedAt(used, last, op.Now)
	d.ResetAfter, m = r.resetAfter(used, last, op.Now)
	d.Margin = min(d.Margin, m)
	return d
}
