package sluice_test

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/guarantees"
)

// The settle bounds drive each algorithm that settles with random traffic
// whose requests are admitted (or booked ahead) with an estimated cost and
// settled later with an actual cost drawn around it: none, less, the
// same, more, far more. They check the guarantee Limiter.Settle states,
// over every interval that ends with a request admitted without a wait,
// counting what was decided by then:
//
//   - the ledger: admitted estimates at their instants, plus charges when
//     settled, less what refunds freed, taken from the latest costs the
//     key recorded (at their instants), within the algorithm's guarantee;
//   - the actual costs, at the instants their requests acted, within the
//     guarantee plus the excess of the interval's requests not settled
//     yet, plus what refunds for requests outside it freed in it.

func TestSettledCostStaysWithinTheGuarantee(t *testing.T) {
	start := time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC).UnixNano()
	for ai, alg := range reservingAlgorithms(t) {
		p := alg.params
		t.Run(alg.name, func(t *testing.T) {
			t.Parallel()
			var refunded, charged int
			for _, cost := range boundCosts(p) {
				for trace := range traceCount(4) {
					rng := rand.New(rand.NewPCG(uint64(ai), uint64(trace)))
					k := guarantees.NewKey(p)
					settleTraffic(t, rng, k, p, start, cost)
					where := fmt.Sprintf("cost %v, trace %d", cost, trace)
					requireSettledBounds(t, p, k, cost, where)
					for _, s := range k.Settlements() {
						refunded += b2i(s.Moved < 0)
						charged += b2i(s.Moved > 0)
					}
				}
			}
			require.Positive(t, refunded, "refunds given")
			require.Positive(t, charged, "charges recorded")
		})
	}
}

// settling is a settlement to come: booking's actual cost, at an instant.
type settling struct {
	at      int64
	booking int
	actual  float64
}

// settleTraffic runs 400 random requests on k, of p, about two a unit's
// share of the period apart: admissions and reservations of cost, each settled between its instant
// and two periods after it with an actual cost drawn around it.
func settleTraffic(t *testing.T, rng *rand.Rand, k *guarantees.Key, p engine.Params, start int64, cost float64) {
	t.Helper()
	period := guarantees.Period(p)
	gap := period * 2 / max(int64(p.Limit), 1)
	var due []settling
	settleUntil := func(now int64) {
		slices.SortStableFunc(due, func(a, b settling) int { return cmp.Compare(a.at, b.at) })
		for len(due) > 0 && due[0].at <= now {
			_, err := k.Settle(due[0].at, due[0].booking, due[0].actual)
			require.NoError(t, err)
			due = due[1:]
		}
	}
	now := start
	for range 400 {
		now += rng.Int64N(max(gap, 1))
		settleUntil(now)
		var d engine.Decision
		var err error
		if rng.IntN(3) == 0 {
			delays := [...]int64{0, period / 4, period}
			d, _, err = k.Reserve(now, cost, delays[rng.IntN(len(delays))])
		} else {
			d, err = k.Apply(engine.VerbAllow, now, cost)
		}
		require.NoError(t, err)
		if d.Allowed {
			acts := now + int64(d.Delay)
			due = append(due, settling{acts + rng.Int64N(2*period+1), len(k.Bookings()) - 1, actualCost(rng, p, cost)})
		}
	}
	settleUntil(math.MaxInt64)
}

// actualCost draws a request's actual cost around its estimate: none,
// less, the same, more, or far more; whole units for the GCRA, whose
// bound in amounts needs costs of whole nanoseconds.
func actualCost(rng *rand.Rand, p engine.Params, estimate float64) float64 {
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

// ledger returns k's records, in the order they were decided. A refund
// frees what the key recorded last: the GCRA's TAT and a bucket's level
// at its latest point are the stack of the costs recorded, each on top of
// those before it, and a refund takes from its top. A refund that frees
// more than the key recorded is reported.
func ledger(p engine.Params, k *guarantees.Key) ([]record, error) {
	bookings, settlements := k.Bookings(), k.Settlements()
	var out, stack []record
	settle := func(s guarantees.Settlement) error {
		if s.Moved >= 0 {
			r := record{at: s.Decided, amount: s.Moved, after: s.After, booking: s.Booking, kind: charged}
			out, stack = append(out, r), append(stack, r)
			return nil
		}
		for left := -s.Moved; left > boundSlack*p.Limit; {
			if len(stack) == 0 {
				return fmt.Errorf("a refund of %v at %d freed %v more than the key recorded", -s.Moved, s.Decided, left)
			}
			top := &stack[len(stack)-1]
			x := min(left, top.amount)
			out = append(out, record{at: top.at, amount: -x, after: s.After, booking: s.Booking, kind: freed})
			top.amount -= x
			left -= x
			if top.amount <= boundSlack*p.Limit {
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

// requireSettledBounds checks Settle's guarantee on k's bookings and
// settlements, for every interval that ends with a booking j admitted
// without a wait, at v, counting what was decided by then (records whose
// after is j at most), up to ten periods long.
func requireSettledBounds(t *testing.T, p engine.Params, k *guarantees.Key, cost float64, where string) {
	t.Helper()
	all, err := ledger(p, k)
	require.NoError(t, err, where)
	slices.SortStableFunc(all, func(a, b record) int { return cmp.Compare(b.at, a.at) }) // latest first
	bookings := k.Bookings()
	settledBy := make([]int, len(bookings)) // the After of each booking's settlement
	actual := make([]float64, len(bookings))
	for i := range settledBy {
		settledBy[i] = math.MaxInt
	}
	for _, s := range k.Settlements() {
		settledBy[s.Booking], actual[s.Booking] = s.After, s.Actual
	}
	longest := 10 * guarantees.Period(p)
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
			bound := guaranteed(p, v-u+1, cost) + boundSlack*p.Limit
			require.LessOrEqual(t, sum, bound, "%s: the ledger of [%d, %d] holds %v, guaranteed at most %v", where, u, v, sum, bound)
			require.LessOrEqual(t, actuals, bound+unsettled+freedOutside,
				"%s: [%d, %d] saw %v of actual costs, guaranteed at most %v, plus %v not settled yet and %v freed by refunds for requests outside it",
				where, u, v, actuals, bound, unsettled, freedOutside)
		}
	}
}
