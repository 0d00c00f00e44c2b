package guarantees

import (
	"fmt"

	"github.com/sluice-go/sluice/engine"
)

// Settlement is one settlement on a [Key]: the excess of a booking's
// actual cost over its estimate charged, or what it did not use given
// back.
type Settlement struct {
	// Booking is the index of the booking settled, and After how many
	// bookings were decided before the settlement.
	Booking, After int
	// Decided is when it was decided.
	Decided int64
	// Actual is the booking's actual cost.
	Actual float64
	// Moved is what it changed on the key: the cost charged, or minus the
	// cost given back (the decision's Granted).
	Moved float64
}

// Settlements returns every settlement so far, in the order it was
// decided.
func (k *Key) Settlements() []Settlement { return k.settled }

// Settle settles booking i at now with its actual cost, as
// Limiter.Settle does: the excess over the booked cost charged, or what
// it did not use refunded.
func (k *Key) Settle(now int64, i int, actual float64) (engine.Decision, error) {
	if i < 0 || i >= len(k.bookings) {
		return engine.Decision{}, fmt.Errorf("no booking %d", i)
	}
	op := engine.Op{Verb: engine.VerbCharge, Cost: actual - k.bookings[i].Cost, Now: now}
	if op.Cost < 0 {
		op.Verb, op.Cost = engine.VerbRefund, -op.Cost
	}
	d, err := k.do(op)
	if err != nil {
		return d, err
	}
	moved := d.Granted
	if op.Verb == engine.VerbRefund {
		moved = -moved
	}
	k.settled = append(k.settled, Settlement{Booking: i, After: len(k.bookings), Decided: now, Actual: actual, Moved: moved})
	return d, nil
}
