package sluice_test

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/engine"
	"github.com/sluice-go/sluice/internal/guarantees"
)

// The shaping bound tests drive each algorithm that reserves with the
// traffic of guarantees.ShapingAdversaries (waiters, cancels of every
// kind, partial grants, random mixes) and count each admission at the
// instant its caller may act (now + Delay), less the bookings a cancel
// gave back. The cost admitted in any interval of length d must stay
// within the algorithm's documented guarantee, as for Allow alone, and
// waiters of equal cost must act in the order they booked.

func TestShapingStaysWithinTheGuarantee(t *testing.T) {
	start := time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC).UnixNano()
	for _, alg := range reservingAlgorithms(t) {
		p := alg.params
		t.Run(alg.name, func(t *testing.T) {
			t.Parallel()
			period := guarantees.Period(p)
			lengths := []int64{1, max(p.Interval/3, 1), p.Interval, period, period * 5 / 2, 10 * period}
			for _, cost := range boundCosts(p) {
				for _, adv := range guarantees.ShapingAdversaries(p, cost) {
					t.Run(fmt.Sprintf("%s, cost %v", adv.Name, cost), func(t *testing.T) {
						k := guarantees.NewKey(p)
						require.NoError(t, adv.Run(k, start))
						admitted := k.Admitted()
						require.NotEmpty(t, admitted)
						for _, d := range lengths {
							got, bound := guarantees.MaxInWindow(admitted, d), guarantees.Bound(p, d, cost)
							require.LessOrEqual(t, got, bound+boundSlack*p.Limit,
								"%v admitted in an interval of %v, guaranteed at most %v (cancels gave back %v of bookings given back already)",
								got, time.Duration(d), bound, k.Regiven())
						}
						requireBookingOrder(t, k.Bookings())
					})
				}
			}
		})
	}
}

// requireBookingOrder requires the admissions of equal cost that stand to
// act in the order they were decided: no request admitted or booked after
// another of the same cost acts before it.
func requireBookingOrder(t *testing.T, bookings []guarantees.Booking) {
	t.Helper()
	latest := map[float64]int{} // per cost, the index of the latest booking
	for i, b := range bookings {
		if b.GivenBack || b.Verb == engine.VerbAtMost {
			continue
		}
		if j, ok := latest[b.Cost]; ok {
			require.GreaterOrEqual(t, b.Acts, bookings[j].Acts,
				"booking %d (%+v) acts before booking %d (%+v), decided earlier", i, b, j, bookings[j])
		}
		latest[b.Cost] = i
	}
}

// TestWaitersActOneCostApartInBookingOrder books 64 waiters of one unit on
// a key at one instant, from rest: the first burst of them act at once,
// and each of the others one unit's worth of time after the one booked
// before it: exactly the emission interval T for GCRA, Amount of them at
// each refill with interval refill, and for the meters at the first
// nanosecond at which the units after the burst have leaked at the rate
// since it (within the meters' float tolerance of 1 ns), so that their
// instants do not drift.
func TestWaitersActOneCostApartInBookingOrder(t *testing.T) {
	start := time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC).UnixNano()
	for _, alg := range reservingAlgorithms(t) {
		p := alg.params
		t.Run(alg.name, func(t *testing.T) {
			k := guarantees.NewKey(p)
			for range 64 {
				_, _, err := k.Reserve(start, 1, 1<<60)
				require.NoError(t, err)
			}
			b := k.Bookings()
			require.Len(t, b, 64)
			// The meters' instants come from float amounts, and may fall
			// one nanosecond either side of the exact one (the tolerance
			// of reference.Compare); the others' are exact.
			var tolerance int64
			if p.Kind != engine.KindGCRA && !p.IntervalRefill {
				tolerance = 1
			}
			burst := 0
			for i := range b {
				want := waiterInstant(p, start, i)
				if want == start {
					burst++
				}
				require.InDelta(t, want, b[i].Acts, float64(tolerance), "waiter %d of %d", i, len(b))
				if i > 0 {
					require.GreaterOrEqual(t, b[i].Acts, b[i-1].Acts, "waiter %d acts before the one booked before it", i)
				}
			}
			require.GreaterOrEqual(t, burst, 1, "the first waiter acts at once")
		})
	}
}

// waiterInstant returns when waiter i (from 0) of unit cost, booked at
// start on a fresh key with the others, may act, in exact arithmetic.
func waiterInstant(p engine.Params, start int64, i int) int64 {
	if p.Kind == engine.KindGCRA {
		// allowAt = start + (i+1)*T - tau, or start if that is earlier.
		tau := int64(math.Round(p.Limit * float64(p.Interval)))
		return max(start, start+int64(i+1)*p.Interval-tau)
	}
	// Waiter i needs i+1 units, of which the burst holds Limit at start.
	excess := new(big.Rat).Sub(big.NewRat(int64(i+1), 1), new(big.Rat).SetFloat64(p.Limit))
	if excess.Sign() <= 0 {
		return start
	}
	amount := new(big.Rat).SetFloat64(p.Amount)
	if p.IntervalRefill {
		// Amount more at each whole refill.
		return start + ceilRat(new(big.Rat).Quo(excess, amount))*p.Interval
	}
	// The meter leaks Amount per Interval from start: the excess has
	// leaked at the first nanosecond at or after excess*Interval/Amount.
	ns := new(big.Rat).Quo(new(big.Rat).Mul(excess, big.NewRat(p.Interval, 1)), amount)
	return start + ceilRat(ns)
}

