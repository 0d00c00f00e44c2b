package sluice

import (
	"context"
	"fmt"

	"github.com/sluice-go/sluice/engine"
)

// Settle corrects what a request admitted on key with an estimated cost,
// booked (by Allow, Wait, Reserve or AllowAtMost's Granted), recorded, once
// its actual cost is known, in one atomic call to the store: the excess of
// actual over booked is charged, and what it did not use is given back.
//
// A charge is recorded whatever the key holds, up to what its rate frees
// in 2^60 ns (about 36 years): a key beyond its limit is in debt, admits
// nothing until its rate has repaid the excess (RetryAfter says when), and
// then frees its allowance as after a burst. A refund gives back at most
// what the key holds at its latest point (now, or a turn booked ahead),
// from what it recorded last: turns booked ahead move earlier, their
// callers still acting at their instants. The decision describes the key
// afterwards as CanAccept(ctx, key, 0) would (not Allowed while in debt or
// blocked; a penalty's block stays), with Granted the cost charged or
// given back.
//
// Guarantee: counting each charge as admitted when settled, and each refund
// as taking back the latest costs recorded, the algorithm's guarantee holds
// over every interval that ends with a request admitted without a wait;
// counting actual costs, it may be exceeded by the excess of the
// interval's requests not settled yet, and by what refunds for requests
// outside it freed in it. The GCRA, the leaky bucket and the token bucket
// settle; the others return an error wrapping [ErrUnsupported]. A booked or
// actual cost that is negative, NaN or infinite returns an error wrapping
// [ErrInvalidCost].
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
