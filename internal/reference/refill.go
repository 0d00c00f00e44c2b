package reference

import (
	"math"
	"math/big"

	"github.com/sluice-go/sluice"
)

// refill is the token bucket with interval refill, counting the tokens in
// use: Amount of them come back per whole Interval since the last refill,
// whose time advances by whole intervals. A bucket that is full again is a
// fresh key: its refill clock restarts at its next request.
type refill struct {
	burst    *big.Rat
	burstF   float64
	amount   *big.Rat
	interval int64
	used     *big.Rat // zero for a fresh key
	last     int64    // the last refill; meaningful only while used > 0
}

func newRefill(p sluice.Params) *refill {
	r := &refill{burst: rat(p.Limit), burstF: p.Limit, amount: rat(p.Amount), interval: p.Interval}
	r.Reset()
	return r
}

func (r *refill) Reset() { r.used, r.last = new(big.Rat), 0 }

func (r *refill) Load(s sluice.State) { r.used, r.last = rat(s.A), s.Time }

// refills returns how many refills it takes to bring an excess of tokens
// in use down to zero, and the margin of that count: how close the excess
// is to a whole number of refills, relative to the burst.
func (r *refill) refills(excess *big.Rat) (int64, float64) {
	if excess.Sign() <= 0 {
		return 0, relative(excess, r.burstF)
	}
	n := ceilNanos(quo(excess, r.amount))
	// The excess lies in ((n-1)*Amount, n*Amount].
	above := relative(sub(mul(ratInt(n), r.amount), excess), r.burstF)
	below := relative(sub(excess, mul(ratInt(n-1), r.amount)), r.burstF)
	return n, min(above, below)
}

func (r *refill) Apply(op sluice.Op) Decision {
	c := rat(op.Cost)
	used, last := r.used, r.last
	margin := math.Inf(1)
	if used.Sign() > 0 && op.Now > last {
		n := (op.Now - last) / r.interval
		used = sub(used, mul(ratInt(n), r.amount))
		last += n * r.interval
		// Whether the refills due leave the bucket full is a threshold.
		margin = relative(used, r.burstF)
	}
	if used.Sign() <= 0 {
		used, last = new(big.Rat), op.Now
	}
	sum := add(used, c)
	excess := sub(sum, r.burst)
	d := Decision{Allowed: excess.Sign() <= 0, Used: used}
	d.Margin = min(margin, relative(excess, r.burstF))
	if d.Allowed {
		d.Used = sum
	} else {
		n, m := r.refills(excess)
		d.Margin = min(d.Margin, m)
		d.RetryAfter = last + n*r.interval - op.Now
	}
	if d.Used.Sign() > 0 {
		n, m := r.refills(d.Used)
		d.Margin = min(d.Margin, m)
		d.ResetAfter = max(last+n*r.interval-op.Now, 0)
	}
	if op.Verb == sluice.VerbAllow && d.Allowed {
		r.used, r.last = d.Used, last
	}
	return d
}
