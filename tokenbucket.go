package sluice

import "math"

// TokenBucket is a token bucket: each key's bucket holds up to burst
// tokens, refills at a rate, and a request of cost c is admitted iff the
// bucket holds at least c tokens, which it then takes. A new bucket starts
// full.
//
// By default tokens refill continuously. With [WithIntervalRefill] they
// arrive only once per whole elapsed interval of the rate (rate.Amount at a
// time), and the time of the last refill advances by whole intervals, so
// partial progress towards the next refill is never lost.
//
// State per key: the tokens in use (burst minus the tokens held, so that
// zero is a full bucket) and the time of the last refill. A full bucket is
// forgotten.
//
// Guarantee: the cost admitted in any interval of length d is at most
// burst + rate*d (continuous refill), or burst + rate.Amount*ceil(d/period)
// with interval refill.
//
// A TokenBucket is safe for concurrent use.
type TokenBucket struct {
	limiter
}

// NewTokenBucket returns a token bucket refilling at rate. Its burst, the
// bucket's size, is rate.Amount unless [WithBurst] sets it:
// NewTokenBucket(sluice.PerSecond(10), sluice.WithBurst(20)).
func NewTokenBucket(rate Rate, opts ...Option) (*TokenBucket, error) {
	if err := rate.validate(); err != nil {
		return nil, err
	}
	p := Params{Kind: KindTokenBucket, Limit: rate.Amount, Interval: int64(rate.Period), Amount: rate.Amount}
	l, err := newLimiter(p, opts)
	if err != nil {
		return nil, err
	}
	return &TokenBucket{l}, nil
}

// stepIntervalRefill is the token bucket whose tokens arrive rate.Amount
// at a time, once per whole Interval since the last refill.
func (p *Params) stepIntervalRefill(s *State, op Op, d *Decision) {
	used, last := s.A, s.Time
	if used > 0 && op.Now > last {
		k := (op.Now - last) / p.Interval
		used = max(used-float64(k)*p.Amount, 0)
		last += k * p.Interval
	}
	if used <= p.slack() {
		// A full bucket gains nothing by waiting, so its refill clock
		// starts again at the next request, as a fresh key's does.
		used, last = 0, max(op.Now, s.Time)
	}
	if x := used + op.Cost - p.Limit; x <= p.slack() {
		d.Allowed = true
		used = p.fill(used, op.Cost)
		if op.Verb == VerbAllow && used > 0 {
			*s = State{Time: last, A: used}
		}
	} else {
		d.RetryAfter = after(last+p.refills(x)*p.Interval, op.Now)
	}
	p.describe(d, used)
	d.ResetAfter = after(last+p.refills(used)*p.Interval, op.Now)
}

// refills returns how many refills it takes to free x tokens.
func (p *Params) refills(x float64) int64 {
	if x <= p.slack() {
		return 0
	}
	return int64(math.Ceil((x - p.slack()) / p.Amount))
}