// ceilRat returns the smallest integer at least x, which is positive.
func ceilRat(x *big.Rat) int64 {
	q := new(big.Int).Quo(x.Num(), x.Denom())
	if !x.IsInt() {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

// TestCancelGivesBackOnlyItsOwnReservation cancels a reservation, lets
// another request of the same cost book the instant it gave back, and
// cancels the first one again, as a caller retrying a cancel whose answer
// it did not get would. The second cancel must give nothing back: the
// instant now belongs to the second reservation, whose caller will act
// then, and giving its cost back lets a third request act beside it,
// beyond the algorithm's bound (TestShapingStaysWithinTheGuarantee's
// adversaries that cancel twice measure by how much).
func TestCancelGivesBackOnlyItsOwnReservation(t *testing.T) {
	start := time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC).UnixNano()
	for _, alg := range reservingAlgorithms(t) {
		p := alg.params
		t.Run(alg.name, func(t *testing.T) {
			k := guarantees.NewKey(p)
			for {
				d, err := k.Apply(engine.VerbAllow, start, 1)
				require.NoError(t, err)
				if !d.Allowed {
					break
				}
			}
			_, first, err := k.Reserve(start, 1, 1<<60)
			require.NoError(t, err)
			at := k.Bookings()[first].At
			require.NotZero(t, at, "the first reservation waits")
			d, err := k.Cancel(start, first)
			require.NoError(t, err)
			require.True(t, d.Allowed, "the first cancel gives the cost back")
			_, second, err := k.Reserve(start, 1, 1<<60)
			require.NoError(t, err)
			// The same instant, or for the meters one that their float
			// amounts round to a nanosecond either side.
			require.InDelta(t, at, k.Bookings()[second].At, 1, "the second reservation books the instant given back")
			d, err = k.Cancel(start, first)
			require.NoError(t, err)
			require.False(t, d.Allowed, "the first reservation, cancelled again, gave back the second one's cost: %+v", d)
			_, third, err := k.Reserve(start, 1, 1<<60)
			require.NoError(t, err)
			require.Greater(t, k.Bookings()[third].At, at, "a third reservation acts beside the second")
		})
	}
}

// TestShapingWithAClockSteppingBackStaysWithinTheGuarantee mixes Allow,
// reservations with any MaxDelay, cancels of any booking and partial
// grants on a clock that steps back by up to a period a fifth of the
// time: decisions made before the key's state (behind a booked point, or
// at an earlier TAT) are stricter, so that the admissions, counted when
// their callers act, still keep the bound in every interval.
func TestShapingWithAClockSteppingBackStaysWithinTheGuarantee(t *testing.T) {
	start := time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC).UnixNano()
	for ai, alg := range testAlgorithms(t) { // ai seeds the traces
		p := alg.params
		if !p.Reservable() {
			continue
		}
		t.Run(alg.name, func(t *testing.T) {
			period := guarantees.Period(p)
			lengths := []int64{1, p.Interval, period, 3 * period}
			for trace := range uint64(100) {
				rng := rand.New(rand.NewPCG(uint64(ai), trace))
				k := guarantees.NewKey(p)
				now := start
				var booked []int
				for range 400 {
					var err error
					switch r := rng.IntN(10); {
					case r < 3:
						_, err = k.Apply(engine.VerbAllow, now, 1)
					case r < 6:
						var i int
						if _, i, err = k.Reserve(now, 1, rng.Int64N(3*period)); i >= 0 && k.Bookings()[i].At != 0 {
							booked = append(booked, i)
						}
					case r < 8 && len(booked) > 0:
						j := rng.IntN(len(booked))
						_, err = k.Cancel(now, booked[j])
						booked = append(booked[:j], booked[j+1:]...)
					default:
						_, err = k.AllowAtMost(now, float64(1+rng.IntN(3*int(math.Ceil(p.Limit)))))
					}
					require.NoError(t, err)
					if rng.IntN(5) == 0 {
						now -= rng.Int64N(period)
					} else {
						now += rng.Int64N(max(period/int64(math.Ceil(p.Limit)), 1))
					}
				}
				for _, d := range lengths {
					got, bound := guarantees.MaxInWindow(k.Admitted(), d), guarantees.Bound(p, d, 1)
					require.LessOrEqual(t, got, bound+boundSlack*p.Limit,
						"trace %d: %v admitted in an interval of %v, guaranteed at most %v", trace, got, time.Duration(d), bound)
				}
			}
		})
	}
}
