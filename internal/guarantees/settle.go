package guarantees

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

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

// settling is a settlement to come: booking's actual cost, at an instant.
type settling struct {
	at      int64
	booking int
	actual  float64
}

// SettleTraffic runs n random requests on k, from start on, about two a
// unit's share of the period apart: admissions and reservations of cost,
// each settled between its instant and two periods after it with an
// actual cost drawn around it (see [ActualCost]).
func (k *Key) SettleTraffic(rng *rand.Rand, start int64, cost float64, n int) error {
	p := k.params
	period, gap := Period(p), unitGap(p)
	var due []settling
	settleUntil := func(now int64) error {
		slices.SortStableFunc(due, func(a, b settling) int { return cmp.Compare(a.at, b.at) })
		for len(due) > 0 && due[0].at <= now {
			if _, err := k.Settle(due[0].at, due[0].booking, due[0].actual); err != nil {
				return err
			}
			due = due[1:]
		}
		return nil
	}
	now := start
	for range n {
		now += rng.Int64N(max(gap, 1))
		if err := settleUntil(now); err != nil {
			return err
		}
		var d engine.Decision
		var err error
		if rng.IntN(3) == 0 {
			delays := [...]int64{0, period / 4, period}
			d, _, err = k.Reserve(now, cost, delays[rng.IntN(len(delays))])
		} else {
			d, err = k.Apply(engine.VerbAllow, now, cost)
		}
		if err != nil {
			return err
		}
		if d.Allowed {
			acts := now + int64(d.Delay)
			due = append(due, settling{acts + rng.Int64N(2*period+1), len(k.bookings) - 1, ActualCost(rng, p, cost)})
		}
	}
	return settleUntil(math.MaxInt64)
}

// ActualCost draws a request's actual cost around its estimate: none,
// less, the same, more, or far more; whole units for the GCRA, whose
// bound in amounts needs costs of whole nanoseconds.
func ActualCost(rng *rand.Rand, p engine.Params, estimate float64) float64 {
	var actual float64
	switch rng.IntN(6) {
	case 0:
	case 1:
		actual = estimate
	case 2:
		actual = 3 * estimate
	default:
		actual = rng.Float64() * 2 * estimate
	}
	if p.Kind == engine.KindGCRA {
		return math.Round(actual)
	}
	return math.Round(actual*1000) / 1000
}

// record is one change to a key's ledger: a booking's estimate at its
// instant, a charge at the instant it was settled, or a refund's part
// that freed the latest cost the key held, at that cost's instant.
type record struct {
	at     int64
	amount float64
	// after is how many bookings were decided before it; booking is the
	// request it is about: booked, charged, or refunded.
	after, booking int
	kind           recordKind
}

type recordKind uint8

const (
	booked recordKind = iota
	charged
	freed
)

// ledger returns k's records (within Slack of the limit), in the order they were decided. A refund
// frees what the key recorded last: the GCRA's TAT and a bucket's level
// at its latest point are the stack of the costs recorded, each on top of
// those before it, and a refund takes from its top. A refund that frees
// more than the key recorded is reported.
func (k *Key) ledger() ([]record, error) {
	bookings, settlements := k.bookings, k.settled
	var out, stack []record
	settle := func(s Settlement) error {
		if s.Moved >= 0 {
			r := record{at: s.Decided, amount: s.Moved, after: s.After, booking: s.Booking, kind: charged}
			out, stack = append(out, r), append(stack, r)
			return nil
		}
		for left := -s.Moved; left > Slack*k.params.Limit; {
			if len(stack) == 0 {
				return fmt.Errorf("a refund of %v at %d freed %v more than the key recorded", -s.Moved, s.Decided, left)
			}
			top := &stack[len(stack)-1]
			x := min(left, top.amount)
			out = append(out, record{at: top.at, amount: -x, after: s.After, booking: s.Booking, kind: freed})
			top.amount -= x
			left -= x
			if top.amount <= Slack*k.params.Limit {
				stack = stack[:len(stack)-1]
			}
		}
		return nil
	}
	next := 0
	for i, b := range bookings {
		for ; next < len(settlements) && settlements[next].After <= i; next++ {
			if err := settle(settlements[next]); err != nil {
				return nil, err
			}
		}
		r := record{at: b.Acts, amount: b.Cost, after: i, booking: i, kind: booked}
		out, stack = append(out, r), append(stack, r)
	}
	for ; next < len(settlements); next++ {
		if err := settle(settlements[next]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// CheckSettled checks Limiter.Settle's guarantee on k's bookings and
// settlements, with the cost of its requests' estimates, within Slack of
// the limit (the float algorithms' rounding), for every interval that ends with a booking j admitted
// without a wait, at v, counting what was decided by then (records whose
// after is j at most), up to ten periods long.
//
//   - the ledger: admitted estimates at their instants, plus charges when
//     settled, less what refunds freed, taken from the latest costs the
//     key recorded (at their instants), within the algorithm's guarantee;
//   - the actual costs, at the instants their requests acted, within the
//     guarantee plus the excess of the interval's requests not settled
//     yet, plus what refunds for requests outside it freed in it.
func (k *Key) CheckSettled(cost float64) error {
	p := k.params
	all, err := k.ledger()
	if err != nil {
		return err
	}
	slices.SortStableFunc(all, func(a, b record) int { return cmp.Compare(b.at, a.at) }) // latest first
	bookings := k.bookings
	settledBy := make([]int, len(bookings)) // the After of each booking's settlement
	actual := make([]float64, len(bookings))
	for i := range settledBy {
		settledBy[i] = math.MaxInt
	}
	for _, s := range k.settled {
		settledBy[s.Booking], actual[s.Booking] = s.After, s.Actual
	}
	longest := 10 * Period(p)
	for j, b := range bookings {
		if b.Acts != b.Decided {
			continue // booked ahead: an interval ends at a request admitted without a wait
		}
		v := b.Acts
		first, _ := slices.BinarySearchFunc(all, v, func(r record, v int64) int { return cmp.Compare(v, r.at) })
		var sum, actuals, unsettled, freedOutside float64
		in := map[int]bool{}          // the bookings acting in the interval so far
		freedFor := map[int]float64{} // per other booking, what its refunds freed in the interval
		for n := first; n < len(all) && v-all[n].at < longest; n++ {
			r := all[n]
			if r.after > j {
				continue
			}
			u := r.at
			sum += r.amount
			switch r.kind {
			case booked:
				in[r.booking] = true
				freedOutside -= freedFor[r.booking] // its own refunds, from now on
				actuals += actual[r.booking]
				if settledBy[r.booking] > j {
					unsettled += max(actual[r.booking]-bookings[r.booking].Cost, 0)
				}
			case freed:
				if !in[r.booking] {
					freedFor[r.booking] -= r.amount
					freedOutside -= r.amount
				}
			}
			if n+1 < len(all) && all[n+1].at == u {
				continue // the interval starts at u: all of u's records first
			}
			bound := Bound(p, v-u+1, cost) + Slack*p.Limit
			if sum > bound {
				return fmt.Errorf("the ledger of [%d, %d] holds %v, guaranteed at most %v", u, v, sum, bound)
			}
			if actuals > bound+unsettled+freedOutside {
				return fmt.Errorf("[%d, %d] saw %v of actual costs, guaranteed at most %v, plus %v not settled yet and %v freed by refunds for requests outside it",
					u, v, actuals, bound, unsettled, freedOutside)
			}
		}
	}
	return nil
}
