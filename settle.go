package sluice

import (
	"context"
	"fmt"

	"github.com/sluice-go/sluice/engine"
)

// Settle corrects what a request admitted on key with an estimated cost,
// booked (by Allow, Wait, Reserve or AllowAtMost's Granted), recorded,
// once its actual cost is known: the excess of actual over booked is
// charged, and what it did not use is given back. A key is settled with
// one atomic call to the store, which every process sharing it sees.
//
// A charge is recorded whatever the key holds, beyond its limit if need
// be: the key is then in debt, admits nothing until its rate has repaid
// what it holds beyond the limit (the decision's RetryAfter says when),
// and then frees its allowance as after a burst. A key holds at most what
// its rate frees in 2^60 ns (about 36 years): a charge records up to that.
//
// A refund gives back at most what the key still holds at its latest
// point (now, or the instant of a turn booked ahead): time may have freed
// some of the estimate already, and a key is never left with more than
// its whole allowance. It frees the allowance the key recorded last: the
// turns booked furthest ahead move earlier, and their callers still act
// at their instants, so that a freed place goes to the next request.
//
// The decision describes the key afterwards, as CanAccept(ctx, key, 0)
// would: Allowed is false while the key is in debt or blocked by a
// penalty, whose block the settlement leaves as it is. Its Granted is the
// cost charged or given back.
//
// Counting each charge as a cost admitted when it is settled, and each
// refund as taking back the latest costs the key recorded, at their
// instants, the algorithm's guarantee holds unchanged over every interval
// that ends with a request admitted without a wait. Counting the costs
// requests actually had, at their instants, such an interval may see more
// than the guarantee by the excess of its requests not settled yet, and
// by what refunds for requests outside it freed in it: the limiter cannot
// count a cost before it is told. Estimate high and settle promptly, and
// the API behind the limit sees its limit.
//
// The GCRA, the leaky bucket and the token bucket settle; the others
// return an error wrapping [ErrUnsupported]. A booked or actual cost that
// is negative, NaN or infinite returns an error wrapping [ErrInvalidCost].
func (l *Limiter) Settle(ctx context.Context, key string, booked, actual float64) (dec Decision, err error) {
	op := engine.Op{Verb: engine.VerbCharge, Cost: max(actual-booked, 0), Now: l.clock.now()} // never -0
	if actual < booked {
		op.Verb, op.Cost = engine.VerbRefund, booked-actual
	}
	p, err := l.limitFor(ctx, key, op.Now)
	for _, cost := range [...]float64{booked, actual} {
		if err == nil {
			err = p.CheckCost(op.Verb, cost) // a settlement's costs are any a request may have
		}
	}
	if err != nil {
		return dec, l.refuse(ctx, key, op, decided(&dec), fmt.Errorf("settling %v booked as %v: %w", actual, booked, err))
	}
	return dec, l.do(ctx, key, p, op, decided(&dec))
}
